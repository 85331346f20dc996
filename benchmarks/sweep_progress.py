"""How far the zoo sweep has come: per config and suite of a selection, the cells the
shipped runs hold against the cells planned, their statuses, and each chunk's rate.

Reads the shipped parquet (or a database) and the catalogue; builds nothing:

    python benchmarks/sweep_progress.py --models @headline --configs @headline --label zoo-headline
    python benchmarks/sweep_progress.py --models @core --configs @core --label zoo-core

prints markdown tables for data/runs/README.md (``--readme data/runs/README.md`` puts
them there in place of the block of the same configs and ``--gpu``: one card's block
beside another's). A config's cells on CUDA (one GPU's: ``--gpu``, by default the one with
the most) count for the selection's models whichever run recorded them (the GPU-time
checks recorded some of the headline column's); the chunk table lists the runs of the
sweep's label.

The last table estimates the device time left per config: the cells left, times the
mean wall time of the config's recorded CUDA cells (any model's) over the parallelism
the sweep's chunks reached (their cells' wall time over the chunks' own; the headline
chunks' where the label has none), or times the seconds such a cell held the GPU alone
where that is more (timing and autotuning never overlap: max-autotune's columns are
bound by their tuning). A cell recorded before rows kept those seconds counts the time
its timing plan gives its calls instead, except in a max-autotune column, which is left
unpriced until one of its cells recorded its holds (a timing plan misses the autotuning
that holds the GPU alone for most of such a cell). An estimate from what was measured, no more: a
config with few recorded cells, or cells of lighter models than the ones left, reads
low; the chunks' tails are in the parallelism. Its track record follows it: the same
rule priced over each finished chunk of the source label with ``HINDCAST_CELLS`` cells or
more (their own cells' walls and GPU-alone seconds), against the minutes the chunk took.
"""

from __future__ import annotations

import contextlib
import io
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import shipped  # noqa: E402
from runner.matrix import columns  # noqa: E402
from runner.matrix.cells import CellConfig  # noqa: E402
from runner.matrix.results import STATUSES  # noqa: E402
from runner.measure.timing import TIMING_PLANS  # noqa: E402
from runner.store.schema import one_autocast_region  # noqa: E402
from zoo.catalog import select  # noqa: E402

# Inductor modes whose compile autotunes kernels at length (holding the GPU alone): a
# column of them is priced only by cells that recorded those holds.
TUNED_MODES = ("max-autotune", "max-autotune-no-cudagraphs")
# The fewest cells a chunk needs for its hindcast (fewer: a few cells of one slow model,
# or a chunk spent on retries alone, say nothing about the rule).
HINDCAST_CELLS = 40


def main() -> int:
    parser = shipped.parser(__doc__)
    parser.add_argument("--models", default="@headline")
    parser.add_argument("--configs", default="@headline", help="a named set of columns")
    parser.add_argument("--label", default="zoo-headline", help="the sweep's run label")
    parser.add_argument(
        "--readme",
        type=Path,
        default=None,
        help="write the tables into this markdown file, in place of the block of the same "
        "configs and --gpu (from its 'Columns of' line through its hindcast line)",
    )
    args = parser.parse_args()
    if args.readme is None:
        report(args)
        return 0
    try:
        text = args.readme.read_text()
    except OSError as exc:
        print(f"error: cannot read --readme {args.readme}: {exc.strerror}", file=sys.stderr)
        return 2
    tables = io.StringIO()
    with contextlib.redirect_stdout(tables):
        start_line = report(args)
    try:
        updated = replace_block(text, start_line, tables.getvalue())
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.readme.write_text(updated)
    print(f"updated the {args.configs} tables in {args.readme}")
    return 0


def heading(configs: str, gpu: str | None) -> str:
    """The start of a block's first line: its configs, and the card where one is named
    (two cards' blocks of the same configs stand side by side)."""
    return f"Columns of {configs} (on CUDA{f', {gpu}' if gpu else ''})"


