"""Do the shipped timm speedups agree with timm's own published ones? The headline
column's passing timm cells (inductor default, bf16 autocast, batch 64, one H200) beside
timm's compile-over-eager throughput from its published benchmark CSVs (float16 autocast,
batches of up to 1,024, another GPU and torch: data/reference/README.md)::

    python benchmarks/published_compare.py > docs/timm-published.md

A model is paired where timm benchmarked it at the image size the zoo runs it at (the
catalogue's input size). Prints rank agreement (Spearman's rho) of the wall-clock and
GPU-time speedups with timm's, overall and by what bounds the cell's eager side, by how
it was timed (inside one autocast region or per call), the same cells before and after
they were measured again, and the largest disagreements both ways. It measures nothing.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import shipped  # noqa: E402
from benchmarks.remeasure_pairs import bound_label, cell  # noqa: E402
from benchmarks.zoo_report import HEADLINE  # noqa: E402
from runner.matrix.labels import LAUNCH_BOUND_RATIO, is_launch_bound  # noqa: E402
from runner.report import rank_correlation  # noqa: E402
from runner.store.schema import one_autocast_region  # noqa: E402
from zoo.catalog import list_all  # noqa: E402
from zoo.published import REFERENCE, Figure  # noqa: E402
from zoo.published import load as published_figures  # noqa: E402

TOP = 12
AGREEMENT_COLUMNS = (
    "| pairs | rho, wall-clock | rho, GPU time | median ours / theirs | same side of 1.0x |"
)
PAIR_HEADER = (
    "| model | ours, wall-clock | ours, GPU time | timm's | our eager side |\n"
    "| --- | --- | --- | --- | --- |"
)


@dataclass(frozen=True)
class Ours:
    """One headline timm cell's figures, from its newest row (or an older one)."""

    model: str
    speedup: float
    gpu_speedup: float | None
    launch_bound: bool | None
    one_region: bool


@dataclass(frozen=True)
class Pair:
    ours: Ours
    figure: Figure  # timm's, at the image size the zoo runs the model at

    @property
    def theirs(self) -> float:
        """timm's compiled samples/s over its eager samples/s."""
        return self.figure.ratio


def image_sizes() -> dict[str, int]:
    """Each square-input timm model's image side, as the zoo builds its inputs."""
    sizes = {}
    for spec in list_all("timm"):
        size = spec.input_size
        if size and len(size) == 3 and size[1] == size[2]:
            sizes[spec.id] = size[1]
    return sizes


def pair(
    ours: list[Ours], published: dict[tuple[str, int], Figure], sizes: dict[str, int]
) -> tuple[list[Pair], int]:
    """Our cells that timm benchmarked at the same image size, and how many were not."""
    pairs, missing = [], 0
    for one in ours:
        figure = published.get((one.model.removeprefix("timm/"), sizes.get(one.model, -1)))
        if figure is None:
            missing += 1
        else:
            pairs.append(Pair(one, figure))
    return pairs, missing


def _batch_step(p: Pair) -> int:
    """timm's compiled batch less its eager batch."""
    return p.figure.compiled_batch - p.figure.eager_batch


def agreement(pairs: list[Pair]) -> tuple[float | None, float | None, float, float]:
    """Spearman's rho of our wall-clock and GPU-time speedups against timm's (GPU time
    over the pairs with a profile), the median of ours over theirs, and the share on the
    same side of 1.0x."""
    wall = rank_correlation([p.ours.speedup for p in pairs], [p.theirs for p in pairs])
    profiled = [p for p in pairs if p.ours.gpu_speedup]
    gpu = rank_correlation([p.ours.gpu_speedup for p in profiled], [p.theirs for p in profiled])
    ratio = statistics.median(p.ours.speedup / p.theirs for p in pairs)
    same = sum((p.ours.speedup >= 1.0) == (p.theirs >= 1.0) for p in pairs) / len(pairs)
    return wall, gpu, ratio, same


