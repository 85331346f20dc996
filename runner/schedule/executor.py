"""Run cells in isolated worker processes; every attempted cell ends as a result.

A worker is a child process (``runner.schedule.worker``) in its own process group. It is
reused for the next cell while its cells pass, and replaced after anything else:
a CUDA error or an OOM can poison a process, and a dead or hung one is killed
with its whole group (Inductor's compile workers included). A cell whose worker
dies becomes a ``crash`` row, one that outlives its timeout a ``timeout`` row,
both with the worker's stderr tail and a faulthandler dump of its stacks.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol, runtime_checkable

from runner.backends.registry import WorkerKind, worker_kind
from runner.matrix.cells import Cell, CellConfig
from runner.matrix.clock import utc_now_iso
from runner.matrix.phases import COMPILING, CPU_BUSY, STARTING, TIMING, WAITING
from runner.matrix.results import (
    CRASH,
    CROWDED,
    CROWDED_COMPILE,
    FAIL_ACCURACY,
    OUTLASTED_RUN,
    PASS,
    TIMEOUT,
    TRIAGE_INTERRUPTED,
    CellResult,
)
from runner.measure import tuning
from runner.measure.host import SCRATCH_DIR_ENV, format_cpus
from runner.schedule import usage
from runner.schedule.cpus import AUTO_THREADS, COMPILE_THREADS_ENV, split_cpus
from runner.schedule.memory import EXPECTED_S, Deferring, MemoryBudget, spread_by_need
from runner.schedule.worker import partial_path
from runner.triage import (
    RECORDED,
    TRIAGE,
    failed_job_s,
    job_timeout,
    wants_triage,
)
from runner.triage import merge as merge_triage
from zoo.errors import interruption, raise_terminated

# How long a new worker may take to import torch and friends before the cell's own
# clock starts; past it the start itself is treated as a hang.
STARTUP_LIMIT_S = 180.0
WORKER_MODULE = "runner.schedule.worker"
STDERR_TAIL_CHARS = 6000
DUMP_CHARS = 8000
POLL_S = 0.05
# Statuses after which the worker process is trusted with the next cell.
_HEALTHY = (PASS, FAIL_ACCURACY)
_DUMP_MARKERS = ("Fatal Python error", "Current thread 0x", "Thread 0x")
_DUMP_LINES = (
    *_DUMP_MARKERS,
    "  File ",
    "  <no Python frame>",
    "  Garbage-collecting",
    "Extension modules",
)


# Why a cell's clock stands still: it waits for its GPU's lock, or its worker is stopped
# while another cell times (--quiet-timing). Neither counts against its timeout.
WAITING_FOR_GPU = "lock"
# The note of a crowded cell whose retry alone would have ended after the run's deadline.
ALONE_NOT_REACHED = "its retry alone did not fit before the run's time limit"
# The note of a crowded cell whose retry alone was queued or under way when the run was
# interrupted (Ctrl-C, SIGTERM, a cluster's stop).
ALONE_INTERRUPTED = "its retry alone was stopped when the run was interrupted"
# With a deadline, the share of the run (its start to its deadline) kept at its end for
# the crowded retries queued by then: the feed closes that much earlier. Without it a run
# that ends by its deadline, not by running out of cells (every chunk of a sweep), never
# runs them (docs/PERFORMANCE.md, "Crowded retries in chunks").
CROWDED_RESERVE_SHARE = 0.2
# The quantile of its column's walls a crowded retry is expected to take alone: the
# cells that run out of memory are the larger models (in run 7854491c the one retry
# that ran, maxvit_large_tf_512, took 149 s; its column's median was 59 s, its upper
# quartile 129 s).
CROWDED_QUANTILE = 0.75
STOPPED = "stopped"
# A cell still under way RUN_END_GRACE_S after a time-limited run's deadline whose own
# clock (its time less its waits for the GPU's lock) has run LONG_CELL_SHARE of the run
# or more could not end within a run of that length, however quiet: it is stopped there
# and recorded as a ``timeout`` of error type ``OUTLASTED_RUN``. Left without a row (as
# a Ctrl-C leaves the cells under way), it would start again first in every chunk of a
# sweep and never end, holding a worker each time; a chunk's next step would never
# start. A cell that spent the run waiting for the lock (max-autotune's tuners queue on
# it: 12 of 14 cells of run 5296f2eb were still compiling at its end) is left to the
# chunk's own stop, as before, and rerun by the next. The grace keeps this stop before a
# chunk's (benchmarks/sweep_chunk.py: 30 s after --time-limit).
RUN_END_GRACE_S = 10.0
LONG_CELL_SHARE = 0.9
# The phase during which, with --quiet-timing, every other busy worker is stopped.
QUIET_PHASE = TIMING


@runtime_checkable
class CellFeed(Protocol):
    """Cells that arrive while a run is under way (a cluster's node is handed cells as
    its workers free up): ``take`` never blocks, since the executor polls its workers
    between calls."""

    def take(self) -> Cell | None:
        """The next cell, or None when there is none for now."""
        ...

    def exhausted(self) -> bool:
        """Every cell has been taken and no more will come."""
        ...


class _ListFeed:
    """A feed of a fixed list of cells."""

    def __init__(self, cells: Iterable[Cell]):
        self.cells = deque(cells)

    def take(self) -> Cell | None:
        return self.cells.popleft() if self.cells else None

    def peek(self) -> Cell | None:
        """The cell ``take`` would give next, left in the feed."""
        return self.cells[0] if self.cells else None

    def exhausted(self) -> bool:
        return not self.cells


@dataclass
class _Running:
    cell: Cell
    result_path: Path
    submitted: float
    started_at: str
    clock_start: float | None = None
    phase: str = STARTING
    reported: str = ""
    paused_s: float = 0.0
    pause_started: float | None = None
    # The reasons the clock stands still for now, each since when; and the seconds it
    # stood still for each reason before (overlapping pauses count for each).
    pause_reasons: dict[str, float] = field(default_factory=dict)
    waited_s: dict[str, float] = field(default_factory=dict)
    # Seconds seen in a compile phase, and the integral over them of the other cells
    # busy on the host's cores (``_observe_crowd``).
    compiling_s: float = 0.0
    beside_s: float = 0.0
    # The same over the cell's timed calls (``CellResult.timing_beside``).
    timing_s: float = 0.0
    timing_beside_s: float = 0.0

    def pause(self, now: float, reason: str) -> None:
        if not self.pause_reasons:
            self.pause_started = now
        self.pause_reasons.setdefault(reason, now)

    def resume(self, now: float, reason: str) -> None:
        if reason not in self.pause_reasons:
            return
        since = self.pause_reasons.pop(reason)
        self.waited_s[reason] = self.waited_s.get(reason, 0.0) + now - since
        if not self.pause_reasons and self.pause_started is not None:
            self.paused_s += now - self.pause_started
            self.pause_started = None

    def start_clock(self, now: float) -> None:
        """The worker is ready: the cell's own time starts (pauses before it were part
        of the start-up, which has a limit of its own)."""
        self.clock_start = now
        self.paused_s = 0.0
        if self.pause_started is not None:
            self.pause_started = now

    def waited(self, reason: str, now: float) -> float:
        """Seconds paused for ``reason`` so far."""
        ongoing = now - self.pause_reasons[reason] if reason in self.pause_reasons else 0.0
        return self.waited_s.get(reason, 0.0) + ongoing

    def paused_total(self, now: float) -> float:
        pausing = now - self.pause_started if self.pause_started is not None else 0.0
        return self.paused_s + pausing

    def elapsed_s(self, now: float) -> float:
        assert self.clock_start is not None
        return now - self.clock_start - self.paused_total(now)


class Worker:
    """One child process of one kind (``runner.backends.registry.worker_kind``: its
    process kind and start environment) and the cell it runs."""

    def __init__(
        self,
        kind: WorkerKind,
        workdir: Path,
        name: str,
        env: dict[str, str],
        lock_key: str | None = None,
        lock_dir: Path | None = None,
        cpu_args: list[str] | None = None,
    ):
        self.kind = kind
        self.name = name
        self.workdir = workdir
        self.log_path = workdir / f"{name}.log"
        self.status_path = workdir / f"{name}.status"
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - lives as long as the process
        command = [sys.executable, "-m", WORKER_MODULE, "--status-file", str(self.status_path)]
        if lock_key:
            command += ["--lock-key", lock_key]
        if lock_dir:
            command += ["--lock-dir", str(lock_dir)]
        if lock_key:
            command += ["--holds-log", str(workdir / f"holds-{name}.log")]
        command += cpu_args or []
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            text=True,
        )
        self.running: _Running | None = None
        self._log_offset = 0
        self.cells_done = 0
        self.stopped = False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def status(self) -> str:
        try:
            return self.status_path.read_text().strip()
        except FileNotFoundError:
            return ""

    def submit(self, cell: Cell, result_path: Path) -> None:
        self._log.flush()
        self._log_offset = self.log_path.stat().st_size
        self.running = _Running(cell, result_path, time.monotonic(), utc_now_iso())
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"cell": cell.to_dict(), "result_path": str(result_path)}))
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()

    def log_since_submit(self) -> str:
        with open(self.log_path, "rb") as log:
            log.seek(self._log_offset)
            return log.read().decode("utf-8", errors="replace")

    def stop(self, now: float) -> None:
        """Stop the worker and everything it started (SIGSTOP to its process group)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGSTOP)
        self.stopped = True
        if self.running is not None:
            self.running.pause(now, STOPPED)

    def resume(self, now: float) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGCONT)
        self.stopped = False
        if self.running is not None:
            self.running.resume(now, STOPPED)

    def kill(self, dump_stacks: bool = False) -> None:
        """End the worker and everything it started; optionally dump its stacks first."""
        if self.stopped:
            self.resume(time.monotonic())  # a stopped process cannot dump its stacks
        if self.alive() and dump_stacks:
            try:
                os.kill(self.proc.pid, signal.SIGUSR1)
                time.sleep(1.0)
            except ProcessLookupError:
                pass
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._log.close()


