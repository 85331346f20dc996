"""What bounds a sweep: how busy its cores were, and how long each GPU's lock was held.

A parallel sweep is limited by one of two things: the cores (building and compiling cells
is CPU work) or the GPU lock (each cell's timing, and autotuning, has its GPU alone;
untimed GPU work shares it only with untimed work).
Each worker appends the lock holds it made to a log of its own (``HoldLog``); the
executor sums them per GPU and reads the cores' busy time from ``/proc/stat`` over the
run (``CpuMeter``). ``Usage.bound`` says which of the two was saturated, if either.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from runner.matrix.holds import TIMING, TUNING, UNTIMED

# A resource held or busy this share of the time is the bound: more workers would queue.
SATURATED = 0.85
# Workers that spent this share of their cells' time waiting for a GPU lock were held
# back by it, even where the lock's held share reads lower (a short run's start, when
# every worker compiles and none times, and its tail, when few cells are left, dilute
# it: on one H200, 12 workers waited 47% of their time while the lock read 72% held).
WAITED = 0.25
# Runs where this share of the cells waited for room in a GPU's memory were bound by it.
MEMORY_WAITED = 0.1
HOLDS_GLOB = "holds-*.log"


class HoldLog:
    """Appends one line per stretch a process held a lock in one mode (an outermost hold,
    or its part before, during or after a conversion): ``KEY KIND START END`` (wall-clock
    s)."""

    def __init__(self, path: Path):
        self.path = path

    def record(self, key: str, kind: str, start: float, end: float) -> None:
        line = f"{key} {kind} {start:.3f} {end:.3f}\n"
        # One small O_APPEND write: whole lines even if the process dies right after.
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def each_hold(directory: Path) -> Iterator[tuple[str, str, str, float, float]]:
    """Every hold logged in ``directory``: (process, key, kind, start, end), the process
    named by its log (``holds-<name>.log``); lines cut by a kill mid-write are skipped."""
    for path in sorted(directory.glob(HOLDS_GLOB)):
        name = path.stem.removeprefix("holds-")
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 4:
                key, kind, start, end = parts
                yield name, key, kind, float(start), float(end)


def read_holds(directory: Path, since: float = 0.0) -> dict[str, dict[str, float]]:
    """Seconds each lock was held, per key and kind ("timing", "tuning", "untimed"), from
    every hold log in ``directory``, counting from ``since`` (wall clock: time.time()).
    Untimed holds are shared and overlap: a kind's seconds are those during which at
    least one hold of it was on (exclusive holds never overlap, so for them this is
    their sum)."""
    spans: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for _, key, kind, start, finish in each_hold(directory):
        begin = max(start, since)
        if finish > begin:
            spans.setdefault(key, {}).setdefault(kind, []).append((begin, finish))
    return {
        key: {kind: covered_s(intervals) for kind, intervals in kinds.items()}
        for key, kinds in spans.items()
    }


def covered_s(intervals: list[tuple[float, float]]) -> float:
    """Seconds covered by the union of ``intervals``."""
    covered = 0.0
    reached = float("-inf")
    for start, end in sorted(intervals):
        if end > reached:
            covered += end - max(start, reached)
            reached = end
    return covered


def _cpu_times(cpus: frozenset[int]) -> tuple[float, float, float] | None:
    """(busy, steal, total) jiffies summed over ``cpus``; None without /proc/stat."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return None
    busy = steal = total = 0.0
    for line in lines:
        name, *values = line.split()
        if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cpus:
            continue
        # user nice system idle iowait irq softirq steal (guest time is inside user)
        ticks = [float(v) for v in values[:8]]
        ticks += [0.0] * (8 - len(ticks))
        idle = ticks[3] + ticks[4]
        total += sum(ticks)
        steal += ticks[7]
        busy += sum(ticks) - idle - ticks[7]
    return busy, steal, total


class CpuMeter:
    """How busy this process's cores (its affinity) were since the meter started; it also
    marks the start of a run (monotonic and wall clock)."""

    def __init__(self):
        self.cpus = frozenset(os.sched_getaffinity(0))
        self.started = time.monotonic()
        self.started_wall = time.time()
        self._start = _cpu_times(self.cpus)

    def read(self) -> tuple[float | None, float | None]:
        """(busy, steal): shares of the cores' time since the start; steal is the time a
        hypervisor ran something else on them (a virtual machine's neighbours)."""
        end = _cpu_times(self.cpus)
        if self._start is None or end is None or end[2] <= self._start[2]:
            return None, None
        busy, steal, total = (e - s for e, s in zip(end, self._start, strict=True))
        return busy / total, steal / total


# What a run bound by a GPU lock was bound by, after the kind of hold that filled the most
# of it: an H100 run of max-autotune cells held its lock 93% of the time, 89% of it for
# tuning, and "timing-bound" sent the reader to the wrong work.
_LOCK_BOUND = {
    TIMING: "timing-bound (the lock of {key})",
    TUNING: "tuning-bound (the lock of {key}, held for autotuning: Inductor's kernel "
    "benchmarks, XLA's compiles)",
    UNTIMED: "bound by untimed GPU work (the lock of {key}: references, warm-ups, "
    "peak-memory passes)",
}


