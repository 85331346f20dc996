"""One chunk of a long sweep, resumed from what is shipped: the shipped runs merged into a
database (once: a database that exists is reused), ``zoo-run`` with the arguments given
after ``--`` on it (the cells recorded are skipped), stopped in time, then every run the
database holds that the shipped folder lacks exported, ready to commit:

    python benchmarks/sweep_chunk.py --seconds 520 --out /tmp/new-runs -- \\
        --models @headline --configs @headline --workers 14 --label zoo-headline \\
        --triage ladder --retry-failed

``--seconds`` is the chunk's whole wall time: zoo-run starts no cell that would likely
end after ``--seconds`` less a margin for the export (``--time-limit``), and gets SIGINT
at ``--seconds`` less a smaller one, so that the export always runs. Runs go to
``--out`` (default: the shipped folder itself). Exit status: zoo-run's, or 2 for bad
input here; the export runs whatever zoo-run's status was (a chunk cut short still
ships what it recorded).

Several zoo-runs in one chunk, one after another, each with the time the ones before
left: their arguments separated by ``--then`` (cells to measure again first, then the
sweep: ``-- --models A,B --force --then --models @headline``). The next one starts only
if the one before ran out of cells and at least ``MIN_NEXT_S`` are left. SIGUSR1 to
this script reaches the zoo-run under way (its ``--wrap-up``) and starts no other.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runner.store.db import Store  # noqa: E402
from runner.store.export import export_runs  # noqa: E402
from runner.store.merge import merge, summary_lines  # noqa: E402

# Seconds kept back from --seconds: for the export after zoo-run (SIGINT this long before
# the end), and for the cells under way to finish (no cell starts that would likely end
# later than this before the end). zoo-run's --time-limit already judges each start by
# when the cell would likely end, so this margin covers only that guess's error: at 60 s,
# zoo-run ended over a minute before its SIGINT in both chunks of 2026-12-02's evening
# that stopped at the limit (d4eff076, 44a67443), and each call's last minute went unused.
EXPORT_MARGIN_S = 30.0
FINISH_MARGIN_S = 30.0
# The least time worth starting the next zoo-run of a chunk with (its workers' imports
# and a first wave of compiles take about this long).
MIN_NEXT_S = 120.0
THEN = "--then"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    ours, run_args = argv[:split], argv[split + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "data" / "runs")
    parser.add_argument("--db", type=Path, default=Path("/tmp/zoo-chunk.duckdb"))
    parser.add_argument("--out", type=Path, default=None, help="default: --runs-dir")
    parser.add_argument("--seconds", type=float, required=True)
    args = parser.parse_args(ours)
    least = EXPORT_MARGIN_S + FINISH_MARGIN_S
    if not (math.isfinite(args.seconds) and args.seconds > least):
        parser.error(f"--seconds must be a finite number above {least:g}; got {args.seconds:g}")
    runs = _split_runs(run_args)
    if not run_args or not all(runs):
        parser.error(
            "give zoo-run's arguments after --, e.g. -- --models @headline (several runs: "
            f"each one's arguments, separated by {THEN})"
        )
    for given in ("--db", "--time-limit"):
        if any(given in args for args in runs):
            parser.error(f"{given} is this script's to set; drop it after --")
    if not args.runs_dir.is_dir():
        parser.error(f"--runs-dir {args.runs_dir}: no such folder of shipped runs")
    started = time.monotonic()
    if not args.db.exists():
        print("\n".join(summary_lines(merge([args.runs_dir], args.db))), flush=True)
    shipped = {path.name for path in args.runs_dir.iterdir() if path.is_dir()}
    wrap_up = _Forward()
    previous = signal.signal(signal.SIGUSR1, wrap_up)
    status = 0
    try:
        before: set[str] = set()
        for index, zoo_run_args in enumerate(runs):
            left = args.seconds - (time.monotonic() - started)
            if wrap_up.asked or (index and (status != 0 or not _ran_out(args.db, before))):
                break
            if index and left - EXPORT_MARGIN_S - FINISH_MARGIN_S < MIN_NEXT_S:
                print(f"{left:.0f} s left: too little to start the next zoo-run", flush=True)
                break
            before = _run_ids(args.db)
            command = [
                sys.executable,
                "-m",
                "runner.cli.run",
                *zoo_run_args,
                "--db",
                str(args.db),
                "--time-limit",
                f"{max(1.0, left - EXPORT_MARGIN_S - FINISH_MARGIN_S):.0f}",
            ]
            status = _run_until(command, left - EXPORT_MARGIN_S, wrap_up)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    with Store(args.db).connection(read_only=True) as con:
        query = "SELECT run_id FROM runs ORDER BY started_at"
        recorded = [row[0] for row in con.execute(query).fetchall()]
    new = [run_id for run_id in recorded if run_id not in shipped]
    out = args.out or args.runs_dir
    if new:
        export_runs(args.db, out, run_ids=new)
    print(f"zoo-run exited {status}; exported {len(new)} new run(s) to {out}: {', '.join(new)}")
    return status


def _split_runs(run_args: list[str]) -> list[list[str]]:
    """The arguments of each zoo-run, separated by ``--then``."""
    runs: list[list[str]] = [[]]
    for arg in run_args:
        if arg == THEN:
            runs.append([])
        else:
            runs[-1].append(arg)
    return runs


def _run_ids(db: Path) -> set[str]:
    with Store(db).connection(read_only=True) as con:
        return {row[0] for row in con.execute("SELECT run_id FROM runs").fetchall()}


def _ran_out(db: Path, before: set[str]) -> bool:
    """Whether the zoo-run that ran last (the run ``db`` holds beyond ``before``) recorded
    every cell it planned: it ended by running out of cells, not by its time limit or a
    wrap-up. One that found nothing to run recorded no run, and ran out too."""
    with Store(db).connection(read_only=True) as con:
        rows = con.execute("SELECT run_id, cells_planned, cells_recorded FROM runs").fetchall()
    new = [(planned, recorded) for run_id, planned, recorded in rows if run_id not in before]
    return all(planned is not None and (recorded or 0) >= planned for planned, recorded in new)


def _child_signals() -> None:
    # Started in the background (`nohup ... &` in a job script), this process has SIGINT
    # ignored, which zoo-run would inherit and keep: the stop below relies on it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    # SIGUSR1 would end zoo-run before it sets its wrap-up handler (its imports take
    # seconds): ignored until then, which exec keeps.
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)


class _Forward:
    """SIGUSR1's handler here: passed on to the zoo-run under way (its wrap-up), and
    remembered, so that no other starts."""

    def __init__(self) -> None:
        self.asked = False
        self.process: subprocess.Popen | None = None

    def __call__(self, signum, frame) -> None:
        self.asked = True
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGUSR1)


def _run_until(command: list[str], seconds: float, wrap_up: _Forward | None = None) -> int:
    """``command``'s exit status; SIGINT (zoo-run records what it can and stops) after
    ``seconds``, SIGKILL if it has not stopped 20 s later."""
    process = subprocess.Popen(
        command,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        preexec_fn=_child_signals,
    )
    if wrap_up is not None:
        wrap_up.process = process
    try:
        return process.wait(timeout=max(1.0, seconds))
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)
        try:
            return process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()


if __name__ == "__main__":
    sys.exit(main())