class Executor:
    """Runs cells on up to ``workers`` worker processes, one cell per worker at a time."""

    def __init__(
        self,
        workdir: Path,
        workers: int = 1,
        env: dict[str, str] | None = None,
        gpus: list[str] | None = None,
        lock_dir: Path | None = None,
        reuse_workers: bool = True,
        timing_cpus_per_gpu: int = 0,
        quiet_timing: bool = False,
        crowded_reserve_share: float = CROWDED_RESERVE_SHARE,
        memory_gib: float | None = None,
        compile_threads: int | str | None = None,
    ):
        """``gpus``: UUIDs of the GPUs to spread workers over (slot i gets GPU i mod n,
        pinned with CUDA_VISIBLE_DEVICES, and that GPU's timing lock); none on CPU,
        where the workers share one timing lock for the host. ``reuse_workers=False``
        gives every cell a fresh process (the serial baseline of the throughput
        benchmark). ``timing_cpus_per_gpu`` (with ``gpus``): that many cores per GPU
        are kept free of compiling workers, and a worker timing on that GPU moves there
        while it holds the lock (``runner.schedule.cpus.split_cpus``; ValueError when too
        few cores are left). ``quiet_timing``: while a cell times, every other worker
        busy with a cell is stopped (SIGSTOP to its process group, its clock paused) and
        continued when no cell times any more: the host is quiet for the timing, at the
        cost of the compiling meanwhile. ``crowded_reserve_share``: the share of a run
        with a deadline kept at its end for its crowded retries (``_feed_deadline``).
        ``memory_gib``: each GPU's memory; a cell then starts beside others only where
        it fits (``runner.schedule.memory``). ``compile_threads``: Inductor's compile
        threads in each worker (``TORCHINDUCTOR_COMPILE_THREADS``), a number or
        ``"auto"`` (``compile_threads_per_worker``); None leaves torch's default."""
        self.workdir = workdir
        self.memory_gib = memory_gib
        self.memory = MemoryBudget(self.memory_gib)
        self.crowded_reserve_share = crowded_reserve_share
        self.quiet_timing = quiet_timing
        self.compile_threads = compile_threads
        self.workers = workers
        self.env = dict(os.environ if env is None else env)
        self.env["PYTHONUNBUFFERED"] = "1"
        self.env[SCRATCH_DIR_ENV] = str(workdir)
        self.gpus = gpus or []
        self.lock_dir = lock_dir
        self.reuse_workers = reuse_workers
        self._spawned = 0
        self._kinds: dict[str, WorkerKind] = {}
        self._stop = threading.Event()
        # A deadline set while a run() is under way or about to start (``wrap_up``): the
        # sooner one holds. Whether the last run() was asked to wrap up.
        self._cut: float | None = None
        self.wrapped_up = False
        # For the run() under way with a deadline: when a cell still under way is one
        # that outlasts it (``LONG_CELL_SHARE``): (at, its own clock past).
        self._outlasted_at: tuple[float, float] | None = None
        # The cells the last run() stopped at its wrap-up's end, still under way then,
        # that got no result.
        self.stopped: list[Cell] = []
        # Over the cells of the last run(): seconds from submission to result, by column
        # (its own column's judge a cell against a deadline), and of them, seconds
        # waiting for a GPU's lock (how much the lock held workers back).
        self._column_walls: dict[CellConfig, list[float]] = defaultdict(list)
        self._lock_wait_s = 0.0
        # Cells the last run() started in room kept for a cell waiting for memory, which
        # it would have kept whole before (``MemoryBudget.kept_room``).
        self._backfilled = 0
        # The cores' and GPU locks' use over the last run() (runner.schedule.usage): what bounds it.
        self.usage: usage.Usage | None = None
        self._timing_cpus: list[frozenset[int]] = []
        self._compile_cpus: frozenset[int] = frozenset()
        if timing_cpus_per_gpu and self.gpus:
            self._timing_cpus, self._compile_cpus = split_cpus(
                os.sched_getaffinity(0), len(self.gpus), timing_cpus_per_gpu
            )

    def cpu_threads_per_worker(self) -> int | None:
        """The CPU threads each worker's torch may use (``OMP_NUM_THREADS``), or None for
        torch's default (one per core). On GPUs with several workers, the cores are
        shared out among them: torch's CPU work there (building the model, initializing
        its weights) is not measured, and at one thread per core each, N workers would
        run N threads per core at once, slowing every build and compile several times
        (docs/PERFORMANCE.md, "fourth round"). CPU cells keep the default: their threads
        are part of what they measure. A value the user set is kept."""
        if not self.gpus or self.workers <= 1 or "OMP_NUM_THREADS" in self.env:
            return None
        return self._cores_per_worker()

    def compile_threads_per_worker(self) -> int | None:
        """Inductor's compile threads in each worker, or None for torch's default (one
        per core it may use, up to 32, in every worker: 14 workers on 14 compiling cores
        may run 196 compile processes, and max-autotune's precompiling as many
        threads). ``"auto"`` shares the compiling cores out among the workers."""
        if self.compile_threads != AUTO_THREADS:
            return self.compile_threads
        return self._cores_per_worker()

    def _cores_per_worker(self) -> int:
        """The compiling cores (all of them where none are kept for timing) shared out
        among the workers, at least one each."""
        cores = self._compile_cpus or os.sched_getaffinity(0)
        return max(1, len(cores) // self.workers)

    def _threads_onto(self, result: CellResult) -> None:
        """A note of the compile threads set for the cell's worker, where a run set them."""
        threads = self.compile_threads_per_worker()
        if threads is None:
            return
        note = f"its worker ran with {COMPILE_THREADS_ENV}={threads} (--compile-threads)"
        result.add_note(note)

    def _gpu_of(self, slot: int) -> int:
        """The GPU a slot's workers run on (``_spawn``), by index; 0 without GPUs."""
        return slot % len(self.gpus) if self.gpus else 0

    def _running_on(self, gpu: int, slots: list[Worker | None]) -> list[Cell]:
        """The cells under way on GPU ``gpu`` (by index)."""
        return [
            w.running.cell
            for slot, w in enumerate(slots)
            if w is not None and w.running and self._gpu_of(slot) == gpu
        ]

    def _worker_kind(self, backend: str) -> WorkerKind:
        if backend not in self._kinds:
            self._kinds[backend] = worker_kind(backend, self.env)
        return self._kinds[backend]

    def _spawn(self, kind: WorkerKind, slot: int) -> Worker:
        self._spawned += 1
        env = dict(self.env)
        env.update(kind[1])
        cpu_args: list[str] = []
        if self.gpus:
            index = self._gpu_of(slot)
            gpu = self.gpus[index]
            env["CUDA_VISIBLE_DEVICES"] = gpu
            lock_key = gpu
            if self._timing_cpus:
                cpu_args = [
                    "--compile-cpus",
                    format_cpus(self._compile_cpus),
                    "--timing-cpus",
                    format_cpus(self._timing_cpus[index]),
                ]
        else:
            lock_key = "cpu"
        threads = self.cpu_threads_per_worker()
        if threads is not None:
            env["OMP_NUM_THREADS"] = str(threads)
        compile_threads = self.compile_threads_per_worker()
        if compile_threads is not None:
            env[COMPILE_THREADS_ENV] = str(compile_threads)
        name = f"worker-{self._spawned}"
        return Worker(kind, self.workdir, name, env, lock_key, self.lock_dir, cpu_args)

    def wrap_up(self, within_s: float) -> None:
        """Have the ``run()`` under way (or the next) end within ``within_s`` seconds from
        now, as if its deadline were then (where that is sooner): no cell starts that
        would likely end after it, crowded retries and triage jobs that fit still run.
        Cells still under way at that end are stopped as Ctrl-C would stop them (no
        result; ``stopped`` lists them) and the run ends: the wrap-up's end is kept even
        where a cell started before it runs long. Safe to call from a signal handler or
        another thread."""
        self._cut = time.monotonic() + within_s

    def stop(self) -> None:
        """End a ``run()`` under way in another thread as Ctrl-C would: its workers are
        killed and it raises ``Interrupted``."""
        self._stop.set()

    def run(
        self,
        cells: Iterable[Cell] | CellFeed,
        on_result: Callable[[CellResult], None],
        on_start: Callable[[Cell], None] = lambda cell: None,
        on_phase: Callable[[Cell, str], None] = lambda cell, phase: None,
        deadline: float | None = None,
        retry: Callable[[Cell, CellResult], Cell | None] | None = None,
        triage: str | None = None,
    ) -> None:
        """Run every cell; ``on_result`` gets each result as soon as it exists. No cell
        starts that would likely end after ``deadline`` (``time.monotonic()``): once now
        plus the median wall time of the cells this run finished passes it, no more start
        (before the first finishes, cells start until the deadline itself), so a run in a
        job with a hard time limit ends near its deadline with its cells finished rather
        than killed mid-compile. Those left get no result.
        ``retry(cell, result)`` may give a cell to run again instead of reporting the
        result (a smaller batch after running out of memory): it runs next, in a fresh
        worker, deadline or not, and the result reported in the end says in its notes
        what the earlier attempts ended as. A crowded retry (out of memory beside
        others) runs alone once nothing else is left to start, if it would likely end
        before the deadline; else its last attempt is reported (``ALONE_NOT_REACHED``).
        A cell of ``cells`` that is a crowded retry already waits the same way. With a
        deadline, the feed closes early enough for the crowded retries queued by then to
        run (``_feed_deadline``): a run that ends by its deadline runs them too.
        ``triage`` (a mode of ``runner.triage``): a torch.compile cell that failed is
        reported only after a triage job of it ran in a fresh worker, with the job's
        verdict in its row; a job that would start past the deadline does not, and its
        cell is reported with ``triage interrupted``. A cell
        carrying a recorded row (``runner.triage.RECORDED``) is such a job alone: its
        verdict joins that row; one that would end after the deadline does not start and
        reports nothing.

        ``cells`` may be a ``CellFeed``: the run then lasts until the feed is exhausted and
        every cell taken from it is done.

        Raises ``Interrupted`` on Ctrl-C, SIGTERM (where run in the main thread) or
        ``stop()``, after killing every worker; the cells that were running then get no
        result.
        """
        self.memory = MemoryBudget(self.memory_gib)
        if not isinstance(cells, CellFeed):
            share = self.memory.share_gib(self.workers, len(self.gpus))
            cells = _ListFeed(spread_by_need(list(cells), share))
        feed = Deferring(cells)
        run_started = time.monotonic()
        self._outlasted_at = None
        if deadline is not None:
            end = deadline + RUN_END_GRACE_S
            self._outlasted_at = (end, LONG_CELL_SHARE * (end - run_started))
        again: deque[Cell] = deque()
        earlier: dict[str, list[str]] = {}
        # Failing results waiting for their triage job, by cell key.
        held: dict[str, CellResult] = {}
        # Of those, the keys of rows read from the store (a recorded cell's triage job).
        from_store: set[str] = set()
        # Cells whose retry is queued or running: their last result, recorded if the
        # run is stopped before the retry ends (with its earlier attempts).
        pending: dict[str, CellResult] = {}
        planned = 0
        past_deadline = False
        meter = usage.CpuMeter()
        self._lock_wait_s = 0.0
        self._backfilled = 0
        self._column_walls = defaultdict(list)
        self._stop.clear()
        self.stopped = []
        slots: list[Worker | None] = [None] * self.workers
        # Only the main thread may set a signal handler (a cluster node runs this in one
        # of its own threads, and stops it with stop()).
        in_main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, raise_terminated) if in_main else None
        try:
            crowd_at = time.monotonic()
            while True:
                if self._stop.is_set():
                    raise KeyboardInterrupt
                crowd_at = _observe_crowd(slots, crowd_at)
                if self._cut is not None and (deadline is None or self._cut < deadline):
                    deadline = self._cut
                past_deadline = past_deadline or self._feed_closed(
                    feed, self._feed_deadline(deadline, again, run_started)
                )
                busy = any(w is not None and w.running for w in slots)
                if not (again or busy) and (past_deadline or feed.exhausted()):
                    break
                for index, worker in enumerate(slots):
                    if worker is not None and worker.running:
                        cell = worker.running.cell
                        result = self._check(worker, on_phase)
                        if result is not None:
                            _crowd_onto(result, worker.running)
                            self._threads_onto(result)
                            self._account(worker)
                            self.memory.learn(result)
                            worker.running = None
                            worker.cells_done += 1
                            healthy = result.status in _HEALTHY and worker.alive()
                            if not (healthy and self.reuse_workers):
                                worker.kill()
                                slots[index] = worker = None
                            retried = retry(cell, result) if retry is not None else None
                            pending.pop(cell.key, None)
                            if retried is not None:
                                earlier.setdefault(cell.key, []).append(_attempt(cell, result))
                                pending[cell.key] = result
                                again.append(retried)
                            elif cell.extra.get(TRIAGE):
                                original = held.pop(cell.key)
                                merge_triage(original, result)
                                on_result(original)
                            elif triage and wants_triage(cell, result):
                                _with_attempts(result, earlier.pop(cell.key, []))
                                held[cell.key] = result
                                again.append(
                                    replace(
                                        cell,
                                        timeout_s=job_timeout(cell, triage),
                                        extra={**cell.extra, TRIAGE: triage},
                                    )
                                )
                            else:
                                _with_attempts(result, earlier.pop(cell.key, []))
                                on_result(result)
                    if worker is None or not worker.running:
                        # Asked again here: a cell that just finished moves the median.
                        past_deadline = past_deadline or self._feed_closed(
                            feed, self._feed_deadline(deadline, again, run_started)
                        )
                        beside = self._running_on(self._gpu_of(index), slots)
                        if any(self.memory.alone(cell) for cell in beside):
                            # A crowded retry run alone has this GPU to itself.
                            continue
                        feed_done = past_deadline or feed.exhausted()
                        ready = _ready(
                            again,
                            beside,
                            feed_done=feed_done,
                            alone=self.memory.alone,
                            fits=lambda cell, beside=beside: self.memory.fits(cell, beside),
                        )
                        if ready is None and again and feed_done:
                            # A crowded retry waits for a GPU to empty, or for room:
                            # nothing new starts meanwhile.
                            continue
                        if (
                            ready is not None
                            and ready.crowded_retries
                            and self._closed(deadline, self._expected_s(ready, CROWDED_QUANTILE))
                        ):
                            # Alone, it would likely end after the deadline: its last
                            # attempt stands (a recorded row, or this run's result).
                            _take(again, ready)
                            last = pending.pop(ready.key, None)
                            if last is not None:
                                _last_attempt(last, earlier.pop(ready.key, []))
                                # Its retry alone never ran to its end.
                                last.add_note(ALONE_NOT_REACHED)
                                on_result(last)
                            continue
                        if (
                            ready is not None
                            and ready.extra.get(TRIAGE)
                            and self._closed(deadline, _triage_s(ready, held))
                        ):
                            # A triage job would end after the deadline: its cell is
                            # recorded without a verdict (the next --triage run gives one).
                            _take(again, ready)
                            original = held.pop(ready.key)
                            original.triage_rung = TRIAGE_INTERRUPTED
                            on_result(original)
                            continue
                        if ready is not None:
                            cell = _take(again, ready)
                        elif (
                            past_deadline
                            or (cell := self._take_fitting(feed, beside, slots, again)) is None
                        ):
                            continue
                        elif self.memory.alone(cell):
                            # Planned as a crowded retry (a recorded row that ran out of
                            # memory beside others) to run alone: it waits, to the end.
                            again.append(cell)
                            planned += 1
                            continue
                        else:
                            if RECORDED in cell.extra:
                                # A recorded cell's triage job: it starts if it fits
                                # the deadline, else its row stands for a later run.
                                cell, recorded = _recorded_job(cell)
                                if self._closed(deadline, _triage_s(cell, {cell.key: recorded})):
                                    continue
                                held[cell.key] = recorded
                                from_store.add(cell.key)
                            planned += 1
                        kind = self._worker_kind(cell.config.backend)
                        if worker is not None and worker.kind != kind:
                            worker.kill()
                            worker = None
                        if worker is None:
                            worker = self._spawn(kind, index)
                            slots[index] = worker
                        result_path = self.workdir / f"result-{self._spawned}-{cell.key}.json"
                        worker.submit(cell, result_path)
                        on_start(cell)
                if self._cut is not None and time.monotonic() >= self._cut:
                    # The wrap-up's end, with the results already in taken: what is
                    # under way or queued ends as Ctrl-C would end it, and the run too.
                    # (The workers are killed on the way out, below.)
                    self.stopped = [w.running.cell for w in slots if w and w.running]
                    _note_cut_retries([*again, *self.stopped], pending, ALONE_NOT_REACHED)
                    # Listed: those left without a row (a retry's earlier attempt, a
                    # triaged cell's failure, are recorded by _settle).
                    self.stopped = [
                        c for c in self.stopped if c.key not in held and c.key not in pending
                    ]
                    _settle(held, from_store, pending, earlier, on_result)
                    break
                if self.quiet_timing:
                    _quiet_while_timing(slots)
                time.sleep(POLL_S)
        except KeyboardInterrupt as stop:
            in_flight = [w.running.cell for w in slots if w and w.running]
            _note_cut_retries([*again, *in_flight], pending, ALONE_INTERRUPTED)
            for worker in slots:
                if worker is not None:
                    worker.kill()
            slots = []
            _settle(held, from_store, pending, earlier, on_result)
            raise interruption(stop) from None
        finally:
            # Idle workers hold nothing worth waiting for: end them at once, so that a
            # late Ctrl-C finds no cleanup to interrupt.
            for worker in slots:
                if worker is not None:
                    worker.kill()
            if in_main:
                signal.signal(signal.SIGTERM, previous)
            self.wrapped_up, self._cut = self._cut is not None, None
            cell_s = sum(self._walls())
            lock_wait = self._lock_wait_s / cell_s if cell_s else None
            self.usage = usage.measure(
                self.workdir,
                meter,
                self.workers,
                planned,
                lock_wait,
                len(feed.passed_over),
                self._backfilled,
            )

    def _take_fitting(
        self,
        feed: Deferring,
        beside: list[Cell],
        slots: list[Worker | None],
        again: Collection[Cell] = (),
    ) -> Cell | None:
        """The feed's first cell that fits its GPU's memory beside the cells under way
        there (``runner.schedule.memory``), leaving room for a crowded retry of
        ``again`` that waits to share it; a crowded retry to run alone always does: it
        waits (``_ready``). A max-autotune cell whose partner in the other max-autotune
        mode is under way on this host waits for it, to compile with its tuning
        (``runner.measure.tuning``)."""
        waiting = next((c for c in again if c.crowded_retries and not self.memory.alone(c)), None)
        kept = self.memory.need(waiting) if waiting is not None else 0.0

        def fits(cell: Cell, reserve_gib: float) -> bool:
            return self.memory.alone(cell) or self.memory.fits(cell, beside, reserve_gib + kept)

        # Asked only once a cell has waited long enough to have room kept for it, and
        # then once per call: most calls keep no room.
        kept_for: list[Cell] = []
        left: list[tuple[Cell, float | None]] = []

        def keep(first: Cell) -> float:
            if not kept_for:
                left.extend(self._seconds_left(beside, slots))
            kept_for.append(first)
            return self.memory.kept_room(first, left)

        under_way = [w.running.cell for w in slots if w is not None and w.running]
        waits = tuning.partner_under_way(under_way) if tuning.enabled(self.env) else None
        if waits is None:
            found = feed.take_fitting(fits, keep)
        else:
            found = feed.take_fitting(fits, keep, waits)
        if found is not None and kept_for and not fits(found, self.memory.need(kept_for[0])):
            # It would have waited while all the waiting cell needs was kept.
            self._backfilled += 1
        return found

    def _seconds_left(
        self, beside: list[Cell], slots: list[Worker | None]
    ) -> list[tuple[Cell, float | None]]:
        """Each of ``beside`` (cells under way) with the seconds it is expected to go on
        for: its expected wall (its newest row's, ``EXPECTED_S``, else the median of its
        column's cells this run has finished) less the time since it was handed out,
        none below 0 (a cell past its expected wall is expected to end first). None
        where no wall is known, and for triage jobs (a ladder's length is its own)."""
        running = {id(w.running.cell): w.running for w in slots if w is not None and w.running}
        now = time.monotonic()
        finished = bool(self._walls())
        left: list[tuple[Cell, float | None]] = []
        for cell in beside:
            expected = cell.extra.get(EXPECTED_S)
            if expected is None and finished:
                expected = self._expected_s(cell)
            under_way = running.get(id(cell))
            if expected is None or cell.extra.get(TRIAGE) or under_way is None:
                left.append((cell, None))
            else:
                left.append((cell, max(float(expected) - (now - under_way.submitted), 0.0)))
        return left

    def _account(self, worker: Worker) -> None:
        running = worker.running
        assert running is not None
        now = time.monotonic()
        self._column_walls[running.cell.config].append(now - running.submitted)
        self._lock_wait_s += running.waited(WAITING_FOR_GPU, now)

    def _closed(self, deadline: float | None, expected_s: float | None = None) -> bool:
        """Whether work started now would likely end after ``deadline``: now plus
        ``expected_s``, by default the median wall time of the cells finished so far in
        this run (0 before the first)."""
        if deadline is None:
            return False
        if expected_s is None:
            expected_s = self._expected_s()
        return time.monotonic() + expected_s >= deadline

    def _expected_s(self, cell: Cell | None = None, quantile: float = 0.5) -> float:
        """How long ``cell`` would likely take: the median wall (or another
        ``quantile``) of its column's cells finished so far in this run where there are
        some, else of all of them (0 before the first); without a cell, the run's."""
        walls = (self._column_walls.get(cell.config) if cell is not None else None) or (
            self._walls()
        )
        return _quantile(walls, quantile) if walls else 0.0

    def _walls(self) -> list[float]:
        """The wall times of every cell the last run() finished, whatever its column."""
        return [wall for walls in self._column_walls.values() for wall in walls]

    def _feed_deadline(
        self, deadline: float | None, again: deque[Cell], started: float
    ) -> float | None:
        """The deadline new cells from the feed are judged against: the run's, less the
        time the crowded retries queued by now would take alone, one after another (each
        by its column's upper-quartile wall, as a retry's start is judged: a cell that ran
        out of memory is one of the larger models), for as many of them, in queue order,
        as fit in ``crowded_reserve_share`` of the run, and the time the cells under way
        at the close take to end: the last of ``workers`` of them, the run's walls at
        quantile workers/(workers + 1). Once it passes, the feed closes, the cells under
        way end, and the retries run alone while they fit the run's own deadline."""
        if deadline is None or not any(cell.crowded_retries for cell in again):
            return deadline
        room = self.crowded_reserve_share * (deadline - started)
        drain = self._expected_s(quantile=self.workers / (self.workers + 1))
        reserve = 0.0
        for cell in again:
            if not cell.crowded_retries:
                continue
            expected = self._expected_s(cell, CROWDED_QUANTILE)
            if drain + reserve + expected > room:
                break
            reserve += expected
        return deadline - (drain + reserve if reserve else 0.0)

    def _feed_closed(self, feed: CellFeed, deadline: float | None) -> bool:
        """Whether the feed's next cell would likely end after ``deadline``: judged by
        the cells of its own column finished so far where there are some (a run of
        several columns: one of max-autotune's takes minutes where one of eager's takes
        seconds), else by the whole run's (``_closed``), as for a feed that cannot show
        its next cell."""
        peek = getattr(feed, "peek", None)
        upcoming = peek() if peek is not None else None
        return self._cell_closed(upcoming, deadline)

    def _cell_closed(self, cell: Cell | None, deadline: float | None) -> bool:
        """Whether ``cell`` started now would likely end after ``deadline``: by the
        median of its column's cells finished so far, else of the whole run's."""
        return self._closed(deadline, self._expected_s(cell))

    def _check(self, worker: Worker, on_phase: Callable[[Cell, str], None]) -> CellResult | None:
        running = worker.running
        assert running is not None
        if running.result_path.exists():
            return self._finished(worker)
        status = worker.status()
        now = time.monotonic()
        if running.clock_start is None and status:
            # The worker has imported torch: the cell's own time starts now.
            running.start_clock(now)
        if status.startswith(running.cell.key):
            reported = status.split(" ", 1)[1]
            if reported != running.reported:
                running.reported = reported
                if reported == WAITING:
                    running.pause(now, WAITING_FOR_GPU)
                else:
                    running.resume(now, WAITING_FOR_GPU)
                    running.phase = reported
                on_phase(running.cell, reported)
        if not worker.alive():
            # The result may have landed between the two checks above.
            if running.result_path.exists():
                return self._finished(worker)
            return self._died(worker)
        if running.clock_start is None:
            if now - running.submitted - running.paused_total(now) > STARTUP_LIMIT_S:
                return self._timed_out(worker, STARTUP_LIMIT_S)
        elif running.elapsed_s(now) > running.cell.timeout_s:
            return self._timed_out(worker, running.cell.timeout_s)
        if self._outlasted_at is not None and running.clock_start is not None:
            end, long_s = self._outlasted_at
            # Judged by its clock at the end (not since: the chunk's stop comes soon).
            if now >= end and running.elapsed_s(now) - (now - end) >= long_s:
                return self._outlasted(worker, now - running.submitted)
        return None

    def _finished(self, worker: Worker) -> CellResult:
        running = worker.running
        assert running is not None
        result = CellResult.from_dict(json.loads(running.result_path.read_text()))
        running.result_path.unlink()
        partial_path(running.result_path).unlink(missing_ok=True)
        return result

    def _died(self, worker: Worker) -> CellResult:
        running = worker.running
        assert running is not None
        code = worker.proc.returncode
        if code < 0:
            try:
                what = signal.Signals(-code).name
            except ValueError:
                what = f"signal {-code}"
            message = f"the worker process died from {what} during phase '{running.phase}'"
            if what == "SIGKILL":
                message += " (killed from outside: often the kernel's out-of-memory killer)"
        else:
            what = f"exit code {code}"
            message = f"the worker process exited with code {code} during phase '{running.phase}'"
        return self._process_failure(worker, CRASH, what, message)

    def _timed_out(self, worker: Worker, limit_s: float) -> CellResult:
        running = worker.running
        assert running is not None
        worker.kill(dump_stacks=True)
        message = f"no result after {limit_s:.0f} s; it was in phase '{running.phase}'"
        return self._process_failure(worker, TIMEOUT, "Timeout", message)

    def _outlasted(self, worker: Worker, ran_s: float) -> CellResult:
        """A cell stopped at the end of a time-limited run it could not end within."""
        running = worker.running
        assert running is not None
        worker.kill(dump_stacks=True)
        message = (
            f"no result after {ran_s:.0f} s, when the run's --time-limit ended it; it was in "
            f"phase '{running.phase}'. A run of that length cannot measure it (its own "
            f"--timeout, {running.cell.timeout_s:.0f} s, was not reached); one without "
            "--time-limit can (--retry-failed)"
        )
        return self._process_failure(worker, TIMEOUT, OUTLASTED_RUN, message)

    def _process_failure(self, worker: Worker, status: str, what: str, message: str) -> CellResult:
        running = worker.running
        assert running is not None
        if (kept := _measured_before(running, status, message)) is not None:
            return kept
        log = worker.log_since_submit()
        return CellResult.for_cell(
            running.cell,
            status=status,
            error_type=what,
            error_phase=running.phase,
            error_signature=f"{status}: {what} in {running.phase}",
            error_message=message,
            traceback_tail=_stack_dump(log),
            stderr_tail=log[-STDERR_TAIL_CHARS:] or None,
            wall_s=round(time.monotonic() - running.submitted, 3),
            started_at=running.started_at,
            finished_at=utc_now_iso(),
        )


