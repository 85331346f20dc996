"""Why a cell's numbers need a second look: each caveat one rule, written once.

A caveat is a condition on a row of the prepared ``cells`` table (``queries.PREPARE``
gives every row the list of its caveats' keys, ``caveats``), a badge for the Matrix and
the Leaderboard, the reason in words for Model detail, and the docs section that
explains it. They qualify a cell's speed (or its precision, or which of its rows is
shown, or whose doing an out-of-memory status was), never change its status: a pass
with a caveat still passed.

- disturbed: a side's median sits far above its fastest sample;
- launch-bound: the eager side's fastest call is well above its GPU busy time;
- XLA baseline: an XLA cell whose eager baseline reads slow (disturbed or
  launch-bound), which inflates its speedup;
- XLA first sweep: an XLA cell timed by the first sweep's protocol (the two sides as
  two blocks, not interleaved), whose speedups are no results;
- ran in fp32: an export or AOTInductor cell recorded under autocast, which
  torch.export drops: the program ran in fp32;
- several environments: the cell was recorded in more than one environment; the
  newest row is shown;
- memory before the pool fix: a CUDA graph cell (reduce-overhead, max-autotune, the
  cudagraphs backend) whose compiled peak was measured without the graphs' pool, which
  reads far too low;
- crowded: the cell, or an earlier attempt of it, ran out of memory while other
  processes (a parallel sweep's neighbours) held most of the GPU's: its `oom`, or the
  smaller batch it ran at, may be theirs, not the model's;
- autotuning reused: a max-autotune cell that compiled with the kernel choices its
  model's other max-autotune cell of the run had tuned, or (``--tuning-pool``) that
  earlier cells of the run had tuned for the same shapes: its compile time leaves that
  tuning out;
- outlasted the run's time limit: a `timeout` stopped at the end of a time-limited run
  (a sweep's chunk) that it could not end within, its own timeout not reached;
- casts reused: an eager-backend cell profiled in one autocast region with eager, whose
  call reused the weight casts eager's had made: its GPU-time speedup reads high;
- reads low: a launch-bound pass timed inside one autocast region, whose eager calls
  skipped their weight casts after the first: its wall-clock speedup reads low.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pandas as pd

from dashboard.text import plain
from runner.backends.registry import ANY_MODE, BACKENDS
from runner.matrix.fingerprint import TORCH_PROCESS, XLA_PROCESS
from runner.matrix.labels import DISTURBED_RATIO, LAUNCH_BOUND_RATIO
from runner.matrix.results import OUTLASTED_RUN

# The labels of the prepared tables' `timing` and `bound` columns.
LAUNCH_BOUND = "launch-bound"
GPU_BOUND = "gpu-bound"
DISTURBED = "disturbed"
STEADY = "steady"

# The backends whose cells run in JAX's process, and the torch routes that cast a bf16
# model rather than run it under autocast: those torch.export makes the program of,
# which keeps none of autocast's casts (runner.backends.registry says why).
XLA_BACKENDS = tuple(name for name, entry in BACKENDS.items() if entry.process == XLA_PROCESS)
EXPORTED_BACKENDS = tuple(
    name
    for name, entry in BACKENDS.items()
    if entry.process == TORCH_PROCESS and entry.treatment == "cast"
)
# What the notes of an XLA cell timed by the first sweep's protocol say (the eager
# baseline timed as one block, then the XLA calls: runner code before 12c6dc0); cells
# since time the two in alternating blocks and say so.
FIRST_SWEEP_XLA_NOTE = "then XLA here: not interleaved"
# What the notes of a cell whose compiled peak counts its CUDA graph pools say (since
# 1e27edd, runner/backends/base.py); older CUDA graph cells counted the allocated peak
# alone, which misses the activations a replay writes into the pool.
GRAPH_POOL_NOTE = "CUDA graph pools hold"
# The (backend, mode) conditions of the cells that replay CUDA graphs, from the registry.
_GRAPH_CONFIGS = " OR ".join(
    f"backend = '{name}'"
    if ANY_MODE in entry.cuda_graphs
    else f"(backend = '{name}' AND split_part(mode, '+', 1) IN "
    f"({', '.join(repr(mode) for mode in entry.cuda_graphs)}))"
    for name, entry in BACKENDS.items()
    if entry.cuda_graphs
)


@dataclass(frozen=True)
class Doc:
    """A section of a document of this checkout: its path and heading."""

    path: str
    heading: str

    @property
    def anchor(self) -> str:
        return slug(self.heading)

    def __str__(self) -> str:
        return f"{self.path} § {self.heading}"


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces
    as hyphens ("fp32: still the first sweep's protocol" -> "fp32-still-the-first-sweeps-protocol")."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


@dataclass(frozen=True)
class Caveat:
    """One caveat: ``when`` is a SQL condition on a row of ``cells`` (its columns by
    name, ``environments`` among them); ``badge`` the few words beside a cell's numbers
    (``short`` where a table column is narrow); ``reason`` the cell's own reason in words
    (Markdown, from its numbers: no stored text), for Model detail; ``meaning`` what the
    caveat says of any cell, for the legends."""

    key: str
    badge: str
    short: str
    when: str
    doc: Doc
    reason: Callable[[Mapping], str]
    meaning: str


def _number(cell: Mapping, column: str, fmt: str) -> str:
    value = cell.get(column)
    return "–" if value is None or pd.isna(value) else fmt.format(value)


def _ratio(cell: Mapping, median: str, fastest: str) -> float | None:
    high, low = cell.get(median), cell.get(fastest)
    if high is None or low is None or pd.isna(high) or pd.isna(low) or low <= 0:
        return None
    return float(high) / float(low)


def _slow_sides(cell: Mapping) -> str:
    """Which side's median sat how far above its fastest sample, in words."""
    sides = [
        f"its {side} median {ratio:.2f}x its fastest sample"
        for side, ratio in (
            ("eager", _ratio(cell, "eager_ms", "eager_fastest_ms")),
            ("compiled", _ratio(cell, "compiled_ms", "compiled_fastest_ms")),
        )
        if ratio is not None and ratio >= DISTURBED_RATIO
    ]
    if sides:
        return " and ".join(sides)
    return (
        f"a median {_number(cell, 'timing_disturbance', '{:.2f}')}x its fastest sample "
        "(the more disturbed side)"
    )


