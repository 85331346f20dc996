"""The column axes of the matrix other than the backend and the step (those are plug-ins:
``runner.backends.registry``, ``runner.steps.registry``)."""

from __future__ import annotations

MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
# What a cell records as its mode when its backend has no modes.
NO_MODE = "none"
# Modes that autotune kernels (and so take much longer to compile).
AUTOTUNE_MODES = ("max-autotune", "max-autotune-no-cudagraphs")
# Joins a mode and its options (``default+freezing+cpp_wrapper``).
MODE_OPTION = "+"
DYNAMIC = ("false", "true", "auto")
PRECISIONS = ("fp32", "bf16", "fp16")
# Precisions below fp32: autocast to them, or a cast of model and inputs.
REDUCED_PRECISIONS = ("bf16", "fp16")
DEVICES = ("cuda", "cpu")
SIZES = ("tiny", "full")
# Suites that build a model at more than one size; the others are always "full".
SIZED_SUITES = ("hf",)

# Precisions that are not measured on some device, and why: dropped at plan time.
PRECISION_CANNOT_RUN = {
    ("fp16", "cpu"): "precision fp16 is measured on CUDA only (device is cpu)",
}


def base_mode(mode: str) -> str:
    """A mode without its options: ``max-autotune+freezing`` -> ``max-autotune``."""
    return mode.split(MODE_OPTION)[0]


def mode_options(mode: str) -> tuple[str, ...]:
    """The options a mode carries: ``default+freezing`` -> ("freezing",)."""
    return tuple(mode.split(MODE_OPTION)[1:])
