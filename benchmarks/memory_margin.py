"""How much GPU memory a sweep chunk's cells held, as nvidia-smi read it beside them
(``benchmarks/resident.sh``'s smi.csv), against what zoo-run's memory rule expected of
them (``runner.schedule.memory.expected_gib``: a recorded peak x ``PEAK_MARGIN`` +
``CONTEXT_GIB``): the evidence those two constants are set by.

    python benchmarks/memory_margin.py SMI_CSV RUN_DIR... [--runs-dir data/runs]

A reading's cells are the rows of the runs in RUN_DIR (folders of exported runs) that
had started and not yet finished when it was taken. Each has two peaks: its row's own
(the largest of its eager, compiled and float64 reference peaks reserved: what it
reached this time), and the peak zoo-run had for it when it planned (the newest row of
its model and step on CUDA in ``--runs-dir``, the chunk's runs left out, whatever the
card, as zoo-run plans), where there is one. A process's context is the least it held in any reading (its CUDA context,
read before its first cell's model is on the GPU, or between cells).

What it prints: the readings; the contexts; and for each margin, with each context, how
many readings found the card holding more than the cells under way were expected to
take (the rule under-expecting: where out-of-memory errors come from when cells peak
together), and how far the card stood below the expectation at the median (room the
rule keeps idle). Each process beyond one per cell under way (an idle worker, a retry or
a triage job: they leave no row of their own) is expected to hold a context. Last,
where the rows record what each cell held going into its compile (``resident_mb``,
schema 10): how far above that the card stood, as a share of the room the cells' peaks
take beyond it (how often cells peak together: what a gate admitting cells at their
resident memory would keep room for). Measures nothing itself: it reads what a chunk
recorded.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runner.matrix.results import PEAK_COLUMNS, largest_peak_sql  # noqa: E402
from runner.schedule.memory import CONTEXT_GIB, PEAK_MARGIN  # noqa: E402
from runner.store.db import peak_reserved_mb  # noqa: E402

MARGINS = tuple(sorted({1.0, 1.05, 1.1, 1.15, 1.2, 1.25, PEAK_MARGIN}))


@dataclass
class Reading:
    at: dt.datetime
    used_gib: float
    processes: dict[int, float]  # pid: GiB held


@dataclass
class Span:
    model_id: str
    step: str
    started: dt.datetime
    finished: dt.datetime
    peak_gib: float | None  # its row's own
    planned_gib: float | None = None  # the peak the plan had for it
    resident_gib: float | None = None  # held going into its compile (schema 10)


def _utc(value: str | dt.datetime) -> dt.datetime:
    stamp = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(value)
    return stamp.replace(tzinfo=dt.UTC) if stamp.tzinfo is None else stamp.astimezone(dt.UTC)


def read_smi(path: Path) -> list[Reading]:
    """The readings of a smi.csv: lines ``time,gpu,MiB`` (the card) and ``time,pid,MiB``
    (a process), a reading per time that has its card line. Lines that do not parse (a
    reading cut off as the chunk ended, nvidia-smi's own messages) are skipped."""
    cards: dict[str, float] = {}
    processes: dict[str, dict[int, float]] = {}
    for line in path.read_text(errors="replace").splitlines():
        parts = line.strip().split(",")
        if len(parts) != 3:
            continue
        stamp, who, mib = parts
        try:
            gib = float(mib) / 1024
            _utc(stamp)
        except ValueError:
            continue
        if who == "gpu":
            cards[stamp] = gib
        elif who.isdigit():
            processes.setdefault(stamp, {})[int(who)] = gib
    return sorted(
        (Reading(_utc(s), gib, processes.get(s, {})) for s, gib in cards.items()),
        key=lambda r: r.at,
    )


def _results(con: duckdb.DuckDBPyConnection, files: list[str]) -> None:
    """The results parquet ``files`` as the table ``results`` in ``con``, with every
    peak column and ``resident_mb``, empty where the rows are older than it (the
    reference's: schema 7; the compile's and the resident memory: schema 10)."""
    con.execute(
        "CREATE TABLE results AS SELECT * FROM read_parquet(?, union_by_name = true)", [files]
    )
    columns = {
        name for (name,) in con.execute("SELECT column_name FROM (DESCRIBE results)").fetchall()
    }
    for column in (*PEAK_COLUMNS, "resident_mb"):
        if column not in columns:
            con.execute(f"ALTER TABLE results ADD COLUMN {column} DOUBLE")


def read_spans(run_dirs: list[Path]) -> tuple[list[Span], str | None]:
    """The rows of the runs in ``run_dirs`` with their times and peaks, and their GPU."""
    for folder in run_dirs:
        if not (folder / "results.parquet").exists():
            print(
                f"error: {folder} has no results.parquet: name exported run folders",
                file=sys.stderr,
            )
            raise SystemExit(2)
    con = duckdb.connect()
    _results(con, [str(folder / "results.parquet") for folder in run_dirs])
    rows = con.execute(
        f"SELECT model_id, step, started_at, finished_at, {largest_peak_sql()}::DOUBLE, "
        "resident_mb::DOUBLE "
        "FROM results WHERE started_at IS NOT NULL AND finished_at IS NOT NULL"
    ).fetchall()
    spans = [
        Span(
            model_id,
            step,
            _utc(started),
            _utc(finished),
            peak_mb / 1024 if peak_mb else None,
            resident_gib=resident_mb / 1024 if resident_mb is not None else None,
        )
        for model_id, step, started, finished, peak_mb, resident_mb in rows
    ]
    environments = [
        str(folder / "environments.parquet")
        for folder in run_dirs
        if (folder / "environments.parquet").exists()
    ]
    gpus = (
        {
            gpu
            for (gpu,) in con.execute(
                "SELECT DISTINCT gpu FROM read_parquet(?, union_by_name = true) "
                "WHERE gpu IS NOT NULL",
                [environments],
            ).fetchall()
        }
        if environments
        else set()
    )
    return spans, (next(iter(gpus)) if len(gpus) == 1 else None)


def add_planned(spans: list[Span], runs_dir: Path, chunk: set[str]) -> None:
    """Each span's peak as zoo-run had it when planning: its model's from the newest rows
    of its cells on CUDA in ``runs_dir`` (``runner.store.db.peak_reserved_mb``, which
    the planner reads from the chunk's database: the shipped runs merged), the chunk's own
    runs (``chunk``: their folder names) left out. Like the planner, it does not ask on
    which card a peak was reached: an H100 chunk plans with the H200's."""
    folders = [p for p in sorted(runs_dir.iterdir()) if p.is_dir() and p.name not in chunk]
    results = [str(p / "results.parquet") for p in folders if (p / "results.parquet").exists()]
    if not results or not spans:
        return
    con = duckdb.connect()
    _results(con, results)
    peaks = peak_reserved_mb(con, sorted({s.model_id for s in spans}), "cuda", by="model_id")
    for span in spans:
        mb = peaks.get((span.model_id, span.step))
        span.planned_gib = mb / 1024 if mb else None


def contexts(readings: list[Reading]) -> list[float]:
    """Each process's least holding over its readings (seen in two or more): its CUDA
    context, read before its first cell's model is on the GPU or between cells."""
    seen: dict[int, list[float]] = {}
    for reading in readings:
        for pid, gib in reading.processes.items():
            seen.setdefault(pid, []).append(gib)
    return [min(held) for held in seen.values() if len(held) >= 2]


def under_way(spans: list[Span], at: dt.datetime) -> list[Span]:
    return [s for s in spans if s.started <= at < s.finished]


def nearest_rank(n: int, q: float) -> int:
    """The rank (1 to ``n``) of the least of ``n`` values that at least a share ``q`` of
    them do not exceed: of 80 readings, 99% is the 80th, since the 79th leaves one in 80
    (1.25%) above. (Rounding ``q`` x (n - 1) took the 79th, which covered 98.75%.)"""
    return min(n, max(1, math.ceil(q * n - 1e-9)))


def quantile(values: list[float], q: float) -> float:
    """``values`` at quantile ``q`` by nearest rank (``nearest_rank``)."""
    return sorted(values)[nearest_rank(len(values), q) - 1]


def _counted(
    readings: list[Reading], spans: list[Span], peak: str
) -> list[tuple[Reading, list[float], int]]:
    """The readings with cells under way whose peaks (``peak``: "own", each row's, or
    "planned", the plan's) are all known, each with those peaks and the processes beyond
    one per cell (an idle worker; a retry or a triage job, which leave no row of their
    own)."""
    counted = []
    for reading in readings:
        cells = under_way(spans, reading.at)
        peaks = [s.peak_gib if peak == "own" else s.planned_gib for s in cells]
        if cells and all(p is not None for p in peaks):
            extra = max(0, len(reading.processes) - len(cells))
            counted.append((reading, peaks, extra))  # type: ignore[arg-type]
    return counted


def margin_table(
    counted: list[tuple[Reading, list[float], int]], context_gib: float
) -> list[tuple[float, int, int, float, float]]:
    """Per margin: (margin, readings counted, readings where the card held more than
    expected, the median and the largest of held / expected). Expected: each cell's peak
    x margin + ``context_gib``, and ``context_gib`` for each process beyond one per cell.
    Held: the card's used memory. ``counted``: ``_counted``'s readings."""
    rows = []
    for margin in MARGINS:
        ratios = [
            r.used_gib / (sum(p * margin + context_gib for p in peaks) + extra * context_gib)
            for r, peaks, extra in counted
        ]
        if ratios:
            over = sum(1 for x in ratios if x > 1.0)
            rows.append((margin, len(ratios), over, statistics.median(ratios), max(ratios)))
    return rows


def needed_margin(
    counted: list[tuple[Reading, list[float], int]], context_gib: float, share: float
) -> tuple[float, int, int] | None:
    """The least margin under which the card held no more than expected (as in
    ``margin_table``) in all but ``1 - share`` of the counted readings, with the rank of
    the reading that sets it and how many readings it was chosen from."""
    needed = [
        (r.used_gib - context_gib * (len(peaks) + extra)) / sum(peaks)
        for r, peaks, extra in counted
        if sum(peaks) > 0
    ]
    if not needed:
        return None
    return quantile(needed, share), nearest_rank(len(needed), share), len(needed)


def peak_room_in_use(
    readings: list[Reading], spans: list[Span], context_gib: float
) -> list[tuple[float, float]]:
    """Per reading whose cells under way all record their resident memory and a peak
    (schema 10): (the card's holding / (their resident memory + contexts), the share of
    the room their peaks take beyond that which the card held, 0 where it held less). A
    context for each process, as in ``margin_table``. How far cells reach their peaks
    together: what a gate admitting cells at their resident memory would have to keep
    room for (docs/PERFORMANCE.md, "What still bounds an 80 GiB card")."""
    out = []
    for reading in readings:
        cells = under_way(spans, reading.at)
        if not cells or any(s.resident_gib is None or s.peak_gib is None for s in cells):
            continue
        floor = sum(s.resident_gib for s in cells) + context_gib * max(  # type: ignore[misc]
            len(cells), len(reading.processes)
        )
        room = sum(max(0.0, s.peak_gib - s.resident_gib) for s in cells)  # type: ignore[operator]
        if floor <= 0 or room <= 0:
            continue
        out.append((reading.used_gib / floor, max(0.0, reading.used_gib - floor) / room))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("smi", type=Path, help="a chunk's smi.csv (benchmarks/resident.sh)")
    parser.add_argument("runs", type=Path, nargs="+", help="the chunk's exported run folders")
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "data" / "runs")
    args = parser.parse_args(argv)
    if not args.smi.is_file():
        print(f"error: no file {args.smi}: name a chunk's smi.csv", file=sys.stderr)
        return 2
    readings = read_smi(args.smi)
    if not readings:
        print(f"error: {args.smi} holds no nvidia-smi readings of the card", file=sys.stderr)
        return 2
    spans, gpu = read_spans(args.runs)
    add_planned(spans, args.runs_dir, {p.resolve().name for p in args.runs})
    first, last = readings[0].at, readings[-1].at
    counts = [len(under_way(spans, r.at)) for r in readings]
    beyond = sum(1 for r, n in zip(readings, counts, strict=True) if len(r.processes) > n)
    print(
        f"GPU: {gpu or 'not one GPU recorded'}; {len(spans)} rows, "
        f"{sum(1 for s in spans if s.planned_gib is not None)} with a peak planned from before."
    )
    print(
        f"{len(readings)} readings, {first:%H:%M:%S} to {last:%H:%M:%S} UTC; the card held "
        f"{statistics.median(r.used_gib for r in readings):.1f} GiB at the median, "
        f"{max(r.used_gib for r in readings):.1f} at most; cells under way "
        f"{statistics.median(counts):.0f} at the median, {max(counts)} at most; "
        f"{beyond} readings with more GPU processes than cells under way."
    )
    held = contexts(readings)
    measured = statistics.median(held) if held else None
    if measured is not None:
        print(
            f"Context per process (its least, {len(held)} processes): "
            f"median {measured:.2f} GiB, p90 {quantile(held, 0.9):.2f}, max {max(held):.2f}."
        )
    contexts_tried = [("CONTEXT_GIB", CONTEXT_GIB)]
    if measured is not None:
        contexts_tried.append(("measured", measured))
    for peak in ("own", "planned"):
        counted = _counted(readings, spans, peak)
        for label, context in contexts_tried:
            rows = margin_table(counted, context)
            if not rows:
                continue
            print()
            print(
                f"Peaks: {'each row' + chr(39) + 's own' if peak == 'own' else 'as planned'}; "
                f"context {context:.2f} GiB ({label})"
            )
            print("| margin | readings | held over expected | held / expected, median | max |")
            print("| ---: | ---: | ---: | ---: | ---: |")
            for margin, count, over, median, most in rows:
                print(f"| {margin:.2f} | {count} | {over} | {median:.2f} | {most:.2f} |")
            for share in (0.99, 1.0):
                need = needed_margin(counted, context, share)
                if need is not None:
                    margin, covered, n = need
                    print(
                        f"Least margin covering {share:.0%} of the readings: {margin:.2f} "
                        f"({covered} of {n})"
                    )
    print()
    in_use = peak_room_in_use(readings, spans, CONTEXT_GIB)
    if not in_use:
        print(
            "Resident memory: no reading's cells all record resident_mb (schema 10; "
            "older rows have none)."
        )
    else:
        floors, shares = [f for f, _ in in_use], [s for _, s in in_use]
        print(
            f"Resident memory (resident_mb, schema 10), context {CONTEXT_GIB:.2f} GiB "
            f"(CONTEXT_GIB): {len(in_use)} readings whose cells all record it; the card held "
            f"a median {statistics.median(floors):.2f}x (at most {max(floors):.2f}x) their "
            f"resident memory and contexts; of the room their peaks take beyond that, a "
            f"median {statistics.median(shares):.2f} (at most {max(shares):.2f}) in use."
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