def _launch_ratio(cell: Mapping) -> str:
    fastest = cell.get("eager_fastest_ms")
    if fastest is None or pd.isna(fastest):
        fastest = cell.get("eager_ms")
    ratio = _ratio({"a": fastest, "b": cell.get("eager_gpu_ms")}, "a", "b")
    return "–" if ratio is None else f"{ratio:.2f}"


def _disturbed(cell: Mapping) -> str:
    return (
        f"**Timing disturbed**: {_slow_sides(cell)} (a quiet GPU and host read about "
        f"1.01; {DISTURBED_RATIO:g} or more: something ran beside the timing), so the "
        "speedup may be off by as much. To check, rerun the cell alone "
        "(`--workers 1 --force`)."
    )


def _launch_bound(cell: Mapping) -> str:
    return (
        f"**Launch-bound**: its fastest eager call took {_launch_ratio(cell)}x the time its "
        f"kernels kept the GPU busy ({LAUNCH_BOUND_RATIO:g}x or more): the host's Python "
        "and launch speed set its wall-clock times, and they drift with the host. The "
        f"GPU-time speedup ({_number(cell, 'gpu_speedup', '{:.2f}x')}) is the stable "
        "figure; the wall-clock one is what a user gets."
    )


def _xla_baseline(cell: Mapping) -> str:
    why = (
        f"its eager side is launch-bound (its fastest call {_launch_ratio(cell)}x its GPU "
        "busy time)"
        if cell.get("bound") == LAUNCH_BOUND
        else _slow_sides(cell)
    )
    return (
        f"**XLA baseline unsure**: {why}. The eager baselines of launch-bound models read "
        "slow beside compiling workers, 1.3-1.8x their fastest sample on the H200, and an "
        "XLA cell's speedup is inflated by as much: trust the XLA speedups of GPU-bound "
        "models, and compare the others by latency."
    )


def _xla_first_sweep(cell: Mapping) -> str:
    return (
        "**XLA, first sweep's timing**: its eager baseline was timed as one block and the "
        "XLA calls as another, beside busy workers, not interleaved. Such baselines "
        "differed from an interleaved one by a median 18% (up to 41%): its speedup is no "
        "result. Cells since time the two sides in alternating blocks."
    )


