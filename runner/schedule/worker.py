"""A worker process: measures the cells its parent sends, one at a time.

Protocol (kept tiny so any launcher can drive it): the parent writes one JSON line
per cell to stdin, ``{"cell": {...}, "result_path": "..."}``; the worker reports
the phase it is in by rewriting ``--status-file`` and, when the cell is done,
writes its ``CellResult`` as JSON to ``result_path`` (atomically, by rename).
Stdout and stderr belong to the model code and to faulthandler: on a fatal signal,
or on SIGUSR1 from a parent whose patience ran out, the stacks of every thread are
dumped there.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import signal
import sys
from pathlib import Path

from runner.matrix.holds import TIMING, TUNING
from runner.matrix.phases import WAITING
from runner.measure.host import die_with_parent, parse_cpus


def partial_path(result_path: Path) -> Path:
    """Where a cell's measurement is kept before its last, optional phase (the graph
    breaks): what the parent records if the worker is stopped or dies there."""
    return result_path.with_name(result_path.name + ".partial")


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    die_with_parent()
    parser = argparse.ArgumentParser(prog="python -m runner.schedule.worker")
    parser.add_argument("--status-file", type=Path, required=True)
    parser.add_argument(
        "--lock-key", default=None, help="the GPU (UUID) whose timing lock this worker takes"
    )
    parser.add_argument("--lock-dir", type=Path, default=None)
    parser.add_argument(
        "--holds-log",
        type=Path,
        default=None,
        help="append each lock hold here (runner.schedule.usage)",
    )
    parser.add_argument(
        "--compile-cpus", default=None, help="cores this worker runs on (comma-separated)"
    )
    parser.add_argument(
        "--timing-cpus", default=None, help="cores its timing moves to while it holds the lock"
    )
    args = parser.parse_args(argv)
    if args.compile_cpus:
        # Before torch is imported: its threads, and Inductor's compile workers, inherit it.
        os.sched_setaffinity(0, parse_cpus(args.compile_cpus))

    faulthandler.enable(file=sys.stderr, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)

    # Imported after faulthandler so that a crash while importing torch is dumped too.
    from runner import triage
    from runner.cell import measure_cell
    from runner.matrix.cells import Cell
    from runner.measure.context import no_gate

    current = {"key": "", "phase": ""}

    def report_phase(phase: str) -> None:
        current["phase"] = phase
        _write_atomic(args.status_file, f"{current['key']} {phase}")

    gate = no_gate
    lock = None
    if args.lock_key:
        from runner.schedule.cpus import Boost, keep_helpers_low
        from runner.schedule.gpu_lock import DEFAULT_LOCK_DIR, GpuLock
        from runner.schedule.usage import HoldLog

        lock = GpuLock(
            args.lock_key,
            args.lock_dir or DEFAULT_LOCK_DIR,
            on_wait=lambda: _write_atomic(args.status_file, f"{current['key']} {WAITING}"),
            on_acquired=lambda: report_phase(current["phase"]),
            timing_cpus=parse_cpus(args.timing_cpus),
            holds_log=HoldLog(args.holds_log) if args.holds_log else None,
            # A CPU cell times on every core (others stopped, --quiet-timing): no boost.
            boost=Boost() if args.lock_key != "cpu" else None,
        )
        gate = lock.held
        # Inductor's compile workers below the lock holders (runner.schedule.cpus).
        keep_helpers_low(busy=lambda: lock.holding)
        if args.lock_key != "cpu":
            from runner.schedule.gpu_lock import guard_inductor_benchmarking

            guard_inductor_benchmarking(lock)

    _write_atomic(args.status_file, "ready")
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        cell = Cell.from_dict(request["cell"])
        current["key"] = cell.key
        print(f"=== zoo-matrix worker: cell {cell.key} {cell.describe()}", file=sys.stderr)
        sys.stderr.flush()
        if lock is not None:
            lock.held_s.clear()
        result_path = Path(request["result_path"])

        def with_holds(result):
            if lock is not None:
                result.gpu_timing_s = lock.held_s.get(TIMING, 0.0)
                result.gpu_tuning_s = lock.held_s.get(TUNING, 0.0)
            return result

        partial = partial_path(result_path)

        def checkpoint(result):
            # Called while this cell is measured, so the loop's variables are its own.
            _write_atomic(partial, json.dumps(with_holds(result).to_dict()))  # noqa: B023

        if cell.extra.get(triage.TRIAGE):
            result = triage.ladder(cell, report_phase=report_phase, gate=gate)
        else:
            result = measure_cell(cell, report_phase=report_phase, gate=gate, checkpoint=checkpoint)
        _write_atomic(result_path, json.dumps(with_holds(result).to_dict()))
        _write_atomic(args.status_file, "ready")
    return 0


if __name__ == "__main__":
    sys.exit(main())
