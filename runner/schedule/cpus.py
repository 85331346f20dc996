"""Where a worker's threads run: cores kept for timing, and CPU priorities.

A worker compiles on its main thread (Dynamo, AOTAutograd, Inductor's Python) and in
helper processes (Inductor's compile workers, which build Triton kernels). While one
worker holds the GPU lock its main thread launches kernels from Python, one at a time:
Inductor's autotuning and the timed calls are bound by that thread's speed, and the
rest of the sweep waits for the lock. So every worker lowers its helper processes to
``HELPER_NICE``: beside a lock holder at the default priority they take the cores it
leaves (the kernel's fair scheduler gives nice 0 about nine times the share of nice 10).
The eager-baseline process of an XLA cell times eager calls, so it keeps its priority.

Raising niceness needs no privilege; lowering it again would, so the main threads are
never lowered. Where the privilege is there (root, or CAP_SYS_NICE, as on the GPU
machine), the thread that holds a GPU's lock goes further up, to ``HOLDER_NICE``, for
the hold (``Boost``): a holder's launching thread that starves for a core beside
workers building models times both launch-bound sides slow, while a CUDA graph replay
beside it does not slow down (docs/PERFORMANCE.md, "third round").

``split_cpus`` keeps cores free of compiling workers for the timing of each GPU
(``--timing-cpus``).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from runner.backends.xla.eager_baseline import MODULE as XLA_EAGER_BASELINE
from runner.measure.host import parse_cpus

# Inductor's variable for its compile threads (torch._inductor.config's
# decide_compile_threads, which also sizes max-autotune's precompiling), and the value
# of zoo-run's --compile-threads that shares the compiling cores out among the workers.
COMPILE_THREADS_ENV = "TORCHINDUCTOR_COMPILE_THREADS"
AUTO_THREADS = "auto"

HELPER_NICE = 10
HOLDER_NICE = -10
# Descendants whose command line contains one of these keep their priority: they time.
TIMING_HELPERS = (XLA_EAGER_BASELINE,)
CHECK_EVERY_S = 1.0

_PROC = Path("/proc")


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux's per-thread ``children`` files, else a scan
    of every process's parent)."""
    tasks = _PROC / str(pid) / "task"
    try:
        files = [task / "children" for task in tasks.iterdir()]
    except (FileNotFoundError, ProcessLookupError):
        return []
    found: list[int] = []
    for file in files:
        try:
            found += [int(child) for child in file.read_text().split()]
        except FileNotFoundError:
            if not file.parent.exists():
                continue  # that thread ended
            return _children_by_scan(pid)  # a kernel without the children files
    return found