def _ran_in_fp32(cell: Mapping) -> str:
    return (
        f"**Ran in fp32**: recorded as {plain(_number(cell, 'precision', '{}'))} under autocast, "
        "but torch.export keeps none of autocast's casts: the exported program ran in fp32 "
        "against an autocast eager baseline. Its pass or fail holds; its speedup, GPU time "
        "and memory are no results. Cells recorded since 6400ef5 cast the model and inputs "
        "instead."
    )


def _pool_missed(cell: Mapping) -> str:
    return (
        f"**Memory before the CUDA graph fix**: its compiled peak "
        f"({_number(cell, 'compiled_peak_alloc_mb', '{:.0f} MB')}, a ratio of "
        f"{_number(cell, 'memory_ratio', '{:.2f}')}) counts only what was allocated during a "
        "replay. A CUDA graph replays into its private memory pool, which the allocator "
        "counts as free, so the activations were missed: on the H200, resnet50 "
        "reduce-overhead read 0.43 this way and 1.33 with its pool counted. Its speedup "
        "holds; its memory figures are no result. Cells recorded since 1e27edd count the pool."
    )


def _environments(cell: Mapping) -> str:
    return (
        f"**Recorded in {_number(cell, 'environments', '{:.0f}')} environments**: the same "
        "model and config, measured with other versions (torch, triton, CUDA, GPU, timm, "
        "transformers; jax and torchax for XLA), each a cell of its own. The Matrix and the "
        "Leaderboard show the newest row."
    )


def _crowded(cell: Mapping) -> str:
    asked, ran = cell.get("batch_size"), cell.get("batch_size_run")
    if cell.get("status") == "oom":
        what = (
            "this cell ran out of memory while other processes (a parallel sweep's "
            "neighbours) held most of the GPU's, so the `oom` may be theirs, not the "
            "model's. `zoo-run --retry-failed` reruns it alone on the GPU."
        )
    elif ran is not None and asked is not None and not pd.isna(ran) and ran < asked:
        what = (
            f"an attempt at a larger batch ran out beside other processes holding most of "
            f"the GPU's, and it ran at batch {ran:.0f} of the {asked:.0f} asked: its "
            "numbers may be for a smaller batch than the model needs. `zoo-run --force` "
            "with fewer workers measures it at full batch."
        )
    else:  # not a row the caveat is for (``CAVEATS``' condition)
        what = "an earlier attempt ran out beside other processes holding most of the GPU's."
    return f"**Out of memory beside others**: {what}"


def _tuning_reused(cell: Mapping) -> str:
    return (
        "**Autotuning reused**: this cell compiled with kernel choices that another cell "
        "of the same run had tuned: its model's other max-autotune cell, or, in a run "
        "with `--tuning-pool`, earlier cells of any model for the same GEMM, convolution "
        "and kernel shapes (its notes say which, and how many shapes it tuned itself). "
        "Every kernel was still compiled here. Its compile time "
        f"({_number(cell, 'compile_s', '{:.1f} s')}) leaves that autotuning out, so it "
        "reads shorter than a cold compile of this mode. Its speedup and memory hold: its "
        "kernels were chosen from timings of the same shapes on the same GPU. "
        "`ZOO_COLD_TUNING=1` tunes every cell itself."
    )


def _outlasted(cell: Mapping) -> str:
    return (
        "**Outlasted the run's time limit**: this cell was stopped in its phase "
        f"{plain(str(cell.get('error_phase') or '–'))} when the time-limited run it was "
        "part of (a sweep's chunk) ended; its own timeout was not reached. The `timeout` "
        "is the run's length, not the model's: `zoo-run --retry-failed` without "
        "`--time-limit` measures it."
    )


def _casts_reused(cell: Mapping) -> str:
    return (
        "**GPU time with eager's casts reused**: one autocast region held both sides' "
        "profiled calls, and autocast keeps each weight's bf16 cast until its region "
        "exits. So this eager-backend call reused the casts eager's call had just made: it "
        f"launched {_number(cell, 'compiled_kernels', '{:.0f}')} kernels against eager's "
        f"{_number(cell, 'eager_kernels', '{:.0f}')}, and its GPU-time speedup "
        f"({_number(cell, 'gpu_speedup', '{:.2f}x')}) counts casts it did not run. The "
        "eager backend compiles nothing. Its wall-clock speedup holds, because both sides' "
        "timed calls reused the casts alike. Cells recorded since 2026-12-05 enter "
        "autocast per call."
    )


