"""The phases of a cell, one name each, and the status a failure in each one gets.

A worker reports the phase it is in (the progress bar shows it, a crash row names it),
and a model's exception is classified by the phase it was raised in. Every phase the
runner enters is listed here: classifying an exception in an unknown phase is a bug of
ours and raises, rather than silently becoming a ``compile_error``.
"""

from __future__ import annotations

from runner.matrix.results import BUILD_ERROR, COMPILE_ERROR, EAGER_ERROR, FAIL_ACCURACY

# Reported by the executor, not by the measurement: a worker starting, a cell waiting
# for its GPU's lock.
STARTING = "starting"
WAITING = "waiting for the GPU"

# The measurement's phases, in the order a cell goes through them.
BUILD = "build"
INPUTS = "inputs"
REFERENCE = "reference"
EAGER = "eager"
# An XLA cell's eager side, timed in a process of its own.
EAGER_BASELINE = "eager baseline"
COMPILE = "compile"
# Compiling routes with stages of their own before the first call.
EXPORT = "export"
# AOTInductor's ahead-of-time compile of an exported program into a package.
AOT_COMPILE = "aot compile"
# Loading that package (``aoti_load_package``: the shared library, kernels and weights).
LOAD_PACKAGE = "load package"
JAX_TRACE = "jax trace"
XLA_COMPILE = "xla compile"
COMPILED_RUN = "compiled_run"
# The first call of an exported program (the export backend's compiled side).
RUN_EXPORTED = "run exported"
ACCURACY = "accuracy"
WARM_UP = "warm-up"
TIMING = "timing"
# One profiled call per side, inside the timed hold (runner.measure.profile).
PROFILE = "profile"
MEMORY = "memory"
PROBE = "probe"
BREAKS = "breaks"

# The phases a cell's compile time covers (``compile_s``), and those that keep a host's
# cores busy (a worker importing torch, building a model, tracing or compiling it): a cell
# in the first while others are in the second compiles on a crowded host
# (``CellResult.compile_beside``).
COMPILING = frozenset({COMPILE, EXPORT, AOT_COMPILE, LOAD_PACKAGE, JAX_TRACE, XLA_COMPILE})
CPU_BUSY = COMPILING | {STARTING, BUILD, PROBE, BREAKS}

# The status of a failure raised in each phase (an out-of-memory error is ``oom``
# whatever the phase). Phases after the first compiled call run compiled code, and
# fail as the compiler's.
PHASE_STATUS = {
    BUILD: BUILD_ERROR,
    INPUTS: BUILD_ERROR,
    REFERENCE: EAGER_ERROR,
    EAGER: EAGER_ERROR,
    EAGER_BASELINE: EAGER_ERROR,
    COMPILE: COMPILE_ERROR,
    EXPORT: COMPILE_ERROR,
    AOT_COMPILE: COMPILE_ERROR,
    LOAD_PACKAGE: COMPILE_ERROR,
    JAX_TRACE: COMPILE_ERROR,
    XLA_COMPILE: COMPILE_ERROR,
    COMPILED_RUN: COMPILE_ERROR,
    RUN_EXPORTED: COMPILE_ERROR,
    ACCURACY: FAIL_ACCURACY,
    WARM_UP: COMPILE_ERROR,
    TIMING: COMPILE_ERROR,
    PROFILE: COMPILE_ERROR,
    MEMORY: COMPILE_ERROR,
    PROBE: COMPILE_ERROR,
    BREAKS: COMPILE_ERROR,
}
# Phases that run torch.compile's stack: their error phase is the compiler stage that
# failed (dynamo trace, aot, inductor codegen, runtime) rather than the phase.
COMPILER_PHASES = (COMPILE, COMPILED_RUN, PROBE)


def status_of(phase: str) -> str:
    """The status of a failure raised in ``phase``."""
    try:
        return PHASE_STATUS[phase]
    except KeyError:
        raise ValueError(
            f"unknown phase {phase!r}: add it to runner.matrix.phases.PHASE_STATUS"
        ) from None