def replace_block(text: str, start_line: str, tables: str) -> str:
    """``text`` with the block of tables whose first line starts with ``start_line``
    (``heading``), through the next hindcast line, replaced by ``tables``; ValueError
    where ``text`` has no such block."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith(start_line)), None)
    end = None
    if start is not None:
        for i in range(start + 1, len(lines)):
            if lines[i].startswith("Columns of "):
                break
            if lines[i].startswith(("Hindcast:", "No finished ")):
                end = i
                break
    if start is None or end is None:
        raise ValueError(
            f"no block of tables (a line starting '{start_line}' through a 'Hindcast:' "
            "line) to replace; paste the tables in once by hand"
        )
    block = tables.strip("\n") + "\n"
    return "".join(lines[:start]) + block + "".join(lines[end + 1 :])


def report(args) -> str:
    """Print the progress tables of ``args``' selection and configs; return their block's
    heading (``heading``), with the card's full name where --gpu gave a part of it."""
    specs = select([args.models])
    planned = Counter(spec.suite for spec in specs)
    suite_of = {spec.id: spec.suite for spec in specs}
    # One card's progress: a row of another GPU (a user's own run) is not the sweep's.
    con, card = shipped.connect_card(args)
    rows = con.execute(
        "SELECT backend, mode, dynamic, precision, step, model_id, status, wall_s, "
        "eager_ms + compiled_ms, gpu_timing_s + gpu_tuning_s, "
        f"status = 'pass' AND {one_autocast_region()} FROM latest_results "
        "WHERE device = 'cuda' ORDER BY recorded_at DESC, result_id DESC"
    ).fetchall()
    # Per column: each model's status (one per model, its newest: another batch or size
    # of the same column is the same cell asked differently, and counts once); and each recorded
    # cell's wall seconds with the seconds it held the GPU alone (recorded, or what its
    # timing plan gives its calls), whatever its model.
    # A pass timed inside one autocast region is to be measured again (zoo-run does:
    # runner.store.schema.one_autocast_region), so it is left, not done.
    found: dict[CellConfig, dict[str, str]] = defaultdict(dict)
    again: dict[CellConfig, set[str]] = defaultdict(set)
    walls: dict[CellConfig, list[tuple[float, float, bool]]] = defaultdict(list)
    for *axes, model_id, status, wall_s, pair_ms, alone_s, one_region in rows:
        column = CellConfig(*axes)
        if model_id in suite_of and model_id not in found[column]:
            found[column][model_id] = status
            if one_region:
                again[column].add(model_id)
        if wall_s is not None and wall_s > 0:
            walls[column].append((wall_s, _alone_s(alone_s, pair_ms), alone_s is not None))
    sets = columns.columns(args.configs)
    start_line = heading(args.configs, card.gpu if args.gpu is not None else None)
    print(f"{start_line}, selection {args.models}:\n")
    print(f"{card.line()}\n")
    print(
        "| config | suite | recorded / planned | "
        + " | ".join(STATUSES)
        + " | passes to measure again (one autocast region) |"
    )
    print("| --- | --- | --- | " + " | ".join("---" for _ in STATUSES) + " | --- |")
    for column in sets:
        by_model = found[column]
        for suite in sorted(planned):
            counts = Counter(s for m, s in by_model.items() if suite_of[m] == suite)
            cells = " | ".join(str(counts.get(status, 0)) for status in STATUSES)
            recorded = sum(counts.values())
            stale = sum(1 for m in again[column] if suite_of[m] == suite)
            print(
                f"| {column.label()} | {suite} | {recorded} / {planned[suite]} | {cells} "
                f"| {stale} |"
            )
    chunks = _chunks(con, args.label)
    if chunks:
        print(f"\nChunks (label {args.label}):\n")
        print("| run | started (UTC) | cells | minutes | cells/hour |")
        print("| --- | --- | --- | --- | --- |")
        for run_id, started, _, cells, seconds, _ in chunks:
            rate = f"{cells / seconds * 3600:.0f}" if seconds else "-"
            minutes = f"{seconds / 60:.1f}" if seconds else "-"
            print(f"| {run_id[:8]} | {started:%Y-%m-%d %H:%M} | {cells} | {minutes} | {rate} |")
    left = {column: len(specs) - len(found[column]) + len(again[column]) for column in sets}
    parallel, source = _parallelism(con, args.label, chunks)
    _print_left(left, walls, parallel, source)
    if parallel is not None:
        _print_hindcast(con, source, parallel)
    else:
        print(f"\nNo finished {args.label} chunk with cells to check the rule on.")
    return start_line


def _timed_s(pair_ms: float | None) -> float:
    """Seconds a cell whose eager and compiled calls take ``pair_ms`` together times for,
    by the CUDA timing plan (0 for a cell that timed nothing)."""
    if not pair_ms:
        return 0.0
    plan = TIMING_PLANS["cuda"]
    pair_s = pair_ms / 1000
    return min(plan.max_pairs * pair_s, max(plan.budget_s, plan.min_pairs * pair_s))


def _alone_s(recorded_s: float | None, pair_ms: float | None) -> float:
    """The seconds a cell held the GPU alone: recorded, or what its timing plan gives
    its calls (rows from before the GPU-seconds columns)."""
    return recorded_s if recorded_s is not None else _timed_s(pair_ms)