def _reads_low(cell: Mapping) -> str:
    return (
        "**Speedup reads low**: this pass was timed inside one autocast region (recorded "
        "before 2026-12-05), and its eager side is launch-bound. Autocast keeps each "
        "weight's bf16 cast until its region exits, so eager's calls after the first "
        "skipped their casts, launches that a call entering autocast itself makes, while "
        "the compiled program casts in its graph on every call. Measured again per call "
        "on the H200, launch-bound cells' speedups rose a median 1.19x (timm) and 1.28x "
        "(HF); GPU-bound ones moved within noise. Its GPU-time speedup "
        f"({_number(cell, 'gpu_speedup', '{:.2f}x')}) holds. A resumed `zoo-run` "
        "measures it again, launch-bound cells first."
    )


_README_RECORDED = Doc("README.md", "What is recorded")
# Why rows timed inside one autocast region read as they do (the header says too).
AUTOCAST_SCOPE = Doc("docs/PERFORMANCE.md", "Autocast's scope (2026-12-05)")
_XLA_TRUST = Doc("docs/xla-h200.md", "The bf16 XLA speedups, and how far to trust them")
_NOT_XLA = f"backend NOT IN ({', '.join(repr(name) for name in XLA_BACKENDS)})"
_XLA = f"backend IN ({', '.join(repr(name) for name in XLA_BACKENDS)})"
_RAN_IN_FP32 = (
    f"backend IN ({', '.join(repr(name) for name in EXPORTED_BACKENDS)}) "
    "AND precision <> 'fp32' AND coalesce(starts_with(precision_treatment, 'autocast'), false)"
)


def one_region_note(overview: dict) -> str | None:
    """What the header says of the shown passes timed inside one autocast region (None
    where there are none): their speedups read low and their memory high."""
    count, passed = overview["one_region_passes"], overview["passed"]
    if not count:
        return None
    return (
        f"{count:,} of the {passed:,} passes shown were timed inside one autocast region "
        "(recorded before 2026-12-05): eager's calls after the first reused autocast's "
        "weight casts, which a compiled program makes on every call. So their compiled "
        "memory reads high, and launch-bound cells' speedups low: measured again on the "
        "H200, those rose a median 1.19-1.28x, while GPU-bound ones moved within noise; "
        'they carry the caveat "speedup reads low". Their pass or fail stands, and '
        "zoo-run measures them again, launch-bound cells first."
    )