@dataclass
class Usage:
    """One run's use of its cores and GPU locks."""

    elapsed_s: float
    workers: int
    cells: int
    cpus: int
    cpu_busy: float | None
    cpu_steal: float | None
    lock_held_s: dict[str, dict[str, float]] = field(default_factory=dict)
    # The share of the workers' time with a cell spent waiting for a GPU lock.
    lock_wait: float | None = None
    # Cells passed over for a while for want of GPU memory (runner.schedule.memory).
    memory_waits: int = 0
    # Cells started in room kept for one waiting for memory, which the cells under way
    # expected to end first would free (``MemoryBudget.kept_room``).
    backfilled: int = 0

    def lock_busy(self, key: str) -> float:
        """The share of the run during which the lock of ``key`` was held in some mode:
        a process waiting to time would have waited (exclusive and shared holds never
        overlap, so the kinds add up)."""
        return (
            sum(self.lock_held_s.get(key, {}).values()) / self.elapsed_s if self.elapsed_s else 0.0
        )

    def bound(self) -> str:
        """Which resource limited the run, in words, with what would make it faster; empty
        for one worker or no more cells than workers (nothing ran beside anything)."""
        if self.workers <= 1 or self.cells <= self.workers:
            return ""
        busiest = max(self.lock_held_s, key=self.lock_busy, default=None)
        waited = (self.lock_wait or 0.0) >= WAITED
        if self.memory_waits and self.memory_waits >= MEMORY_WAITED * self.cells:
            # Cells held back for memory and workers queued on the lock can both be so
            # (an 80 GiB card's chunk of large models): fitting more cells in would only
            # queue them for the lock, so the run says both.
            also = (
                f"; the workers also waited {self.lock_wait:.0%} of their time for the lock "
                f"of {_short(busiest)}"
                if waited and busiest is not None
                else ""
            )
            return (
                f"memory-bound: {self.memory_waits} cell(s) waited for room in a GPU's "
                f"memory{also}; more workers would not help"
            )
        if busiest is not None and (self.lock_busy(busiest) >= SATURATED or waited):
            kinds = self.lock_held_s[busiest]
            kind = max(kinds, key=kinds.get)
            # The kind is read from the hold logs: a value of the template, never part of it.
            what = _LOCK_BOUND.get(kind, "{kind}-bound (the lock of {key})")
            return f"{what.format(key=_short(busiest), kind=kind)}: more workers would wait for it"
        if self.cpu_busy is not None and self.cpu_busy >= SATURATED:
            return "CPU-bound: more workers would not help, more cores would"
        return "neither the cores nor a GPU lock was saturated: more --workers may go faster"

    def line(self) -> str:
        parts = []
        if self.cpu_busy is not None:
            steal = f", steal {self.cpu_steal:.0%}" if (self.cpu_steal or 0) >= 0.01 else ""
            parts.append(f"{self.cpus} cores {self.cpu_busy:.0%} busy{steal}")
        for key, kinds in sorted(self.lock_held_s.items()):
            detail = ", ".join(
                f"{kind} {s / self.elapsed_s:.0%}" for kind, s in sorted(kinds.items())
            )
            parts.append(f"lock of {_short(key)} held {self.lock_busy(key):.0%} ({detail})")
        if self.lock_wait is not None and self.workers > 1:
            parts.append(f"workers waited {self.lock_wait:.0%} of their time for a lock")
        if self.backfilled:
            parts.append(f"{self.backfilled} cell(s) backfilled beside one waiting for memory")
        return " · ".join(parts)

    def summary(self) -> str:
        """``line()`` and, where there is one, ``bound()``."""
        return " · ".join(part for part in (self.line(), self.bound()) if part)

    def to_dict(self) -> dict:
        """The fields, and each lock's held share (for readers of the JSON)."""
        return {
            "elapsed_s": self.elapsed_s,
            "workers": self.workers,
            "cells": self.cells,
            "cpus": self.cpus,
            "cpu_busy": self.cpu_busy,
            "cpu_steal": self.cpu_steal,
            "lock_held_s": self.lock_held_s,
            "lock_wait": self.lock_wait,
            "lock_busy": {key: self.lock_busy(key) for key in self.lock_held_s},
            "memory_waits": self.memory_waits,
            "backfilled": self.backfilled,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Usage:
        fields = ("elapsed_s", "workers", "cells", "cpus", "cpu_busy", "cpu_steal", "lock_held_s")
        return cls(
            **{name: data[name] for name in fields},
            lock_wait=data.get("lock_wait"),
            memory_waits=data.get("memory_waits", 0),
            backfilled=data.get("backfilled", 0),
        )


def measure(
    directory: Path,
    meter: CpuMeter,
    workers: int,
    cells: int,
    lock_wait: float | None = None,
    memory_waits: int = 0,
    backfilled: int = 0,
) -> Usage:
    """The usage of the run that started with ``meter`` and ends now; its workers' hold
    logs are in ``directory``; ``lock_wait``: the share of the workers' time with a cell
    spent waiting for a GPU lock; ``memory_waits``: cells that waited for GPU memory;
    ``backfilled``: cells started in room kept for one of them."""
    busy, steal = meter.read()
    return Usage(
        elapsed_s=time.monotonic() - meter.started,
        workers=workers,
        cells=cells,
        cpus=len(meter.cpus),
        cpu_busy=busy,
        cpu_steal=steal,
        lock_held_s=read_holds(directory, since=meter.started_wall),
        lock_wait=lock_wait,
        memory_waits=memory_waits,
        backfilled=backfilled,
    )


def _short(key: str) -> str:
    """``GPU-49f7ca10-d16d-...`` -> ``GPU-49f7ca10``; ``cpu`` -> ``the host``."""
    if key == "cpu":
        return "the host"
    return key[:12]
