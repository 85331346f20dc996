"""Does one card's matrix hold on another? The same cells recorded on two GPUs, side by
side: the headline column's cells (inductor default, dynamic false, bf16 autocast,
inference, by default) that both cards recorded, matched on the model and the cell's
axes, the newest row of each per card::

    python benchmarks/card_pairs.py --gpu H100 --against H200 [--runs-dir data/runs]

Prints: the cells both cards hold and whether their statuses agree (those that do not,
listed); per way the ``--against`` card's row was timed (per call, or inside one
autocast region: runner.store.schema.one_autocast_region), how the first card's
wall-clock and GPU-time speedups compare with the other's (ratios, Spearman's rho) and
how long its kernels take (each side's GPU busy time, over the other card's); then the
pairs where one card's host took far longer around the same kernels: a side's wall time
over its GPU time, on one card over the other, 1.5 or more, with the cells that were busy
beside each timing and the launch canary's reading. It reads shipped parquet runs (and a
database where given); it measures nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import shipped  # noqa: E402
from benchmarks.remeasure_pairs import fmt_ratio, rho_text  # noqa: E402
from dashboard.data import load  # noqa: E402
from runner.matrix.cells import KEY_FIELDS  # noqa: E402
from runner.report import rank_correlation  # noqa: E402
from runner.store.schema import one_autocast_region  # noqa: E402

# The headline column, by default (benchmarks/zoo_report.py's).
COLUMN = (
    "backend = 'inductor' AND mode = 'default' AND dynamic = 'false' AND precision = 'bf16' "
    "AND step = 'infer' AND device = 'cuda'"
)
# A side's wall time over its GPU time on one card, over the same on the other: from
# this ratio on, the pair is listed as one whose host took far longer on one card.
HOST_RATIO = 1.5
# The axes a cell is matched on across cards: its key without the environment (and the
# device, which COLUMN fixes).
AXES = tuple(field for field in KEY_FIELDS if field not in ("device", "env_id"))
MEASURES = (
    "status",
    "speedup",
    "gpu_speedup",
    "eager_ms",
    "eager_gpu_ms",
    "compiled_ms",
    "compiled_gpu_ms",
    "timing_beside",
    "host_launch_us",
    "recorded_at",
    "run_id",
)


def quantiles(values: list[float]) -> str:
    """The median, with the 10th and 90th percentiles where there are ten or more."""
    return fmt_ratio(values, parts=10)


def rho(xs: list[float], ys: list[float]) -> str:
    return rho_text(rank_correlation(xs, ys))


def host_share(ms: float | None, gpu_ms: float | None) -> float | None:
    """A side's wall time over its GPU busy time; None where either is missing."""
    return ms / gpu_ms if ms and gpu_ms else None


PER_CALL = "both per call"


def timed(a_one_region: bool, b_one_region: bool) -> str:
    """How a pair's two rows were timed, in words: per call (today's protocol) or inside
    one autocast region, which moves a launch-bound cell's wall-clock figures."""
    if a_one_region and b_one_region:
        return "both in one autocast region"
    if a_one_region or b_one_region:
        return f"{'A' if a_one_region else 'B'} in one autocast region"
    return PER_CALL