CAVEATS: tuple[Caveat, ...] = (
    Caveat(
        "disturbed", "timing disturbed", "disturbed", f"timing = '{DISTURBED}' AND {_NOT_XLA}",
        _README_RECORDED, _disturbed,
        f"a side's median {DISTURBED_RATIO:g}x its fastest sample or more: something ran "
        "beside the timing, so the speedup is unsure",
    ),
    # Not where the program ran in fp32: its GPU time is no result either.
    Caveat(
        "launch-bound", "launch-bound", "launch-bound",
        f"bound = '{LAUNCH_BOUND}' AND {_NOT_XLA} AND NOT ({_RAN_IN_FP32})",
        Doc("docs/PERFORMANCE.md", "GPU time: speedups a noisy host cannot move (2026-12-01)"),
        _launch_bound,
        f"the eager side's fastest call {LAUNCH_BOUND_RATIO:g}x its GPU busy time or more: the "
        "host sets its speed; the GPU-time speedup is the stable figure",
    ),
    Caveat(
        "xla-baseline", "XLA baseline unsure", "XLA baseline",
        f"{_XLA} AND (bound = '{LAUNCH_BOUND}' OR timing = '{DISTURBED}')",
        _XLA_TRUST, _xla_baseline,
        "an XLA cell whose eager baseline is launch-bound or disturbed: its speedup reads "
        "inflated",
    ),
    Caveat(
        "xla-first-sweep", "XLA first-sweep timing", "XLA 1st sweep",
        f"{_XLA} AND xla_first_sweep AND speedup IS NOT NULL",
        Doc("docs/xla-h200.md", "fp32: still the first sweep's protocol"), _xla_first_sweep,
        "an XLA cell timed by the first sweep's protocol, the two sides as two blocks: its "
        "speedup is no result",
    ),
    Caveat(
        "ran-in-fp32", "ran in fp32", "ran fp32", _RAN_IN_FP32,
        Doc("docs/train-export-h200.md", "Export and AOTInductor (export-check)"), _ran_in_fp32,
        "an export or AOTInductor cell recorded under autocast, which torch.export drops: "
        "the program ran in fp32",
    ),
    Caveat(
        "environments", "several environments", "environments", "environments > 1",
        _README_RECORDED,
        _environments,
        "the model and config recorded in more than one environment: the newest row is "
        "shown, Model detail lists the others",
    ),
    Caveat(
        "graph-pool-missed", "memory misses the CUDA graph pool", "memory low",
        f"({_GRAPH_CONFIGS}) AND memory_ratio IS NOT NULL AND NOT pool_counted",
        Doc("docs/PERFORMANCE.md", "CUDA graphs and peak memory (2026-12-01)"), _pool_missed,
        "a CUDA graph cell measured before its pool was counted: its compiled memory reads "
        "far too low",
    ),
    Caveat(
        "crowded", "out of memory beside others", "crowded",
        "crowded AND (status = 'oom' OR coalesce(batch_size_run < batch_size, false))",
        Doc("docs/zoo-findings.md", "Out-of-memory rows that were a neighbour's"), _crowded,
        "the cell or an earlier attempt ran out of memory while other processes held most "
        "of the GPU's: an oom, or a smaller batch, that may be theirs",
    ),
    Caveat(
        "tuning-reused", "autotuning reused", "tuning reused", "tuning_reused",
        Doc("README.md", "How a cell is measured"), _tuning_reused,
        "a max-autotune cell that compiled with kernel choices another cell of the run "
        "had tuned (its model's other max-autotune cell, or --tuning-pool's earlier "
        "cells): its compile time leaves that tuning out",
    ),
    Caveat(
        "outlasted-run", "outlasted the run's time limit", "run too short",
        f"status = 'timeout' AND coalesce(error_type = '{OUTLASTED_RUN}', false)",
        Doc("docs/PERFORMANCE.md", "Cells that outlast a chunk"), _outlasted,
        "a timeout stopped at the end of a time-limited run (a sweep's chunk) it could not "
        "end within, its own timeout not reached: the run's length, not the model's",
    ),
    Caveat(
        "casts-reused", "GPU time reused eager's casts", "casts reused",
        "backend = 'eager' AND gpu_speedup IS NOT NULL AND one_region",
        AUTOCAST_SCOPE, _casts_reused,
        "an eager-backend cell profiled in one autocast region with eager: it reused "
        "eager's weight casts, so its GPU-time speedup reads high",
    ),
    # Not the eager backend: both its sides' timed calls reused the casts alike.
    Caveat(
        "reads-low", "speedup reads low: one autocast region", "reads low",
        f"one_region AND status = 'pass' AND bound = '{LAUNCH_BOUND}' AND backend <> 'eager' "
        f"AND {_NOT_XLA}",
        AUTOCAST_SCOPE, _reads_low,
        "a launch-bound pass timed inside one autocast region: eager skipped its weight "
        "casts after the first call, so its wall-clock speedup reads low",
    ),
)  # fmt: skip
BY_KEY = {caveat.key: caveat for caveat in CAVEATS}
# The caveats the Matrix marks with a corner (disturbed ones are hatched, launch-bound
# ones have a bar: those marks say the same).
CORNER = tuple(key for key in BY_KEY if key not in ("disturbed", "launch-bound"))


def sql() -> str:
    """The SQL list of a row's caveat keys (``queries.PREPARE``)."""
    cases = ", ".join(f"CASE WHEN {caveat.when} THEN '{caveat.key}' END" for caveat in CAVEATS)
    return f"list_filter([{cases}], lambda key: key IS NOT NULL)"


def keys(value) -> list[str]:
    """A row's caveat keys from its ``caveats`` column (a list, or nothing)."""
    if value is None or isinstance(value, float):
        return []
    return [key for key in value if key in BY_KEY]


def badges(value) -> str:
    """A row's caveats as one badge text: ``"⚠ timing disturbed · ⚠ ran in fp32"``."""
    return " · ".join(f"⚠ {BY_KEY[key].badge}" for key in keys(value))


def short_badges(value) -> str:
    """The same in the short words of a narrow column: ``"⚠ disturbed, ran fp32"``."""
    found = keys(value)
    return f"⚠ {', '.join(BY_KEY[key].short for key in found)}" if found else ""
