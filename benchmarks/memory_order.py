"""A replay of the executor's memory rule over recorded cells: how many cells a run of
the headline column ends by a time, in the plan's order and spread by need
(``runner.schedule.memory.spread_by_need``), on a GPU of a given memory.

    python benchmarks/memory_order.py [--models @headline] [--workers 14]
        [--gpu-gib 139.8,79.6] [--seconds 505,1800]

A model, not a measurement: it runs nothing. Each cell lasts its model's median wall
time recorded in the column on the card the shipped rows come from (``--gpu``), or the
median of those where its model has none; it is expected to take what zoo-run would
expect of it (``runner.schedule.memory.recorded_peak_mb``: its model's largest peak on
the newest rows of its cells, else its family's); the real ``Deferring`` feed and
``MemoryBudget`` decide when each starts, on a replayed clock, ``--workers`` at a time. Each cell ends with the
seconds it held the GPU alone (its recorded timing and tuning holds, else the median
of those), which wait for the timing lock, one cell at a time. What it leaves out:
out-of-memory retries, and how a cell's wall stretches or shrinks with what runs beside
it (the recorded walls are those of crowded chunks, their waits for the lock in them).
Its H100 rows say how far it can be trusted: the H100 chunk they replay (run 0697dd20)
ended 8 cells in its 505 s.
"""

from __future__ import annotations

import heapq
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import shipped  # noqa: E402
from runner.matrix import columns  # noqa: E402
from runner.matrix.cells import Cell  # noqa: E402
from runner.schedule.executor import _ListFeed  # noqa: E402
from runner.schedule.memory import (  # noqa: E402
    EXPECTED_GIB,
    Deferring,
    MemoryBudget,
    expected_gib,
    recorded_peak_mb,
    spread_by_need,
)
from runner.store.db import peak_reserved_mb  # noqa: E402
from zoo.catalog import select  # noqa: E402


def replay(
    cells: list[Cell],
    seconds: dict[str, tuple[float, float]],
    gib: float,
    workers: int,
    backfill: bool = True,
) -> list[float]:
    """When each cell ended, in order, on the replayed clock. ``seconds``: each cell's
    wall, and the part of it that held the GPU alone (the timing lock, one cell at a
    time, first come first served), taken last. ``backfill``: a cell that has waited
    keeps the room ``MemoryBudget.kept_room`` says, each cell under way expected to take
    its wall; else all it needs (the rule before)."""
    now = [0.0]
    budget = MemoryBudget(gib)
    feed = Deferring(_ListFeed(cells), clock=lambda: now[0])
    # (when, order, cell, what happens then: "lock" asks for the lock, "end" ends).
    events: list[tuple[float, int, Cell, str]] = []
    running: list[Cell] = []
    started: dict[str, float] = {}
    lock_free_at = 0.0
    ended: list[float] = []
    order = 0

    def keep(first: Cell) -> float:
        if not backfill:
            return budget.need(first)
        left = [(c, max(started[c.key] + seconds[c.key][0] - now[0], 0.0)) for c in running]
        return budget.kept_room(first, left)

    while True:
        while len(running) < workers:
            cell = feed.take_fitting(
                lambda c, reserve, beside=tuple(running): budget.fits(c, list(beside), reserve),
                keep,
            )
            if cell is None:
                break
            running.append(cell)
            started[cell.key] = now[0]
            wall, alone = seconds[cell.key]
            order += 1
            heapq.heappush(events, (now[0] + max(wall - alone, 0.0), order, cell, "lock"))
        if not events:
            return ended
        when, _, cell, what = heapq.heappop(events)
        now[0] = when
        if what == "lock":
            # Held from when the lock frees: the cells before it in line go first.
            start = max(now[0], lock_free_at)
            lock_free_at = start + seconds[cell.key][1]
            order += 1
            heapq.heappush(events, (lock_free_at, order, cell, "end"))
            continue
        running.remove(cell)
        ended.append(when)
        budget.learn(
            SimpleNamespace(
                eager_peak_reserved_mb=cell.extra.get("peak_mb"),
                compiled_peak_reserved_mb=None,
                reference_peak_reserved_mb=None,
            )
        )


def main() -> int:
    parser = shipped.parser(__doc__)
    parser.add_argument("--models", default="@headline")
    parser.add_argument("--workers", type=int, default=14)
    parser.add_argument("--gpu-gib", default="139.8,79.6", help="GPU memories to replay on")
    parser.add_argument("--seconds", default="505,1800", help="times to count ended cells at")
    args = parser.parse_args()
    con, card = shipped.connect_card(args)
    column = columns.HEADLINE
    rows = con.execute(
        "SELECT model_id, median(wall_s) FILTER (wall_s > 0), "
        "median(gpu_timing_s + gpu_tuning_s) "
        "FROM results WHERE device = 'cuda' AND backend = $b AND mode = $m AND dynamic = $d "
        "AND precision = $p AND step = $s GROUP BY ALL",
        {
            "b": column.backend,
            "m": column.mode,
            "d": column.dynamic,
            "p": column.precision,
            "s": column.step,
        },
    ).fetchall()
    walls = {model: wall for model, wall, _ in rows if wall}
    alone = {model: held for model, _, held in rows if held is not None}
    usual = statistics.median(walls.values())
    usual_alone = statistics.median(alone.values())
    specs = select([args.models])
    # What zoo-run would expect of each cell, from the same rows.
    peaks = peak_reserved_mb(con, sorted({spec.id for spec in specs}), "cuda")
    families = peak_reserved_mb(con, sorted({spec.family for spec in specs}), "cuda", by="family")
    cells, seconds = [], {}
    for spec in specs:
        cell = Cell(spec, column, "full", None, None, "cuda", "replay")
        peak = recorded_peak_mb(cell, peaks, families)
        if peak is not None:
            cell = replace(
                cell, extra={EXPECTED_GIB: round(expected_gib(peak), 1), "peak_mb": peak}
            )
        cells.append(cell)
        wall = walls.get(spec.id, usual)
        seconds[cell.key] = (wall, min(wall, alone.get(spec.id, usual_alone)))
    marks = [float(s) for s in args.seconds.split(",")]
    print(
        f"Replay of {len(cells)} cells of {args.models}, {column.label()}, {args.workers} workers."
    )
    print(f"Walls and peaks recorded on the shipped rows' {card.line()[5:]}\n")
    print(
        "| GPU GiB | order | "
        + " | ".join(f"cells ended by {m:.0f} s" for m in marks)
        + " | all cells, hours | cells moved later |"
    )
    print("| --- | --- | " + " | ".join("---" for _ in marks) + " | --- | --- |")
    for gib in (float(g) for g in args.gpu_gib.split(",")):
        share = MemoryBudget(gib).share_gib(args.workers, 1)
        spread = spread_by_need(cells, share)
        position = {id(cell): i for i, cell in enumerate(spread)}
        moved = sum(1 for i, cell in enumerate(cells) if position[id(cell)] > i)
        for name, order, count, backfill in (
            ("planned", cells, 0, False),
            ("planned, backfilled", cells, 0, True),
            ("spread by need", spread, moved, False),
            ("spread, backfilled", spread, moved, True),
        ):
            # One replay to the end: the rule does not look ahead, so the cells
            # ended by a time are those a replay stopped then would count.
            ends = replay(order, seconds, gib, args.workers, backfill)
            print(
                f"| {gib:.1f} | {name} | "
                + " | ".join(str(sum(1 for end in ends if end <= m)) for m in marks)
                + f" | {(ends[-1] if ends else 0.0) / 3600:.2f} | {count} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
