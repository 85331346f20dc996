"""How a cell times its two sides: warm-ups first, then eager and compiled calls
interleaved (call by call in one process, block by block across two), medians and
quartiles kept with the raw samples."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from runner.matrix.labels import disturbance

if TYPE_CHECKING:
    from runner.matrix.results import CellResult

# Warm-up pairs (eager, compiled) before timing: at least WARMUPS, and more until
# WARMUP_S has passed, so that GPU clocks and allocator caches settle first. They run as
# untimed GPU work (a shared hold of the GPU's lock, beside other untimed work); the
# timed hold then starts with HELD_WARMUPS pairs more, untimed, which run with the GPU
# alone before the first timed one.
WARMUPS = 3
WARMUP_S = 0.5
HELD_WARMUPS = 2
# Untimed calls at the start of each block when two processes alternate blocks: the
# first calls after the other process had the GPU run slow (measured on the H200: the
# first of 5 up to 1.3-2x the block's last, eager and XLA alike).
REWARM_CALLS = 3

# The launch canary: the host's time per call of one tiny operator on the cell's device
# (an in-place add on a one-element tensor: Python, the dispatcher and, on the GPU, one
# kernel launch, whose few microseconds of GPU work run behind the launches), the fastest
# of CANARY_ROUNDS rounds of CANARY_CALLS calls. A host slowed through a whole timing (by
# its neighbours, or by its own drift) leaves no spread between samples for
# ``timing_disturbance`` to see, but slows every launch, and with them the wall time of
# each launch-bound side. Read before every CANARY_EVERY-th timed pair and after the
# last, so that the readings are the timed calls' host: on the H100 machine a host that
# had just waited idle (for the GPU's lock, a long call) read up to 1.5x slower than
# one kept busy (docs/PERFORMANCE.md, "The host while a cell is timed").
CANARY_CALLS = 200
CANARY_ROUNDS = 3
CANARY_EVERY = 10

Timer = Callable[[Callable[[], Any]], float]


@dataclass(frozen=True)
class TimingPlan:
    """How many interleaved eager/compiled pairs to time: at least ``min_pairs``, then
    more until ``budget_s`` has passed, never more than ``max_pairs``."""

    min_pairs: int
    max_pairs: int
    budget_s: float

    def wants_more(self, taken: int, started: float) -> bool:
        """Whether to time another pair, ``taken`` pairs since ``started``
        (``time.perf_counter()``)."""
        return taken < self.max_pairs and (
            taken < self.min_pairs or time.perf_counter() - started < self.budget_s
        )


TIMING_PLANS = {"cuda": TimingPlan(10, 200, 2.0), "cpu": TimingPlan(5, 200, 1.0)}


def plan_for(device_type: str, seconds: float | None = None) -> TimingPlan:
    """The protocol's plan on ``device_type``; with ``seconds`` (``zoo-run --timing-s``),
    a window that long, its cap on pairs scaled alike (a quarter of the window, a quarter
    of the pairs a fast cell takes), never under the minimum."""
    plan = TIMING_PLANS["cuda" if device_type == "cuda" else "cpu"]
    if seconds is None or seconds == plan.budget_s:
        return plan
    cap = max(plan.min_pairs, round(plan.max_pairs * seconds / plan.budget_s))
    return TimingPlan(plan.min_pairs, cap, seconds)


def window_note(device_type: str, seconds: float | None) -> str | None:
    """What a row timed in a window other than the protocol's says; None for the
    protocol's."""
    protocol = plan_for(device_type)
    if plan_for(device_type, seconds) == protocol:
        return None
    return (
        f"timed in a {seconds:g} s window (zoo-run --timing-s), "
        f"not the protocol's {protocol.budget_s:g} s"
    )


def warm_up(call: Callable[[], Any], calls: int = WARMUPS, seconds: float = WARMUP_S) -> None:
    """At least ``calls`` calls, and more until ``seconds`` have passed: GPU clocks and
    allocator caches settle first."""
    done, started = 0, time.perf_counter()
    while done < calls or time.perf_counter() - started < seconds:
        call()
        done += 1


def repeat(sample: Callable[[], Any], plan: TimingPlan) -> list[Any]:
    """``sample()`` at least ``plan.min_pairs`` times, then until ``plan.budget_s`` has
    passed, at most ``plan.max_pairs`` times. Sampling eager and compiled together, in
    alternation, lets clock drift hit both alike."""
    samples: list[Any] = []
    started = time.perf_counter()
    while plan.wants_more(len(samples), started):
        samples.append(sample())
    return samples


