"""What one call does on the device: its GPU busy time and the kernels it runs, from
one profiled call (``torch.profiler``, CUPTI underneath).

Wall-clock latency of a launch-bound model is the host's Python and launch speed, which
drifts with the host; the time its kernels keep the GPU busy does not. So every cell
profiles one call of each side after timing them, inside the timed hold (a neighbour's
kernels would lengthen its own), and records busy time, kernel count and the host's
share of the wall time beside the wall-clock medians.

On the CPU there are no kernels: a profile counts the operators the call ran at the top
level, and the GPU fields stay empty.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch.profiler import ProfilerActivity, profile

if TYPE_CHECKING:
    from runner.matrix.results import CellResult

# Device activities that are not kernels: counted in busy time, not as kernels.
_NOT_KERNELS = ("Memcpy", "Memset")


@dataclass(frozen=True)
class CallProfile:
    """One profiled call: GPU busy time (None off the GPU), kernels run on the GPU (or,
    on the CPU, top-level operators called), and what profiling it cost (wall s)."""

    gpu_ms: float | None
    kernels: int | None
    cost_s: float


def profile_call(call: Callable[[], Any], sync: Callable[[], None], on_cuda: bool) -> CallProfile:
    """Profile one call of ``call`` (warm: it ran before); ``sync`` waits for the device."""
    started = time.perf_counter()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
    sync()
    with profile(activities=activities) as prof:
        call()
        sync()
    if on_cuda:
        intervals = []
        kernels = 0
        for event in prof.profiler.kineto_results.events():
            if event.device_type() != torch.autograd.DeviceType.CUDA:
                continue
            intervals.append((event.start_ns(), event.end_ns()))
            kernels += not event.name().startswith(_NOT_KERNELS)
        gpu_ms = busy_ns(intervals) / 1e6 if intervals else None
    else:
        gpu_ms = None
        kernels = sum(
            1
            for event in prof.events()
            if event.device_type == torch.autograd.DeviceType.CPU and event.cpu_parent is None
        )
    return CallProfile(gpu_ms, kernels, time.perf_counter() - started)


def busy_ns(intervals: list[tuple[int, int]]) -> int:
    """Nanoseconds covered by the union of ``intervals`` (kernels of several streams may
    overlap; busy time counts the overlap once)."""
    covered = 0
    reached = None
    for start, end in sorted(intervals):
        if reached is None or start > reached:
            covered += end - start
            reached = end
        elif end > reached:
            covered += end - reached
            reached = end
    return covered


def record_profiles(result: CellResult, eager: CallProfile, compiled: CallProfile) -> None:
    """Both sides' profiles into ``result`` (after its timing: the host's share is the
    median wall time minus GPU busy time)."""
    result.eager_gpu_ms, result.compiled_gpu_ms = eager.gpu_ms, compiled.gpu_ms
    result.eager_kernels, result.compiled_kernels = eager.kernels, compiled.kernels
    if eager.gpu_ms and compiled.gpu_ms:
        result.gpu_speedup = eager.gpu_ms / compiled.gpu_ms
    if eager.gpu_ms is not None and result.eager_ms is not None:
        result.eager_host_ms = max(0.0, result.eager_ms - eager.gpu_ms)
    if compiled.gpu_ms is not None and result.compiled_ms is not None:
        result.compiled_host_ms = max(0.0, result.compiled_ms - compiled.gpu_ms)
    result.profile_s = eager.cost_s + compiled.cost_s
