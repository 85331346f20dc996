"""The same cells in two runs, side by side: what changed between two settings of a
sweep (``--compile-threads``, ``--workers``, a code change) on the same cells.

For every cell key both runs recorded, prints each run's status, compile time, the mean
number of cells compiling beside it, its wall-clock and GPU-time speedups, its
timing disturbance and the launch canary read while it was timed (``host_launch_us``,
blank in rows before schema 9); then the medians and geomeans of B over A, and both runs' wall
time (first start to last finish)::

    python benchmarks/run_pairs.py e88efb9e b7c7295d [--db zoo.duckdb]

Runs are named by their id or an id prefix. It reads shipped parquet runs (and a
database where given); it measures nothing.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import shipped  # noqa: E402
from runner.report import geomean  # noqa: E402
from zoo.errors import UsageError  # noqa: E402

# Each run's fields of a cell, in the order the table shows them, with the digits each
# is shown with (None: as it is); ``{t}``: the run's results table.
FIELDS = (
    ("{t}.status", None),
    ("{t}.compile_s", 1),
    ("{t}.compile_beside", 1),
    ("{t}.speedup", 2),
    ("{t}.gpu_speedup", 2),
    ("greatest({t}.timing_disturbance, 0)", 2),
    ("{t}.host_launch_us", 2),
)
STATUS, COMPILE_S, SPEEDUP, GPU_SPEEDUP, CANARY = 0, 1, 3, 4, 6


def _run(con, prefix: str) -> tuple[str, str, str]:
    """(run id, label, command) of the one run whose id starts with ``prefix``."""
    found = con.execute(
        "SELECT run_id, coalesce(label, ''), coalesce(command, '') FROM runs "
        "WHERE starts_with(run_id, $p) ORDER BY run_id",
        {"p": prefix},
    ).fetchall()
    if len(found) != 1:
        what = "no run" if not found else f"{len(found)} runs"
        raise UsageError(f"{what} with an id starting {prefix!r}; give a longer prefix or the id")
    return found[0]


def _ratio(pairs: list[tuple[float | None, float | None]]) -> str:
    values = [b / a for a, b in pairs if a and b]
    if not values:
        return "-"
    geo = geomean(values)
    return f"median {statistics.median(values):.3f}, geomean {geo:.3f} ({len(values)} cells)"


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main() -> int:
    parser = shipped.parser(__doc__)
    parser.add_argument("run_a")
    parser.add_argument("run_b")
    args = parser.parse_args()
    con = shipped.connect(args)
    try:
        runs = [_run(con, args.run_a), _run(con, args.run_b)]
    except UsageError as error:
        print(f"run_pairs.py: {error}", file=sys.stderr)
        return 2
    (a, _, _), (b, _, _) = runs
    side = {t: ", ".join(field.format(t=t) for field, _ in FIELDS) for t in "xy"}
    rows = con.execute(
        f"SELECT x.model_id, {side['x']}, {side['y']} "
        "FROM results x JOIN results y USING (cell_key) "
        "WHERE x.run_id = $a AND y.run_id = $b ORDER BY x.model_id",
        {"a": a, "b": b},
    ).fetchall()
    for name, (run_id, label, command) in zip("AB", runs, strict=True):
        (wall, cells) = con.execute(
            "SELECT epoch(max(finished_at::TIMESTAMPTZ)) - epoch(min(started_at::TIMESTAMPTZ)), "
            "count(*) FROM results WHERE run_id = $r",
            {"r": run_id},
        ).fetchone()
        print(
            f"{name}: run {run_id} ({label}), {cells} cells, {_num(wall)} s first start to last finish"
        )
        print(f"   {' '.join(command.split())}")
    print(f"\n{len(rows)} cells in both.\n")
    if not rows:
        return 0
    print(
        "| model | status A / B | compile s A / B | beside A / B | speedup A / B "
        "| GPU-time speedup A / B | disturbance A / B | canary µs A / B |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    n = len(FIELDS)
    # (model, run A's fields, run B's fields) of each cell
    pairs = [(r[0], r[1 : 1 + n], r[1 + n :]) for r in rows]
    for model, a, b in pairs:
        name = " ".join(str(model).split()).replace("|", "\\|")
        cells = [
            f"{x} / {y}" if digits is None else f"{_num(x, digits)} / {_num(y, digits)}"
            for (_, digits), x, y in zip(FIELDS, a, b, strict=True)
        ]
        print(f"| {name} | {' | '.join(cells)} |")

    def ratio(which: list, i: int) -> str:
        return _ratio([(a[i], b[i]) for _, a, b in which])

    both = [(m, a, b) for m, a, b in pairs if a[STATUS] == b[STATUS] == "pass"]
    print("\nB over A:\n")
    print(f"- compile time: {ratio(pairs, COMPILE_S)}")
    print(f"- wall-clock speedup: {ratio(both, SPEEDUP)}")
    print(f"- GPU-time speedup: {ratio(both, GPU_SPEEDUP)}")
    print(f"- launch canary: {ratio(both, CANARY)}")
    print(
        f"- compile seconds in all: {sum(a[COMPILE_S] or 0 for _, a, _ in pairs):.0f} (A), "
        f"{sum(b[COMPILE_S] or 0 for _, _, b in pairs):.0f} (B)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