def main() -> int:
    parser = shipped.parser(__doc__)
    parser.add_argument("--against", default="H200", help="the other card (as --gpu takes it)")
    parser.set_defaults(gpu="H100")
    args = parser.parse_args()
    con, sources = load(args.runs_dir, args.db)
    for problem in sources.problems:
        print(f"warning: {problem}", file=sys.stderr)
    recorded = [gpu for (gpu,) in con.execute("SELECT DISTINCT gpu FROM environments").fetchall()]
    first = shipped.card_name(args.gpu, recorded)
    other = shipped.card_name(args.against, recorded)
    if first == other:
        print(f"error: --gpu and --against both name {first!r}; name two cards", file=sys.stderr)
        return 2
    con.execute(
        f"""CREATE TEMP VIEW per_card AS
        SELECT r.*, e.gpu, {one_autocast_region("r")} AS one_region
        FROM latest_results r JOIN (SELECT DISTINCT env_id, gpu FROM environments) e
        USING (env_id) WHERE {COLUMN}
        QUALIFY row_number() OVER (PARTITION BY e.gpu, {", ".join(AXES)}
                                   ORDER BY r.recorded_at DESC, r.result_id DESC) = 1"""
    )
    matched = " AND ".join(f"a.{axis} IS NOT DISTINCT FROM b.{axis}" for axis in AXES)
    rows = con.execute(
        f"""SELECT a.model_id, a.one_region, b.one_region,
               {", ".join(f"a.{m}" for m in MEASURES)}, {", ".join(f"b.{m}" for m in MEASURES)}
        FROM per_card a JOIN per_card b ON {matched}
        WHERE a.gpu = $first AND b.gpu = $other ORDER BY a.model_id""",
        {"first": first, "other": other},
    ).fetchall()
    n = len(MEASURES)
    pairs = [
        (
            model,
            timed(a_one, b_one),
            dict(zip(MEASURES, row[:n], strict=True)),
            dict(zip(MEASURES, row[n:], strict=True)),
        )
        for model, a_one, b_one, *row in rows
    ]
    print(f"# {first} beside {other}\n")
    print(
        f"Made by `python benchmarks/card_pairs.py`. The cells of the headline column "
        f"(inductor default, dynamic false, bf16 autocast, inference) that both cards "
        f"recorded, the newest row of each per card; A is the {first}, B the {other}.\n"
    )
    torch = con.execute(
        "SELECT gpu, string_agg(DISTINCT torch, ', ' ORDER BY torch) FROM environments "
        "WHERE gpu IN ($first, $other) GROUP BY gpu ORDER BY gpu",
        {"first": first, "other": other},
    ).fetchall()
    print("torch: " + "; ".join(f"{gpu} {versions}" for gpu, versions in torch) + ".\n")
    differ = [(m, a, b) for m, _, a, b in pairs if a["status"] != b["status"]]
    print(
        f"## Statuses\n\n{len(pairs)} cells on both cards; their statuses agree in "
        f"{len(pairs) - len(differ)}.\n"
    )
    if differ:
        print("| model | A | B | B recorded | B's run |\n| --- | --- | --- | --- | --- |")
        for model, a, b in differ:
            print(
                f"| {model} | {a['status']} | {b['status']} | "
                f"{b['recorded_at']:%Y-%m-%d} | {b['run_id'][:8]} |"
            )
        print()
    both = [(m, way, a, b) for m, way, a, b in pairs if a["status"] == b["status"] == "pass"]
    print(
        "## Speedups, A over B\n\nPer way the two rows were timed (per call, today's "
        "protocol, or inside one autocast region, which moves a launch-bound cell's "
        "wall-clock figures and not its kernels). Ratios: A's over B's, the median "
        "(10th-90th percentile); kernel time: a side's GPU busy time on A over B.\n"
    )
    print(
        "| timed | pairs | wall-clock | rho, wall-clock | GPU time | rho, GPU time | "
        "eager kernel time | compiled kernel time |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for way in sorted({way for _, way, _, _ in both}, key=lambda w: (w != PER_CALL, w)):
        group = [(a, b) for _, w, a, b in both if w == way]

        def ratio(key: str, group=group) -> list[float]:
            return [a[key] / b[key] for a, b in group if a[key] and b[key]]

        def paired(key: str, group=group) -> tuple[list[float], list[float]]:
            kept = [(a[key], b[key]) for a, b in group if a[key] and b[key]]
            return [x for x, _ in kept], [y for _, y in kept]

        print(
            f"| {way} | {len(group)} | {quantiles(ratio('speedup'))} | "
            f"{rho(*paired('speedup'))} | {quantiles(ratio('gpu_speedup'))} | "
            f"{rho(*paired('gpu_speedup'))} | {quantiles(ratio('eager_gpu_ms'))} | "
            f"{quantiles(ratio('compiled_gpu_ms'))} |"
        )
    hosted = []
    # Only pairs timed alike: one autocast region for the whole timing changes the host's
    # work per call (autocast's cached weight casts), not the host.
    same_way = [(m, a, b) for m, way, a, b in both if way == PER_CALL]
    for model, a, b in same_way:
        shares = [
            (
                host_share(a[f"{side}_ms"], a[f"{side}_gpu_ms"]),
                host_share(b[f"{side}_ms"], b[f"{side}_gpu_ms"]),
            )
            for side in ("eager", "compiled")
        ]
        if all(x and y for x, y in shares):
            worst = max((y / x for x, y in shares), key=lambda r: max(r, 1 / r))
            if max(worst, 1 / worst) >= HOST_RATIO:
                hosted.append((model, a, b, shares, worst))
    print(
        f"\n## A host far slower on one card\n\nPairs where a side's wall time over its GPU "
        f"time is {HOST_RATIO}x or more on one card than on the other (B's over A's below 1 "
        f"where A's host was the slower), of those both timed per call: {len(hosted)} of "
        f"{len(same_way)}. Beside: the cells "
        "busy beside each timing; canary: the launch canary's µs per call while it was "
        "timed (blank before schema 9).\n"
    )
    if hosted:
        print(
            "| model | B's run | wall / GPU, eager A, B | compiled A, B | B's over A's | "
            "speedup A, B | GPU-time speedup A, B | beside A, B | canary A, B |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")

        def num(value: float | None, digits: int = 1) -> str:
            return "" if value is None else f"{value:.{digits}f}"

        for model, a, b, shares, worst in sorted(hosted, key=lambda h: -h[-1]):
            (ea, eb), (ca, cb) = shares
            print(
                f"| {model} | {b['run_id'][:8]} | {ea:.2f}, {eb:.2f} | {ca:.2f}, {cb:.2f} | "
                f"{worst:.2f} | {a['speedup']:.2f}x, {b['speedup']:.2f}x | "
                f"{num(a['gpu_speedup'], 2)}, {num(b['gpu_speedup'], 2)} | "
                f"{num(a['timing_beside'])}, {num(b['timing_beside'])} | "
                f"{num(a['host_launch_us'])}, {num(b['host_launch_us'])} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
