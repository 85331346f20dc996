"""One lock per GPU, held while a worker runs kernels whose time is measured.

Compiling is CPU-bound and may overlap; timing needs the GPU alone. Workers on one
host share a lock file per GPU, keyed by the GPU's UUID (two workers pinned to one GPU
share one lock), and ``flock`` releases it when a holder dies, so a crashed worker can
never wedge the sweep. The lock is re-entrant within a process: Inductor's kernel
benchmarking during max-autotune takes it too, possibly while it is already held.

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
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

DEFAULT_LOCK_DIR = Path(tempfile.gettempdir()) / "zoo-matrix-locks"
WAITING_PHASE = "waiting for the GPU"


class GpuLock:
    """A re-entrant, cross-process exclusive lock for one GPU (or one CPU host)."""

    def __init__(
        self,
        key: str,
        lock_dir: Path = DEFAULT_LOCK_DIR,
        on_wait: Callable[[], None] = lambda: None,
        on_acquired: Callable[[], None] = lambda: None,
        timing_cpus: frozenset[int] | None = None,
    ):
        """``on_wait`` runs when another process holds the lock and this one starts to
        wait; ``on_acquired`` when it then gets it (the parent pauses the cell's clock
        in between: waiting for the GPU is not the cell's time)."""
        self.key = key
        self.on_wait = on_wait
        self.on_acquired = on_acquired
        self.timing_cpus = timing_cpus
        self._saved_cpus: set[int] | None = None
        lock_dir.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", key)
        self.path = lock_dir / f"{safe}.lock"
        self._fd: int | None = None
        self._depth = 0
        self._mutex = threading.RLock()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Hold the lock for the block."""
        with self._mutex:
            if self._depth == 0:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    self.on_wait()
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    self.on_acquired()
                self._fd = fd
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
                        os.sched_setaffinity(0, self._saved_cpus)
                        self._saved_cpus = None
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
                    os.close(self._fd)
                    self._fd = None


def guard_inductor_benchmarking(lock: GpuLock) -> None:
    """Make Inductor's kernel benchmarking (max-autotune, Triton autotuning) hold ``lock``:
    its choices come from timings, which neighbours would skew like ours."""
    from torch._inductor.runtime import benchmarking

    for cls in vars(benchmarking).values():
        method = isinstance(cls, type) and cls.__dict__.get("benchmark_gpu")
        if not method or getattr(method, "_zoo_guarded", False):
            continue

        def guarded(self, *args, _original=method, **kwargs):
            with lock.held():
                return _original(self, *args, **kwargs)

        guarded._zoo_guarded = True
        cls.benchmark_gpu = guarded


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