def alternate_blocks(
    first: Callable[[int], list[float]],
    second: Callable[[int], list[float]],
    plan: TimingPlan,
    block: int,
) -> tuple[list[float], list[float]]:
    """Samples of two sides timed in alternating blocks of ``block`` calls (for sides that
    cannot alternate call by call, such as two processes): as many pairs as ``plan``
    says, counted in calls."""
    firsts: list[float] = []
    seconds: list[float] = []
    started = time.perf_counter()
    while plan.wants_more(len(firsts), started):
        count = min(block, plan.max_pairs - len(firsts))
        firsts += first(count)
        seconds += second(count)
    return firsts, seconds


def timed_block(call: Callable[[], Any], timer: Timer, count: int) -> list[float]:
    """One block of an alternation between two processes, on either side:
    ``REWARM_CALLS`` untimed calls, then ``count`` timed ones."""
    for _ in range(REWARM_CALLS):
        call()
    return [timer(call) for _ in range(count)]


def cuda_event_ms(fn: Callable[[], Any]) -> float:
    """One call timed by CUDA events on the current stream, in ms."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def perf_counter_ms(fn: Callable[[], Any]) -> float:
    """One call timed by the host clock, in ms (CPU calls are synchronous)."""
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def synced_timer(sync: Callable[[], None]) -> Timer:
    """The host clock around each call, ``sync()`` before it stops: for work on streams
    CUDA events do not see (JAX's)."""

    def synced_ms(fn: Callable[[], Any]) -> float:
        start = time.perf_counter()
        fn()
        sync()
        return (time.perf_counter() - start) * 1000

    return synced_ms


def event_timer(device_type: str) -> Timer:
    """How one call is timed on a device: CUDA events, else the host clock."""
    return cuda_event_ms if device_type == "cuda" else perf_counter_ms


def launch_canary_us(device: torch.device) -> float:
    """The host's time per call of a tiny operator on ``device``, in microseconds: the
    fastest of ``CANARY_ROUNDS`` rounds (a round's first calls warm the rest)."""
    tensor = torch.zeros(1, device=device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    fastest = math.inf
    for _ in range(CANARY_ROUNDS):
        sync()
        start = time.perf_counter()
        for _ in range(CANARY_CALLS):
            tensor.add_(1)
        fastest = min(fastest, time.perf_counter() - start)
    sync()
    return fastest / CANARY_CALLS * 1e6


class HostCanary:
    """Readings of the launch canary through a cell's timed calls: ``tick()`` before each
    timed pair (or block) reads it every ``every``-th time, ``record(result)`` reads it
    once more and keeps their median in ``result.host_launch_us``."""

    def __init__(self, device: torch.device, every: int = CANARY_EVERY) -> None:
        self.device = device
        self.every = every
        self.ticks = 0
        self.readings: list[float] = []

    def tick(self) -> None:
        if self.ticks % self.every == 0:
            self.readings.append(launch_canary_us(self.device))
        self.ticks += 1

    def record(self, result: CellResult) -> None:
        self.readings.append(launch_canary_us(self.device))
        result.host_launch_us = round(statistics.median(self.readings), 3)


def quartiles(samples: list[float]) -> tuple[float, float, float]:
    p25, median, p75 = statistics.quantiles(samples, n=4, method="inclusive")
    return p25, median, p75


def record_timing(result: CellResult, eager: list[float], compiled: list[float]) -> None:
    """Both sides' samples, quartiles and the speedup (median eager / median compiled)."""
    result.eager_ms_p25, result.eager_ms, result.eager_ms_p75 = quartiles(eager)
    result.compiled_ms_p25, result.compiled_ms, result.compiled_ms_p75 = quartiles(compiled)
    result.eager_samples_ms = eager
    result.compiled_samples_ms = compiled
    result.speedup = result.eager_ms / result.compiled_ms if result.compiled_ms else None
    sides = [
        disturbance(median, min(samples) if samples else None)
        for median, samples in ((result.eager_ms, eager), (result.compiled_ms, compiled))
    ]
    known = [ratio for ratio in sides if ratio is not None]
    result.timing_disturbance = max(known) if known else None
