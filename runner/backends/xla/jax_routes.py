"""XLA cells: a torch module compiled by XLA through JAX (torchax), beside torch.compile.

``xla`` runs the module under ``jax.jit`` through torchax; ``xla_export`` exports it
with ``torch.export``, converts the exported program to a JAX function with torchax and
jits that. The reference, eager outputs, accuracy rule and shape probe are the cell
protocol's (``runner.cell``); what differs is how the program is compiled and called,
how the eager side is timed (in a process without JAX, ``eager_baseline``) and how the
compiled side's memory is read.

Imported only in XLA worker processes: importing torchax registers a ``jax`` device that
breaks torch.compile in the same process.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

# JAX would otherwise take most of the GPU at its first use, leaving torch's eager
# baseline and reference none. The executor sets it for XLA workers; this covers
# direct use.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax
import torch
import torchax
import torchax.export
from jax import monitoring
from torch.nn.attention import SDPBackend, sdpa_kernel

from runner.backends.base import Backend, Compiled, Sides
from runner.backends.xla.eager_baseline import EagerBaseline
from runner.backends.xla.support import XLA_EXPORT
from runner.matrix.holds import TUNING
from runner.matrix.phases import (
    COMPILE,
    COMPILED_RUN,
    EAGER_BASELINE,
    EXPORT,
    JAX_TRACE,
    MEMORY,
    TIMING,
    XLA_COMPILE,
)
from runner.measure.context import CellContext, Unsupported
from runner.measure.isolation import seed_everything
from runner.measure.profile import CallProfile, profile_call, record_profiles
from runner.measure.subject import Subject
from runner.measure.tensors import MB, host_tensors
from runner.measure.timing import (
    REWARM_CALLS,
    HostCanary,
    alternate_blocks,
    record_timing,
    synced_timer,
    timed_block,
    warm_up,
)

TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
LOWERING_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
COMPILE_EVENTS = {
    TRACE_EVENT: "trace",
    LOWERING_EVENT: "lowering",
    BACKEND_COMPILE_EVENT: "compile",
}
JAX_PLATFORMS = {"cuda": "gpu", "cpu": "cpu"}

# The name of the function a cell jits: compilations of anything else (torchax's
# dtype conversions and random keys, which JAX compiles too) are not the model's.
MODEL_FUNCTION = "zoo_model_forward"
# Calls per block when the eager baseline (its own process) and the XLA calls alternate.
BASELINE_BLOCK = 10


class XlaCompiles:
    """Compilations of the model function and their time, as ``jax.monitoring``
    reports them."""

    def __init__(self) -> None:
        self.count = 0
        self.seconds = dict.fromkeys(COMPILE_EVENTS.values(), 0.0)

    def reset(self) -> None:
        self.__init__()

    def __call__(self, event: str, duration: float, **kwargs: Any) -> None:
        if event not in COMPILE_EVENTS:
            return
        if kwargs.get("fun_name") not in (MODEL_FUNCTION, f"jit({MODEL_FUNCTION})"):
            return
        if event == BACKEND_COMPILE_EVENT:
            self.count += 1
        self.seconds[COMPILE_EVENTS[event]] += duration

    def total_s(self) -> float:
        return sum(self.seconds.values())


# Listeners cannot be scoped to a cell: one for the process, reset by each cell.
COMPILES = XlaCompiles()
monitoring.register_event_duration_secs_listener(COMPILES)


class TensorOutputs(torch.nn.Module):
    """The program with its outputs flattened to a tuple of tensors, as the step picks
    them for comparison: a HuggingFace ``ModelOutput`` is no JAX pytree."""

    def __init__(self, program: torch.nn.Module, outputs: Callable[[Any], list]) -> None:
        super().__init__()
        self.program = program
        self.outputs = outputs

    def forward(self, *inputs: Any) -> tuple[torch.Tensor, ...]:
        return tuple(self.outputs(self.program(*inputs)))


class JaxRoute(Backend):
    """The ``xla`` and ``xla_export`` routes: cast precision, JAX compile and calls, the
    eager side timed in a process of its own."""

    torch_allocated = False

    def __init__(self, ctx: CellContext) -> None:
        super().__init__(ctx)
        self.env = torchax.default_env()
        # Tensors cross between torch and JAX by DLPack (no copy) where they can.
        self.env.config.use_dlpack_for_data_conversion = True
        self.jax_device: Any = None
        self.baseline: EagerBaseline | None = None
        self.eager_profile: dict[str, Any] = {"error": "no eager profile was taken"}

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        platform = JAX_PLATFORMS[self.ctx.cell.device]
        try:
            self.jax_device = jax.devices(platform)[0]
        except RuntimeError:
            raise Unsupported(
                f"jax {jax.__version__} has no {platform} backend here "
                f"(its backends: {jax.default_backend()})",
                f"unsupported: jax has no {platform} backend",
            ) from None
        COMPILES.reset()
        # fp32 means full fp32 matmuls on both sides: torch's TF32 is off (the subject's
        # fp32 treatment), and JAX, which uses TF32 for fp32 matmuls on GPUs by default,
        # runs at highest.
        precision = "highest" if self.config.precision == "fp32" else None
        try:
            with jax.default_device(self.jax_device), _matmul_precision(precision):
                yield
        finally:
            if self.baseline is not None:
                self.baseline.close()
            jax.clear_caches()

    def precision_treatment(self, subject: Subject) -> str:
        label = subject.treatment_label()
        return (
            label if subject.reduced_dtype is not None else f"{label}, jax matmul precision highest"
        )

    def start(self, subject: Subject) -> None:
        # The eager baseline's process builds its model while this one compiles.
        self.baseline = EagerBaseline(self.ctx.cell)

    def compile(
        self,
        subject: Subject,
        program: torch.nn.Module,
        outputs: Callable[[Any], list],
        eager_once_s: float,
    ) -> Compiled:
        ctx = self.ctx
        ctx.enter(COMPILE)
        module = TensorOutputs(program, outputs)
        started = time.perf_counter()
        if self.config.backend == XLA_EXPORT:
            ctx.phase = EXPORT
            # Attention is exported as math on every device: decomposed on CUDA, SDPA
            # becomes the fused efficient/cuDNN kernels, which torchax cannot lower
            # (measured on the H200: BertForMaskedLM failed in both precisions).
            with sdpa_kernel(SDPBackend.MATH):
                exported = torch.export.export(
                    module, subject.inputs, dynamic_shapes=self.export_dynamic_shapes(subject)
                )
                states, function = torchax.export.exported_program_to_jax(exported)
            export_s = time.perf_counter() - started
        else:
            ctx.phase = JAX_TRACE
            states, function = torchax.extract_jax(module)
            export_s = 0.0
        compiled = JaxCompiled(ctx, self.env, subject, states, jax.jit(_named(function)))
        seed_everything()
        ctx.phase = JAX_TRACE
        lowered = compiled.jitted.lower(compiled.states, compiled.jax_inputs)
        ctx.phase = XLA_COMPILE
        # XLA's compiler autotunes: it times candidate GEMM/convolution kernels on the
        # GPU. Like Inductor's kernel benchmarking, that holds the GPU's lock as tuning
        # (neighbours would skew its choices, and its kernels their timings); the wait
        # for the lock is not compile time.
        waiting = time.perf_counter()
        with ctx.gate(TUNING):
            waited_s = time.perf_counter() - waiting
            compiled.executable = lowered.compile()
            ctx.phase = COMPILED_RUN
            # The jitted function finds the executable just compiled in its cache.
            first = jax.block_until_ready(compiled.jitted(compiled.states, compiled.jax_inputs))
        compiled.first_call_s = time.perf_counter() - started - waited_s
        compiled.compile_s = export_s + COMPILES.total_s()
        compiled.first_graphs = COMPILES.count
        seconds = ", ".join(f"{name} {s:.2f} s" for name, s in COMPILES.seconds.items())
        export = f"torch.export and conversion {export_s:.2f} s, " if export_s else ""
        ctx.note(f"XLA: {COMPILES.count} compile(s); {export}{seconds}")
        compiled.first_outputs = host_tensors(self.env.j2t_copy(first))
        return compiled

    def export_dynamic_shapes(self, subject: Subject) -> dict[str, Any] | None:
        """For dynamic true/auto, every input dimension may vary (torch.export decides
        which stay static); the jitted function still compiles once per shape."""
        if self.config.dynamic == "false":
            return None
        # Keyed by TensorOutputs.forward's parameter: its inputs come as one *args tuple.
        return {
            "inputs": tuple(
                {dim: torch.export.Dim.AUTO for dim in range(x.dim())}
                if isinstance(x, torch.Tensor)
                else None
                for x in subject.inputs
            )
        }

    # -- timing: the eager side in its own process -------------------------------------

    def before_timing(self, sides: Sides) -> None:
        """The eager side warms up in its own process, on the cores it times on, when
        told to time; both sides warm up inside the timed hold. Here: its process built."""
        assert self.baseline is not None
        self.ctx.phase = EAGER_BASELINE
        self.baseline.wait_ready()

    def time(self, sides: Sides) -> None:
        """Eager in a process without JAX (beside JAX, eager torch slows down). Its
        blocks of calls alternate with blocks of XLA calls here."""
        baseline = self.baseline
        assert baseline is not None
        ctx = self.ctx
        ctx.enter(TIMING)
        ctx.phase = EAGER_BASELINE
        baseline.warm_up()
        # Host clock around each call, synchronized: JAX runs on its own streams, which
        # torch's CUDA events do not see (the compiled call blocks until JAX is done).
        timer = synced_timer(sides.subject.sync)

        def eager_block(count: int) -> list[float]:
            ctx.phase = EAGER_BASELINE  # its failures are the cell's eager_error
            return baseline.time(count)

        # Read in this process, before each block of XLA calls (the eager baseline's
        # process launches the same way on the same host).
        canary = HostCanary(sides.subject.device, every=1)

        def xla_block(count: int) -> list[float]:
            ctx.phase = TIMING
            canary.tick()
            return timed_block(sides.compiled_run, timer, count)

        ctx.phase = TIMING
        warm_up(lambda: (sides.compiled_run(), sides.subject.sync()))
        eager, compiled = alternate_blocks(
            eager_block, xla_block, self.timing_plan(sides.subject), BASELINE_BLOCK
        )
        canary.record(ctx.result)
        ctx.phase = EAGER_BASELINE
        # Its profile now, while the baseline process is warm (``profile`` uses it).
        self.eager_profile = baseline.profile()
        baseline.finish()
        baseline.close()
        record_timing(ctx.result, eager, compiled)
        ctx.note(
            "eager timed in a process without JAX, in blocks of "
            f"{BASELINE_BLOCK} calls alternating with blocks of XLA calls, each block "
            f"after {REWARM_CALLS} untimed calls"
        )

    def profile(self, sides: Sides) -> None:
        """The eager side's profile came from its process (``time``); the compiled side
        is profiled here, where CUPTI sees the kernels JAX launches on the GPU. On the
        CPU the torch profiler does not see XLA's work at all."""
        subject = sides.subject
        if "error" in self.eager_profile:
            raise RuntimeError(
                f"the eager baseline's profile failed: {self.eager_profile['error']}"
            )
        eager = CallProfile(**self.eager_profile)
        compiled = profile_call(sides.compiled_run, subject.sync, subject.on_cuda)
        if not subject.on_cuda:
            self.ctx.note(
                "no kernel count of the XLA side: the torch profiler does not see XLA's CPU work"
            )
            compiled = CallProfile(None, None, compiled.cost_s)
        elif not compiled.kernels:
            self.ctx.note("no GPU time of the XLA side: the profiler saw none of its kernels")
            compiled = CallProfile(None, None, compiled.cost_s)
        record_profiles(self.ctx.result, eager, compiled)

    def measure_memory(self, sides: Sides) -> None:
        """Eager: torch's peak of one call. Compiled: what XLA's buffer assignment plans
        for one call (arguments, outputs and temporaries), on devices where JAX reports
        memory at all (not the CPU). JAX's own peak counter cannot be reset, so it only
        goes to the notes."""
        stats = self.jax_device.memory_stats()
        if stats is None or not sides.subject.on_cuda:
            return
        self.ctx.enter(MEMORY)
        result = self.ctx.result
        eager = sides.subject.peak_memory_mb(sides.eager)
        eager_alloc = eager.allocated
        result.eager_peak_alloc_mb = eager_alloc
        result.eager_peak_reserved_mb = eager.reserved
        compiled = sides.compiled
        assert isinstance(compiled, JaxCompiled)
        analysis = compiled.executable.memory_analysis()
        if analysis is not None:
            planned = (
                analysis.argument_size_in_bytes
                + analysis.output_size_in_bytes
                + analysis.temp_size_in_bytes
                - analysis.alias_size_in_bytes
            )
            result.compiled_peak_alloc_mb = planned / MB
            result.memory_ratio = planned / MB / eager_alloc if eager_alloc else None
        if "peak_bytes_in_use" in stats:
            self.ctx.note(
                f"JAX allocator peak in this worker so far: {stats['peak_bytes_in_use'] / MB:.0f} MB"
            )