def _measured_before(running: _Running, status: str, message: str) -> CellResult | None:
    """The cell's row as its worker kept it before its last phase (everything measured
    but the graph breaks: ``runner.schedule.worker.partial_path``), where the process
    was stopped or died in that phase; None where it kept none."""
    path = partial_path(running.result_path)
    try:
        kept = CellResult.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError, KeyError):
        return None
    finally:
        path.unlink(missing_ok=True)
    note = (
        f"its graph breaks were not captured: the process ended as a {status} in phase "
        f"'{running.phase}', after everything else was measured ({message})"
    )
    kept.add_note(note)
    kept.wall_s = round(time.monotonic() - running.submitted, 3)
    kept.finished_at = utc_now_iso()
    return kept


def _observe_crowd(slots: list[Worker | None], since: float) -> float:
    """Add the time since ``since`` to the compile time seen of each cell in a compile
    phase, and that time times the number of other cells busy on the host's cores (in a
    ``CPU_BUSY`` phase, not waiting for a GPU lock) to its crowd; now, for the next call.
    Phases are those of the last poll, which is at most a loop turn old."""
    now = time.monotonic()
    # A worker stopped while another times (--quiet-timing) loads no core meanwhile.
    active = [
        w.running
        for w in slots
        if w is not None
        and w.running is not None
        and w.running.reported != WAITING
        and not w.stopped
    ]
    busy = sum(1 for running in active if running.phase in CPU_BUSY)
    for running in active:
        if running.phase in COMPILING:
            running.compiling_s += now - since
            running.beside_s += (now - since) * (busy - 1)
        elif running.phase == TIMING:
            running.timing_s += now - since
            running.timing_beside_s += (now - since) * busy
    return now


