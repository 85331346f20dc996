"""Named sets of columns: the configs a user asks for by name (``--configs @core``)
instead of a cross product of axes.

The zoo sweep's core set is not a cross product: each of its columns changes one thing
from the headline column (inductor default, dynamic false, bf16 autocast, inference),
so that a column's difference from the headline says what that one thing does.
Importable without torch.
"""

from __future__ import annotations

from runner.matrix.axes import NO_MODE
from runner.matrix.cells import CellConfig
from zoo.errors import UsageError

PREFIX = "@"

HEADLINE = CellConfig("inductor", "default", "false", "bf16", "infer")

# The headline column, then one change each: the other torch.compile backends, fp32, the
# dynamic-shape flags, reduce-overhead, torch.export and AOTInductor, a training step,
# the XLA routes through JAX, and max-autotune's two modes. In that order a sweep runs
# them: cheap columns first, those whose compiles take minutes last (runner.plan puts
# autotuning cells last in any plan; a model's two max-autotune cells one after the
# other, max-autotune first: the second reuses its tuning, runner.measure.tuning).
# torch_xla is left out:
# no build of it exists for the pinned torch with CUDA, so every cell of it reads
# `unsupported` (a user who has it asks for it with --backends torch_xla).
CORE = (
    HEADLINE,
    CellConfig("eager", NO_MODE, "false", "bf16", "infer"),
    CellConfig("aot_eager", NO_MODE, "false", "bf16", "infer"),
    CellConfig("cudagraphs", NO_MODE, "false", "bf16", "infer"),
    CellConfig("inductor", "default", "false", "fp32", "infer"),
    CellConfig("inductor", "default", "true", "bf16", "infer"),
    CellConfig("inductor", "default", "auto", "bf16", "infer"),
    CellConfig("inductor", "reduce-overhead", "false", "bf16", "infer"),
    CellConfig("export", "non-strict", "false", "bf16", "infer"),
    CellConfig("export", "strict", "false", "bf16", "infer"),
    CellConfig("aot_inductor", "default", "false", "bf16", "infer"),
    CellConfig("inductor", "default", "false", "bf16", "train"),
    CellConfig("xla", NO_MODE, "false", "bf16", "infer"),
    CellConfig("xla_export", NO_MODE, "false", "bf16", "infer"),
    CellConfig("inductor", "max-autotune", "false", "bf16", "infer"),
    CellConfig("inductor", "max-autotune-no-cudagraphs", "false", "bf16", "infer"),
)

_SETS: dict[str, tuple[CellConfig, ...]] = {"headline": (HEADLINE,), "core": CORE}

NAMES = tuple(_SETS)


def columns(token: str) -> tuple[CellConfig, ...]:
    """The columns of the set ``token`` names (``@core``; the ``@`` optional,
    case-insensitive)."""
    name = token.strip().removeprefix(PREFIX).lower()
    if name not in _SETS:
        known = ", ".join(PREFIX + known for known in NAMES)
        raise UsageError(f"unknown config set {token!r}; known config sets: {known}")
    return _SETS[name]