def _priced_s(wall_s: float, alone_s: float, parallel: float) -> float:
    """The estimate's rule: a cell's wall seconds over the parallelism, or the seconds
    it held the GPU alone where more."""
    return max(wall_s / parallel, alone_s)


def _print_hindcast(con, label: str, parallel: float) -> None:
    """The rule priced over the finished chunks of ``label`` (``HINDCAST_CELLS`` cells or
    more) against the minutes each took: how far to trust the table above."""
    ratios = []
    for run_id, _, _, cells, seconds, _ in _chunks(con, label):
        if not seconds or cells < HINDCAST_CELLS:
            continue
        rows = con.execute(
            "SELECT wall_s, gpu_timing_s + gpu_tuning_s, eager_ms + compiled_ms FROM results "
            "WHERE run_id = ? AND wall_s > 0",
            [run_id],
        ).fetchall()
        priced = sum(_priced_s(wall, _alone_s(alone, pair), parallel) for wall, alone, pair in rows)
        if priced > 0:
            ratios.append(seconds / priced)
    if not ratios:
        print(f"\nNo finished {label} chunk of {HINDCAST_CELLS} cells or more to check it on.")
        return
    print(
        f"\nHindcast: priced by the same rule from their own cells, the {len(ratios)} "
        f"finished {label} chunks of {HINDCAST_CELLS} cells or more took a median "
        f"{statistics.median(ratios):.2f} of the priced time "
        f"({min(ratios):.2f}-{max(ratios):.2f})."
    )


def _chunks(con, label: str) -> list[tuple]:
    """The runs of ``label``: run id, start, end, cells, seconds, the cells' wall seconds."""
    return con.execute(
        "SELECT u.run_id, u.started_at, u.finished_at, count(r.result_id) AS cells, "
        "epoch(u.finished_at) - epoch(u.started_at) AS seconds, sum(r.wall_s) AS walls "
        "FROM runs u LEFT JOIN results r USING (run_id) WHERE u.label = ? "
        "GROUP BY ALL ORDER BY u.started_at",
        [label],
    ).fetchall()


def _parallelism(con, label: str, chunks: list[tuple]) -> tuple[float | None, str]:
    """How many cells ``chunks``, the runs of ``label``, ran at once on average (their
    cells' wall seconds over their own), with the label it came from: the headline
    chunks' where ``label``'s have no cells."""
    for source in dict.fromkeys((label, "zoo-headline")):
        runs = chunks if source == label else _chunks(con, source)
        timed = [(walls, seconds) for *_, seconds, walls in runs if seconds]
        cell_s = sum(walls or 0.0 for walls, _ in timed)
        if cell_s > 0:
            return cell_s / sum(seconds for _, seconds in timed), source
    return None, label


def _print_left(
    left: dict[CellConfig, int],
    walls: dict[CellConfig, list[tuple[float, float, bool]]],
    parallel: float | None,
    source: str,
) -> None:
    if parallel is None:
        print("\nNo chunk of the sweep has run yet: no estimate of the device time left.")
        return
    print(
        f"\nDevice time left, estimated (parallelism {parallel:.1f}, from the {source} "
        "chunks; a cell's mean wall time over it, or its seconds with the GPU alone where "
        "more):\n"
    )
    print(
        "| config | cells left | mean cell wall s (cells) | mean s with the GPU alone "
        "| device hours left |"
    )
    print("| --- | --- | --- | --- | --- |")
    total, unknown = 0.0, 0
    for column, cells in left.items():
        seen = walls.get(column, [])
        if not cells:
            continue
        if not seen:
            unknown += cells
            print(f"| {column.label()} | {cells} | not measured | - | - |")
            continue
        mean = sum(wall for wall, _, _ in seen) / len(seen)
        if column.mode in TUNED_MODES and not any(recorded for *_, recorded in seen):
            # Its cells predate the recorded holds: their timing plan would price it, and
            # miss the autotuning that holds the GPU alone for most of such a cell.
            unknown += cells
            print(f"| {column.label()} | {cells} | {mean:.0f} ({len(seen)}) | not recorded | - |")
            continue
        timed = sum(timed for _, timed, _ in seen) / len(seen)
        hours = cells * _priced_s(mean, timed, parallel) / 3600
        total += hours
        print(
            f"| {column.label()} | {cells} | {mean:.0f} ({len(seen)}) | {timed:.1f} | {hours:.1f} |"
        )
    tail = f", and {unknown} cells of configs not priced" if unknown else ""
    print(f"| all | {sum(left.values())} | | | {total:.1f}{tail} |")


if __name__ == "__main__":
    sys.exit(main())