class JaxCompiled(Compiled):
    """A jitted JAX function of the program's weights (``states``) and inputs."""

    # A new shape is a new XLA compile, autotuning included: under the lock too.
    probe_hold = TUNING

    def __init__(
        self,
        ctx: CellContext,
        env: Any,
        subject: Subject,
        states: Any,
        jitted: Callable[..., Any],
    ) -> None:
        self.ctx = ctx
        self.env = env
        self.states = states
        self.jitted = jitted
        self.executable: Any = None
        self.jax_inputs = self.to_jax(subject.inputs)

    def to_jax(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        converted = tuple(self.env.t2j_copy(tuple(inputs)))
        narrowed = [
            f"{torch_dtype} as {y.dtype}"
            for x, y in zip(inputs, converted, strict=True)
            if isinstance(x, torch.Tensor)
            and str(y.dtype) != (torch_dtype := str(x.dtype).removeprefix("torch."))
        ]
        note = f"inputs run in JAX as other dtypes: {', '.join(dict.fromkeys(narrowed))}"
        if narrowed and note not in self.ctx.notes:
            # int64 becomes int32 unless jax_enable_x64 is on.
            self.ctx.note(note)
        return converted

    def run(self) -> Any:
        return jax.block_until_ready(self.jitted(self.states, self.jax_inputs))

    def __call__(self, inputs: tuple[Any, ...]) -> Any:
        return jax.block_until_ready(self.jitted(self.states, self.to_jax(inputs)))

    def graphs(self) -> int:
        return COMPILES.count

    def record_graph_breaks(self, ctx: CellContext) -> None:
        # jax.jit traces the whole forward or fails: there are no graph breaks.
        ctx.result.graph_count = self.first_graphs
        ctx.result.graph_break_count = 0
        ctx.result.unique_break_count = 0

    def close(self) -> None:
        self.states = self.jax_inputs = self.executable = None


@contextlib.contextmanager
def _matmul_precision(precision: str | None) -> Iterator[None]:
    saved = jax.config.jax_default_matmul_precision
    jax.config.update("jax_default_matmul_precision", precision)
    try:
        yield
    finally:
        jax.config.update("jax_default_matmul_precision", saved)


def _named(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` under MODEL_FUNCTION's name, by which its compiles are counted."""

    def named(states: Any, inputs: tuple[Any, ...]) -> Any:
        return function(states, inputs)

    named.__name__ = named.__qualname__ = MODEL_FUNCTION
    return named