def _rho(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def agreement_row(name: str, pairs: list[Pair]) -> str:
    if not pairs:
        return f"| {name} | 0 | - | - | - | - |"
    wall, gpu, ratio, same = agreement(pairs)
    return f"| {name} | {len(pairs)} | {_rho(wall)} | {_rho(gpu)} | {ratio:.2f} | {same:.0%} |"


def _x(value: float | None) -> str:
    return "-" if not value else f"{value:.2f}x"


def pair_row(p: Pair) -> str:
    return (
        f"| {cell(p.ours.model)} | {_x(p.ours.speedup)} | {_x(p.ours.gpu_speedup)} | "
        f"{_x(p.theirs)} | {bound_label(p.ours.launch_bound)} |"
    )


def rows(con, table: str = "latest_results", condition: str = "true") -> list[Ours]:
    """The passing headline timm cells of ``table`` (``latest_results``: each cell's
    newest row; ``results``: every row, oldest first) that meet ``condition``."""
    query = (
        "SELECT model_id, speedup, gpu_speedup, coalesce(list_min(eager_samples_ms), eager_ms), "
        f"eager_gpu_ms, {one_autocast_region()} FROM {table} WHERE {HEADLINE} "
        f"AND suite = 'timm' AND status = 'pass' AND speedup > 0 AND {condition} "
        "ORDER BY recorded_at, result_id"
    )
    return [
        Ours(model, speedup, gpu, is_launch_bound(eager, eager_gpu), bool(one))
        for model, speedup, gpu, eager, eager_gpu, one in con.execute(query).fetchall()
    ]


def before_and_after(con) -> tuple[list[Ours], list[Ours]]:
    """The cells with a passing row timed in one autocast region and a passing row timed
    per call: each kind's newest row, in the same model order. (Per-call timing came
    after one-region timing, so the per-call row is the later of the two.)"""
    old = {row.model: row for row in rows(con, "results", one_autocast_region())}
    new = {row.model: row for row in rows(con, "results", f"NOT {one_autocast_region()}")}
    both = sorted(set(old) & set(new))
    return [old[m] for m in both], [new[m] for m in both]


def main() -> int:
    parser = shipped.parser(__doc__)
    parser.add_argument(
        "--reference",
        type=Path,
        default=REFERENCE,
        help="timm's published figures, joined as data/reference/README.md describes",
    )
    args = parser.parse_args()
    if not args.reference.is_file():
        parser.exit(2, f"error: no reference file at {args.reference}; pass --reference\n")
    published = published_figures(args.reference)
    con, card = shipped.connect_card(args)
    sizes = image_sizes()
    pairs, missing = pair(rows(con), published, sizes)
    print("# The shipped timm speedups beside timm's published ones\n")
    print(
        "Made by `python benchmarks/published_compare.py`. Ours: the headline column's "
        "passing timm cells (inductor default, bf16 autocast, batch 64, the newest row of "
        f"each; {card.line()}) Theirs: timm's own benchmark, compiled samples per second "
        "over eager's, on one RTX 5090 (torch 2.9.1, float16 autocast, batches of up to "
        "1,024; `data/reference/README.md`). A model is paired where timm benchmarked it "
        f"at the image size the zoo runs it at: {len(pairs)} cells paired, {missing} not "
        "(no timm figure at that size).\n"
    )
    if not pairs:
        print("No cells to pair.")
        return 0
    print(
        "Spearman's rho ranks the two columns against each other (1.0: the same order). "
        "A launch-bound cell's fastest eager call took "
        f"{LAUNCH_BOUND_RATIO:g}x its GPU busy time or more, so its wall-clock speedup is "
        "partly the host's; timm's large batches leave little host time to save.\n"
    )
    print(f"| cells {AGREEMENT_COLUMNS}\n| --- | --- | --- | --- | --- | --- |")
    print(agreement_row("all", pairs))
    for name, pick in (
        ("eager side launch-bound", lambda p: p.ours.launch_bound is True),
        ("eager side GPU-bound", lambda p: p.ours.launch_bound is False),
        ("timed inside one autocast region", lambda p: p.ours.one_region),
        ("timed per call", lambda p: not p.ours.one_region),
        ("timm's two sides at one batch", lambda p: _batch_step(p) == 0),
        ("timm's compiled side at a larger batch", lambda p: _batch_step(p) > 0),
        ("timm's compiled side at a smaller batch", lambda p: _batch_step(p) < 0),
    ):
        print(agreement_row(name, [p for p in pairs if pick(p)]))
    print(
        "\ntimm's benchmark lowers each side's batch on its own until it fits in memory, so "
        "a figure's two sides may have run at different batches; ours ran both at 64."
    )

    # Both lists hold the same models, so both pair (or not) alike.
    old, new = before_and_after(con)
    old_pairs, _ = pair(old, published, sizes)
    new_pairs, _ = pair(new, published, sizes)
    if new_pairs:
        print(
            "\nThe same cells before and after they were measured again per call (their "
            "one-region row and their per-call row), so that the two rows differ in how "
            "they were timed, not in which models they cover:\n"
        )
        print(f"| rows {AGREEMENT_COLUMNS}\n| --- | --- | --- | --- | --- | --- |")
        print(agreement_row("timed inside one autocast region", old_pairs))
        print(agreement_row("timed per call", new_pairs))

    below = [p for p in pairs if p.ours.speedup < 1.0 or p.theirs < 1.0]
    if below:
        print(
            f"\n## Slower compiled than eager in either\n\n{len(below)} models: "
            f"{sum(p.ours.speedup < 1.0 and p.theirs < 1.0 for p in below)} in both, "
            f"{sum(p.ours.speedup < 1.0 <= p.theirs for p in below)} in ours only, "
            f"{sum(p.theirs < 1.0 <= p.ours.speedup for p in below)} in timm's only.\n"
        )
        print(PAIR_HEADER)
        for p in sorted(below, key=lambda p: p.ours.speedup):
            print(pair_row(p))

    ranked = sorted(pairs, key=lambda p: p.ours.speedup / p.theirs)
    for title, chosen in (
        ("Where ours reads lowest against timm's", ranked[:TOP]),
        ("Where ours reads highest against timm's", ranked[::-1][:TOP]),
    ):
        print(f"\n## {title}\n")
        print(PAIR_HEADER)
        for p in chosen:
            print(pair_row(p))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
