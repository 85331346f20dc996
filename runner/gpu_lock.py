"""One lock per GPU, held while a worker runs kernels whose time is measured.

Compiling is CPU-bound and may overlap; timing needs the GPU alone. Workers on one
host share a lock file per GPU, keyed by the GPU's UUID (two workers pinned to one GPU
share one lock), and ``flock`` releases it when a holder dies, so a crashed worker can
never wedge the sweep. The lock is re-entrant within a process: Inductor's kernel
benchmarking during max-autotune takes it too, possibly while it is already held.

Two kinds of holders: timing (a cell's timed calls and peak memory) and tuning
(autotuners that run kernels while compiling: Inductor's benchmarking, XLA's compile).
Timing goes first: a process waiting to time leaves a marker file (flocked, so a dead
waiter's marker is recognized as stale), and a tuner that gets the lock while a live
marker exists gives it back and tries again. Otherwise a cell that has compiled waits
behind every other cell's compile (on an XLA sweep of 8 workers: no cell finished in
4.6 minutes).

With ``timing_cpus``, the thread holding the lock also moves onto cores that no
compiling worker runs on (the executor keeps them free), so the host side of a timed
call (Python, kernel launches) does not share a core with its neighbours' compiles.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from runner.usage import HoldLog

DEFAULT_LOCK_DIR = Path(tempfile.gettempdir()) / "zoo-matrix-locks"
WAITING_PHASE = "waiting for the GPU"
# How long a tuner that gave the lock back to a waiting timer sleeps before trying again.
TUNER_BACKOFF_S = 0.05


class GpuLock:
    """A re-entrant, cross-process exclusive lock for one GPU (or one CPU host)."""

    def __init__(
        self,
        key: str,
        lock_dir: Path = DEFAULT_LOCK_DIR,
        on_wait: Callable[[], None] = lambda: None,
        on_acquired: Callable[[], None] = lambda: None,
        timing_cpus: frozenset[int] | None = None,
        holds_log: HoldLog | None = None,
    ):
        """``on_wait`` runs when another process holds the lock and this one starts to
        wait; ``on_acquired`` when it then gets it (the parent pauses the cell's clock
        in between: waiting for the GPU is not the cell's time). ``holds_log`` gets a
        line per outermost hold (``runner.usage``: what bounds a sweep)."""
        self.key = key
        self.holds_log = holds_log
        self._hold: tuple[str, float] | None = None
        self.on_wait = on_wait
        self.on_acquired = on_acquired
        self.timing_cpus = timing_cpus
        self._saved_cpus: set[int] | None = None
        lock_dir.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", key)
        self.path = lock_dir / f"{safe}.lock"
        self.waiters_dir = lock_dir / f"{safe}.timing-waiters"
        self._fd: int | None = None
        self._depth = 0
        self._mutex = threading.RLock()

    @contextlib.contextmanager
    def held(self, tuning: bool = False) -> Iterator[None]:
        """Hold the lock for the block; ``tuning`` yields it to any process waiting to
        time (see the module's docstring)."""
        with self._mutex:
            if self._depth == 0:
                self._fd = self._acquire_tuning() if tuning else self._acquire_timing()
                self._hold = ("tuning" if tuning else "timing", time.time())
                if self.timing_cpus:
                    # Linux applies this to the calling thread: the one that launches.
                    self._saved_cpus = os.sched_getaffinity(0)
                    os.sched_setaffinity(0, self.timing_cpus)
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._fd is not None:
                    if self._saved_cpus is not None:
                        # Every thread, not just this one: threads started while it
                        # held the lock (XLA's compile and execution threads, an OpenMP
                        # pool) inherited the timing cores, and left there they would
                        # share them with the next holder's timing.
                        move_threads(self._saved_cpus)
                        self._saved_cpus = None
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
                    os.close(self._fd)
                    self._fd = None
                    if self.holds_log is not None and self._hold is not None:
                        kind, start = self._hold
                        self.holds_log.record(self.key, kind, start, time.time())

    def _open(self) -> int:
        return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)

    def _acquire_timing(self) -> int:
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            pass
        self.on_wait()
        self.waiters_dir.mkdir(exist_ok=True)
        # Flocked before it gets its name, so no tuner can take it for a dead one's.
        name = f"{os.getpid()}-{threading.get_ident()}"
        marker = self.waiters_dir / f"{name}.wait"
        unnamed = self.waiters_dir / f"{name}.new"
        marker_fd = os.open(unnamed, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(marker_fd, fcntl.LOCK_EX)
            os.rename(unnamed, marker)
            fcntl.flock(fd, fcntl.LOCK_EX)
        finally:
            with contextlib.suppress(FileNotFoundError):
                marker.unlink()
            os.close(marker_fd)
        self.on_acquired()
        return fd

    def _acquire_tuning(self) -> int:
        fd = self._open()
        waited = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not waited:
                    self.on_wait()
                    waited = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            if not self.timing_waiters():
                break
            fcntl.flock(fd, fcntl.LOCK_UN)
            if not waited:
                self.on_wait()
                waited = True
            time.sleep(TUNER_BACKOFF_S)
        if waited:
            self.on_acquired()
        return fd

    def timing_waiters(self) -> int:
        """Processes waiting to time now; markers of dead waiters are removed."""
        live = 0
        for marker in self.waiters_dir.glob("*.wait") if self.waiters_dir.is_dir() else ():
            try:
                fd = os.open(marker, os.O_RDWR)
            except FileNotFoundError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                live += 1
            else:
                with contextlib.suppress(FileNotFoundError):
                    marker.unlink()
            finally:
                os.close(fd)
        return live


def guard_inductor_benchmarking(lock: GpuLock) -> None:
    """Make Inductor's kernel benchmarking (max-autotune, Triton autotuning) hold ``lock``:
    its choices come from timings, which neighbours would skew like ours."""
    from torch._inductor.runtime import benchmarking

    for cls in vars(benchmarking).values():
        method = isinstance(cls, type) and cls.__dict__.get("benchmark_gpu")
        if not method or getattr(method, "_zoo_guarded", False):
            continue

        def guarded(self, *args, _original=method, **kwargs):
            with lock.held(tuning=True):
                return _original(self, *args, **kwargs)

        guarded._zoo_guarded = True
        cls.benchmark_gpu = guarded


def move_threads(cpus: Iterable[int] | None) -> None:
    """Every thread of this process onto ``cpus`` (Linux sets affinity per thread)."""
    if not cpus:
        return
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(int(tid), cpus)


def parse_cpus(text: str | None) -> frozenset[int] | None:
    """``"0,1,5"`` -> {0, 1, 5}; empty or None -> None."""
    return frozenset(int(part) for part in text.split(",")) if text else None


def format_cpus(cpus: Iterable[int]) -> str:
    return ",".join(str(cpu) for cpu in sorted(cpus))


def split_cpus(
    available: Iterable[int], gpus: int, per_gpu: int
) -> tuple[list[frozenset[int]], frozenset[int]]:
    """``per_gpu`` cores reserved for the timing of each GPU (the highest-numbered ones)
    and the rest, where workers compile. At least one core is always left to compile."""
    cores = sorted(available)
    reserved = per_gpu * gpus
    if per_gpu < 0 or reserved >= len(cores):
        raise ValueError(
            f"cannot reserve {per_gpu} core(s) for each of {gpus} GPU(s) out of "
            f"{len(cores)}: at least one must be left for compiling"
        )
    timing = [
        frozenset(
            cores[len(cores) - reserved + i * per_gpu : len(cores) - reserved + (i + 1) * per_gpu]
        )
        for i in range(gpus)
    ]
    return timing, frozenset(cores[: len(cores) - reserved])
