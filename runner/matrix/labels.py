"""Labels a reader needs beside a cell's numbers, each one rule written once: read by
the dashboard (badges, filters), zoo-compare and the benchmarks.

- disturbed: a side's median sits far above its fastest sample, so something else ran
  while it was timed (a neighbour, the host's own drift);
- launch-bound: the eager side's wall time, even at its fastest sample, is well above the
  time its kernels kept the GPU busy, so its latency is the host's Python and launch
  speed, which drifts with the host: compare such cells by their GPU-time speedup (the
  wall-clock one is what a user gets, launches saved included).
"""

from __future__ import annotations

# A side whose median is this many times its fastest sample was disturbed while timed
# (about 1.01 on a quiet GPU).
DISTURBED_RATIO = 1.2
# The fastest eager sample over eager GPU busy time from this ratio on: launch-bound. On
# the H200 (138 timm inductor cells, docs/PERFORMANCE.md "GPU time") the ratio of GPU-bound
# cells sits at 0.95-1.15 (the profiled call's own noise), p90 1.27, and a tail of
# launch-bound models reaches 3.9; at 1.5 the label held for 4 of the 6 cells it named
# in one call when the same cells ran again.
LAUNCH_BOUND_RATIO = 1.5


def disturbance(median_ms: float | None, fastest_ms: float | None) -> float | None:
    """How far a side's median sits above its fastest sample (1.0: not at all)."""
    if median_ms is None or not fastest_ms:
        return None
    return median_ms / fastest_ms


def is_disturbed(median_ms: float | None, fastest_ms: float | None) -> bool:
    ratio = disturbance(median_ms, fastest_ms)
    return ratio is not None and ratio >= DISTURBED_RATIO


def launch_bound_sql(wall_ms: str, gpu_ms: str) -> str:
    """``is_launch_bound`` as an SQL condition on the expressions ``wall_ms`` (the eager
    side's fastest call) and ``gpu_ms`` (its GPU busy time); NULL without a profile."""
    return f"{wall_ms} / nullif({gpu_ms}, 0) >= {LAUNCH_BOUND_RATIO}"


def launch_ratio(wall_ms: float | None, gpu_ms: float | None) -> float | None:
    """Wall time over GPU busy time of one side (None without a GPU profile)."""
    if wall_ms is None or not gpu_ms:
        return None
    return wall_ms / gpu_ms


def is_launch_bound(eager_ms: float | None, eager_gpu_ms: float | None) -> bool | None:
    """Whether a cell is launch-bound, by its fastest eager sample (``eager_ms``; the
    median where samples are not kept) and its eager GPU busy time; None where it cannot
    be told (no GPU profile)."""
    ratio = launch_ratio(eager_ms, eager_gpu_ms)
    return None if ratio is None else ratio >= LAUNCH_BOUND_RATIO
