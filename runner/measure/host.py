"""The host a cell runs on: which cores its threads run on, and a process's tie to its
parent. Used by the schedule (workers, the GPU lock) and by the processes a backend
starts (XLA's eager baseline); imports nothing heavy."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable

# The run's temporary folder (runner.schedule.workdir), for what a worker's cells write
# (cold compile caches): it goes with the folder, even when a killed worker cannot
# remove its own.
SCRATCH_DIR_ENV = "ZOO_SCRATCH_DIR"


def die_with_parent() -> None:
    """Have the kernel kill this process when its parent dies (Linux). A worker may be
    stopped (``--quiet-timing``) when zoo-run dies, and then nobody would continue it;
    SIGKILL is the one signal a stopped process does not wait for."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # not Linux: a parent that dies leaves its workers to end on stdin's EOF


def move_threads(cpus: Iterable[int] | None) -> None:
    """Every thread of this process onto ``cpus`` (Linux sets affinity per thread)."""
    if not cpus:
        return
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(int(tid), cpus)


def parse_cpus(text: str | None) -> frozenset[int] | None:
    """``"0,1,5"`` -> {0, 1, 5}, and Linux's ranges, ``"0-2,8"`` -> {0, 1, 2, 8}; empty
    or None -> None."""
    if not text:
        return None
    cpus: set[int] = set()
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return frozenset(cpus)


def format_cpus(cpus: Iterable[int]) -> str:
    return ",".join(str(cpu) for cpu in sorted(cpus))
