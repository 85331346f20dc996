"""One lock per GPU, held while a worker runs kernels on it.

Compiling is CPU-bound and may overlap; timing needs the GPU alone. Workers on one
host share a lock file per GPU, keyed by the GPU's UUID (two workers pinned to one GPU
share one lock), and ``flock`` releases it when a holder dies, so a crashed worker can
never wedge the sweep. The lock is re-entrant within a process: Inductor's kernel
benchmarking during max-autotune takes it too, possibly while it is already held.

Three kinds of holders (``runner.matrix.holds``), by rank: timing (exclusive), untimed
(shared with other untimed work, never beside timing or tuning) and tuning (exclusive).
A holder gives the lock back to a waiter of higher rank: a process waiting to time or to
do untimed work leaves a marker file (flocked, so a dead waiter's marker is recognized
as stale), and a lower-ranked process that gets the lock while such a marker lives gives
it back and tries again. Without that, a cell that has compiled waits behind every other
cell's compile, and a timer behind a stream of overlapping shared holds. Untimed work
ranks above tuning because its holds are short and each one unblocks a worker (the
reference and eager outputs come before a cell compiles, the warm-up before it times,
the memory pass before its worker is free): ranked below it, cells stall while anyone
tunes and then end in waves, leaving the lock idle while the wave compiles. The rounds
that led to these rules are in docs/PERFORMANCE.md ("Sweep throughput").

With ``timing_cpus``, the thread holding the lock also moves onto cores that no
compiling worker runs on (the executor keeps them free), so the host side of a timed
call (Python, kernel launches) does not share a core with its neighbours' compiles.
With ``boost`` (``runner.schedule.cpus.Boost``) the holding thread's CPU priority is
raised for the hold instead, where the privilege is there, so that no core is needed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from runner.matrix.holds import TIMING, TUNING, UNTIMED
from runner.measure.host import move_threads
from runner.schedule.cpus import Boost
from runner.schedule.usage import HoldLog

DEFAULT_LOCK_DIR = Path(tempfile.gettempdir()) / "zoo-matrix-locks"
# The kinds of hold, by rank: a hold gives the lock back to a waiter of a higher rank.
_RANK = {TUNING: 0, UNTIMED: 1, TIMING: 2}
# How long a holder that gave the lock back to a waiter of higher rank sleeps before
# trying again.
YIELD_BACKOFF_S = 0.05


class GpuLock:
    """A re-entrant, cross-process lock for one GPU (or one CPU host): exclusive for timing
    and tuning, shared for untimed work."""

    def __init__(
        self,
        key: str,
        lock_dir: Path = DEFAULT_LOCK_DIR,
        on_wait: Callable[[], None] = lambda: None,
        on_acquired: Callable[[], None] = lambda: None,
        timing_cpus: frozenset[int] | None = None,
        holds_log: HoldLog | None = None,
        boost: Boost | None = None,
    ):
        """``on_wait`` runs when another process holds the lock and this one starts to
        wait; ``on_acquired`` when it then gets it (the parent pauses the cell's clock
        in between: waiting for the GPU is not the cell's time). ``holds_log`` gets a
        line per stretch held in one mode (``runner.usage``: what bounds a sweep)."""
        self.key = key
        self.holds_log = holds_log
        self.on_wait = on_wait
        self.on_acquired = on_acquired
        self.timing_cpus = timing_cpus
        # The holding thread's CPU priority raised for the hold, where permitted.
        self.boost = boost
        self._saved_cpus: set[int] | None = None
        lock_dir.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", key)
        self.path = lock_dir / f"{safe}.lock"
        self.waiters_dir = lock_dir / f"{safe}.waiters"
        self._fd: int | None = None
        # The kinds of the holds this process is inside, outermost first, and the
        # stretch held in the present mode (kind, since): logged when the mode changes.
        self._kinds: list[str] = []
        self._stretch: tuple[str, float] | None = None
        self._mutex = threading.RLock()
        # Seconds this process held the lock, per kind, since the caller last cleared it
        # (a worker clears it before each cell and records it in the cell's row).
        self.held_s: dict[str, float] = {}

    @contextlib.contextmanager
    def held(self, kind: str = TIMING) -> Iterator[None]:
        """Hold the lock for the block as ``kind`` (see the module's docstring). Inside an
        exclusive hold any hold is free; an exclusive one inside an untimed hold turns
        the shared hold exclusive for its block."""
        if kind not in _RANK:
            raise ValueError(f"unknown kind of hold {kind!r}: one of {', '.join(_RANK)}")
        with self._mutex:
            outer = self._mode()
            # An exclusive hold inside an untimed one: the shared lock turns exclusive
            # for the block, and back after it.
            converts = outer == UNTIMED and kind != UNTIMED
            if outer is None:
                self._fd = self._open()
                try:
                    self._acquire(kind)
                except BaseException:  # Ctrl-C while waiting: nothing held, nothing open
                    os.close(self._fd)
                    self._fd = None
                    raise
                self._begin(kind)
                if self.boost is not None:
                    self.boost.raise_()
                if self.timing_cpus:
                    # Linux applies this to the calling thread: the one that launches.
                    self._saved_cpus = os.sched_getaffinity(0)
                    os.sched_setaffinity(0, self.timing_cpus)
            elif converts:
                self._end()
                self._acquire(kind)  # flock converts the shared lock (not atomically)
                self._begin(kind)
            self._kinds.append(kind)
            try:
                yield
            finally:
                self._kinds.pop()
                if not self._kinds:
                    self._release()
                elif converts:
                    self._end()
                    fcntl.flock(self._fd, fcntl.LOCK_SH)
                    self._begin(UNTIMED)

    @property
    def holding(self) -> bool:
        """Whether this process holds the lock now, in any mode."""
        return bool(self._kinds)

    def _mode(self) -> str | None:
        """The kind this process holds the lock as: its first exclusive hold, else
        untimed; None when it holds none."""
        exclusive = [kind for kind in self._kinds if kind != UNTIMED]
        return exclusive[0] if exclusive else (self._kinds[0] if self._kinds else None)

    def _begin(self, kind: str) -> None:
        self._stretch = (kind, time.time())

    def _end(self) -> None:
        if self._stretch is not None:
            kind, start = self._stretch
            end = time.time()
            self.held_s[kind] = self.held_s.get(kind, 0.0) + end - start
            if self.holds_log is not None:
                self.holds_log.record(self.key, kind, start, end)
        self._stretch = None

    def _release(self) -> None:
        if self._saved_cpus is not None:
            # Every thread, not just this one: threads started while it held the lock
            # (XLA's compile and execution threads, an OpenMP pool) inherited the timing
            # cores, and left there they would share them with the next holder's timing.
            move_threads(self._saved_cpus)
            self._saved_cpus = None
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        self._end()
        if self.boost is not None:
            self.boost.restore()  # after the lock is free: it reads /proc

    def _open(self) -> int:
        return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)

    def _acquire(self, kind: str) -> None:
        """Take ``self._fd``'s lock as ``kind``: timing and untimed work wait their turn,
        announced by a marker; untimed work and tuning give the lock back while someone
        of a higher rank waits, and try again."""
        assert self._fd is not None
        fd = self._fd
        operation = fcntl.LOCK_SH if kind == UNTIMED else fcntl.LOCK_EX
        yields_to = [k for k, rank in _RANK.items() if rank > _RANK[kind]]
        waited = False

        def waiting() -> None:  # announced once, however often it waits
            nonlocal waited
            if not waited:
                self.on_wait()
                waited = True

        while True:
            try:
                fcntl.flock(fd, operation | fcntl.LOCK_NB)
            except BlockingIOError:
                waiting()
                if _RANK[kind] == 0:
                    fcntl.flock(fd, operation)  # nobody yields to tuning: no marker
                else:
                    with self._waiting_marker(kind):
                        fcntl.flock(fd, operation)
            if not yields_to or not self.waiters(*yields_to):
                break
            fcntl.flock(fd, fcntl.LOCK_UN)
            waiting()
            time.sleep(YIELD_BACKOFF_S)
        if waited:
            self.on_acquired()

    @contextlib.contextmanager
    def _waiting_marker(self, kind: str) -> Iterator[None]:
        """A file in the waiters' folder while this process waits to hold as ``kind``,
        flocked, so that a dead waiter's marker is known for one (and removed)."""
        self.waiters_dir.mkdir(exist_ok=True)
        # Flocked before it gets its name, so nobody takes it for a dead one's.
        name = f"{os.getpid()}-{threading.get_ident()}"
        marker = self.waiters_dir / f"{name}.{kind}"
        unnamed = self.waiters_dir / f"{name}.new"
        marker_fd = os.open(unnamed, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(marker_fd, fcntl.LOCK_EX)
            os.rename(unnamed, marker)
            yield
        finally:
            with contextlib.suppress(FileNotFoundError):
                marker.unlink()
            os.close(marker_fd)

    def waiters(self, *kinds: str) -> int:
        """Processes waiting now to hold as one of ``kinds``; markers of dead waiters
        are removed."""
        live = 0
        if not self.waiters_dir.is_dir():
            return 0
        for marker in self.waiters_dir.iterdir():
            if marker.suffix[1:] not in kinds:
                continue
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
            with lock.held(TUNING):
                return _original(self, *args, **kwargs)

        guarded._zoo_guarded = True
        cls.benchmark_gpu = guarded