def _crowd_onto(result: CellResult, running: _Running | None) -> None:
    """The cell's ``compile_beside`` (the mean number of other cells busy beside its
    compile), and a note where that is one or more; its ``timing_beside`` (the same
    through its timed calls)."""
    if running is not None and running.timing_s > 0:
        result.timing_beside = round(running.timing_beside_s / running.timing_s, 2)
    if running is None or running.compiling_s <= 0:
        return
    beside = running.beside_s / running.compiling_s
    result.compile_beside = round(beside, 2)
    if beside >= CROWDED_COMPILE:
        cores = len(os.sched_getaffinity(0))
        note = (
            f"compiled beside a mean of {beside:.1f} other cells of the run building or "
            f"compiling on the {cores} cores it had: its compile time is a crowded host's, "
            "longer than alone"
        )
        result.add_note(note)


def _attempt(cell: Cell, result: CellResult) -> str:
    """An earlier attempt of a cell, as its final result's notes tell it."""
    what = (
        f"{result.status} ({result.error_signature})" if result.error_signature else result.status
    )
    crowded = next(
        (note for note in (result.notes or "").split("; ") if note.startswith(CROWDED)), None
    )
    return f"an attempt at batch {cell.run_batch_size} ended {what}" + (
        f", {crowded}" if crowded else ""
    )