def _children_by_scan(pid: int) -> list[int]:
    found = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            # The command name (in parentheses) may hold spaces: the fields follow it.
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _cmdline(pid: int) -> str:
    try:
        return (_PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def helpers(pid: int, keep: Iterable[str] = TIMING_HELPERS) -> list[int]:
    """Every descendant of ``pid`` but those whose command line contains one of ``keep``
    (and their own descendants)."""
    keep = tuple(keep)
    found: list[int] = []
    stack = children(pid)
    while stack:
        child = stack.pop()
        if any(mark in _cmdline(child) for mark in keep):
            continue
        found.append(child)
        stack += children(child)
    return found


def lower(pids: Iterable[int], nice: int = HELPER_NICE) -> int:
    """Every thread of ``pids`` to niceness ``nice`` at least (Linux sets it per thread);
    the number of threads changed. Threads that end meanwhile are skipped."""
    changed = 0
    for pid in pids:
        try:
            tids = [int(tid) for tid in os.listdir(_PROC / str(pid) / "task")]
        except OSError:
            continue
        for tid in tids:
            with contextlib.suppress(OSError):
                if os.getpriority(os.PRIO_PROCESS, tid) < nice:
                    os.setpriority(os.PRIO_PROCESS, tid, nice)
                    changed += 1
    return changed


def keep_helpers_low(
    busy: Callable[[], bool] = lambda: False,
    nice: int = HELPER_NICE,
    every_s: float = CHECK_EVERY_S,
) -> threading.Event:
    """Start a daemon thread that lowers this process's helpers every ``every_s``
    seconds (they start and end as Inductor needs them); it skips a round while
    ``busy()`` (this process holds the GPU lock: its timed calls should not share the
    interpreter with it). Set the returned event to stop it."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every_s):
            if not busy():
                lower(helpers(os.getpid()), nice)

    threading.Thread(target=loop, name="zoo-helper-priority", daemon=True).start()
    return stop


class Boost:
    """Raise the calling thread to ``nice`` while it holds a lock, where permitted: the
    first refusal turns it off for good (no privilege; nothing else changes)."""

    def __init__(self, nice: int = HOLDER_NICE):
        self.nice = nice
        self.permitted = True
        self._saved: int | None = None

    def raise_(self) -> None:
        if not self.permitted:
            return
        saved = os.getpriority(os.PRIO_PROCESS, 0)  # Linux: the calling thread
        if saved <= self.nice:
            return
        try:
            os.setpriority(os.PRIO_PROCESS, 0, self.nice)
        except PermissionError:
            self.permitted = False
            print(
                "zoo-matrix: the GPU lock's holder keeps its CPU priority (raising it needs "
                "root or CAP_SYS_NICE): timings beside compiling workers may read slow",
                file=sys.stderr,
            )
            return
        self._saved = saved

    def restore(self) -> None:
        """The calling thread, and any thread started from it meanwhile (they inherited
        the raised priority), back to where the thread was."""
        if self._saved is None:
            return
        saved, self._saved = self._saved, None
        lower([os.getpid()], saved)


def split_cpus(
    available: Iterable[int],
    gpus: int,
    per_gpu: int,
    siblings: Callable[[int], frozenset[int]] | None = None,
) -> tuple[list[frozenset[int]], frozenset[int]]:
    """``per_gpu`` cores reserved for the timing of each GPU (the highest-numbered ones)
    and the rest, where workers compile. At least one core is always left to compile.

    Whole physical cores: a CPU's SMT siblings (``siblings(cpu)``, by default what
    Linux says, ``thread_siblings_list``) are reserved with it, so that a timing thread
    never shares a core's pipelines and caches with a compile beside it; on a machine
    with two threads a core, ``per_gpu`` 1 and 2 both reserve one core's two CPUs."""
    usable = frozenset(available)
    cores = sorted(usable)
    siblings = siblings or thread_siblings
    # The physical cores of ``cores``, each the set of its available CPUs, in order.
    groups: list[frozenset[int]] = []
    for cpu in cores:
        group = (siblings(cpu) & usable) | {cpu}
        if group not in groups:
            groups.append(group)
    groups.sort(key=min)
    timing: list[frozenset[int]] = []
    left = list(groups)
    for _ in range(gpus):
        taken: set[int] = set()
        while left and len(taken) < per_gpu:
            taken |= left.pop()
        timing.append(frozenset(taken))
    compiling = frozenset(cpu for group in left for cpu in group)
    if per_gpu < 0 or not compiling or any(len(cpus) < per_gpu for cpus in timing):
        raise ValueError(
            f"cannot reserve {per_gpu} core(s) for each of {gpus} GPU(s) out of "
            f"{len(cores)}: at least one must be left for compiling"
        )
    # The first GPU gets the lowest of the reserved cores, as it gets the first slot.
    return timing[::-1], compiling


def thread_siblings(cpu: int) -> frozenset[int]:
    """The CPUs that share ``cpu``'s physical core, itself included (Linux sysfs; just
    itself where that is not readable)."""
    path = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
    try:
        text = path.read_text().strip()
    except OSError:
        return frozenset({cpu})
    return (parse_cpus(text) or frozenset()) | {cpu}


def default_workers(device: str, env: Mapping[str, Any]) -> int:
    """On CUDA, as many workers as half the cores (compiling is CPU-bound) and one per
    ~16 GiB of GPU memory allow, at most 8 per GPU; on CPU one, as timing shares the
    cores that compile."""
    if device != "cuda":
        return 1
    gpus = max(1, int(env.get("gpu_count") or 1))
    memory_gb = float(env.get("gpu_memory_gb") or 16.0)
    by_cores = max(1, (os.cpu_count() or 2) // 2)
    by_memory = max(1, int(memory_gb // 16)) * gpus
    return max(1, min(by_cores, by_memory, 8 * gpus))