def _ready(
    again: deque[Cell],
    beside: list[Cell],
    *,
    feed_done: bool,
    alone: Callable[[Cell], bool],
    fits: Callable[[Cell], bool],
) -> Cell | None:
    """The first queued cell that may start now on a GPU where ``beside`` run. A cell
    that ran out of memory beside other processes (``Cell.crowded_retries``) is retried
    at the same batch. Its first retry shares the GPU (``runner.schedule.memory``): it
    starts once it ``fits`` beside the cells under way, all of known needs, with room
    kept for it. A later retry (or any where the GPU's memory is unknown) runs
    ``alone``: it starts once nothing else runs on the GPU, and nothing starts beside it
    (the cells that ran beside it were not the only ones that could crowd it again: in
    chunk 74d18d18 InklingModel's retries met LongcatFlashModel, started meanwhile, at
    106 of the 139.8 GiB). It waits until the feed has no more to start (``feed_done``):
    emptying the GPU for it while cells are left idles every other worker (in chunk
    d4eff076 one gemma4 ViT's retry drained 13 workers for 107 s and then ran alone for
    111 s, a third of the chunk); other queued cells go first."""
    plain = next((cell for cell in again if not cell.crowded_retries), None)
    if plain is not None:
        return plain
    shared = next((c for c in again if c.crowded_retries and not alone(c) and fits(c)), None)
    if shared is not None or not feed_done:
        return shared
    if beside:
        return None
    return next((cell for cell in again if cell.crowded_retries), None)


def _take(again: deque[Cell], cell: Cell) -> Cell:
    """Remove ``cell`` (this very object) from ``again`` and return it."""
    index = next(i for i, queued in enumerate(again) if queued is cell)
    del again[index]
    return cell


def _note_cut_retries(cells: list[Cell], pending: dict[str, CellResult], why: str) -> None:
    """Of ``cells`` (queued or under way as the run ends early), the crowded retries: their
    last attempt, recorded in their stead, says ``why`` the retry alone did not end."""
    for cell in cells:
        last = pending.get(cell.key)
        if cell.crowded_retries and last is not None:
            last.add_note(why)


def _quantile(values: list[float], q: float) -> float:
    """``values`` at quantile ``q`` (0 to 1), linear between the nearest two."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _settle(
    held: dict[str, CellResult],
    from_store: set[str],
    pending: dict[str, CellResult],
    earlier: dict[str, list[str]],
    on_result: Callable[[CellResult], None],
) -> None:
    """Report what a run stopped early leaves waiting: finished cells whose triage had
    not ended, untriaged (a recorded cell's row is there already), and cells whose
    retry had not ended, as their last attempt ended."""
    for key, result in held.items():
        if key not in from_store:
            result.triage_rung = TRIAGE_INTERRUPTED
            on_result(result)
    held.clear()
    for key, result in pending.items():
        on_result(_last_attempt(result, earlier.get(key, [])))
    pending.clear()


def _last_attempt(result: CellResult, attempts: list[str]) -> CellResult:
    """``result``, a cell's last attempt, reported because its retry will not run: its
    notes say what the attempts before it ended as (``attempts`` ends with its own)."""
    _with_attempts(result, attempts[:-1])
    return result


def _with_attempts(result: CellResult, attempts: list[str]) -> None:
    if attempts:
        result.notes = "; ".join([*attempts, *([result.notes] if result.notes else [])])


def _quiet_while_timing(slots: list[Worker | None]) -> None:
    """Stop every busy worker while another times; continue them all when none does.

    A timing cell is never stopped, so nothing it waits for can be (what it needs, its
    GPU's lock, it holds); with several GPUs, cells timing on each run side by side."""
    now = time.monotonic()
    workers = [w for w in slots if w is not None]
    timing = [w for w in workers if w.running and w.running.reported == QUIET_PHASE]
    for worker in workers:
        if timing and worker.running and worker not in timing and not worker.stopped:
            worker.stop(now)
        elif worker.stopped and (not timing or worker in timing or not worker.running):
            worker.resume(now)


def _recorded_job(cell: Cell) -> tuple[Cell, CellResult]:
    """A recorded cell's triage job (``runner.triage.job_of_recorded``) as a worker runs
    it, and the recorded row its verdict joins."""
    extra = dict(cell.extra)
    recorded = CellResult.from_dict(extra.pop(RECORDED))
    return replace(cell, extra=extra), recorded


def _triage_s(job: Cell, held: dict[str, CellResult]) -> float:
    """What a triage job likely takes (``runner.triage.failed_job_s``): priced as four
    whole cells, a large model's job would never fit a chunked sweep's time limit."""
    return failed_job_s(job, held[job.key])


def _stack_dump(log: str) -> str | None:
    """The faulthandler dump at the end of a worker's output, if there is one.

    Walks back from the end over the lines a dump is made of, so that a dump of
    several threads is kept whole and the model's own output before it is not.
    """
    lines = log.rstrip("\n").splitlines()
    start = len(lines)
    while start > 0 and (not lines[start - 1].strip() or lines[start - 1].startswith(_DUMP_LINES)):
        start -= 1
    dump = "\n".join(lines[start:]).strip()
    if not any(marker in dump for marker in _DUMP_MARKERS):
        return None
    return dump[-DUMP_CHARS:]
