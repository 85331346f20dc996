"""XLA cells: a torch module compiled by XLA through JAX (torchax), beside torch.compile.

``xla`` runs the module under ``jax.jit`` through torchax; ``xla_export`` exports it
with ``torch.export``, converts the exported program to a JAX function with torchax and
jits that. The reference, eager baseline, accuracy rule, timing loop and shape probe are
``runner.measure``'s; what differs is how the model is compiled and called.

Imported only in XLA worker processes: importing torchax registers a ``jax`` device that
breaks torch.compile in the same process.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
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

from runner import eager_baseline
from runner.config import Cell
from runner.gpu_lock import TUNING, format_cpus
from runner.measure import (
    AUTOCAST_DTYPES,
    MB,
    Measurement,
    _host_tensors,
    _record_timing,
    _seed_everything,
    alternate_blocks,
    cast_floats,
    flatten_tensors,
    warm_up,
)
from runner.result import UNSUPPORTED
from runner.xla_support import XLA_EXPORT

# Precisions an XLA cell casts model and inputs to: autocast does not cross into JAX.
CAST_DTYPES = AUTOCAST_DTYPES
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
    """The model with its outputs flattened to a tuple of tensors, the same flattening
    the accuracy check uses: a HuggingFace ``ModelOutput`` is no JAX pytree."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, *inputs: Any) -> tuple[torch.Tensor, ...]:
        return tuple(flatten_tensors(self.model(*inputs)))


class XlaMeasurement(Measurement):
    """One XLA cell: the torch measurement with compile and call done by JAX."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.env = torchax.default_env()
        # Tensors cross between torch and JAX by DLPack (no copy) where they can.
        self.env.config.use_dlpack_for_data_conversion = True
        self.cast_dtype = CAST_DTYPES.get(self.config.precision)
        self.jax_device: Any = None
        self.jitted: Callable[..., Any]
        self.executable: Any = None
        self.states: Any = None
        self.jax_inputs: tuple[Any, ...] = ()
        self.baseline: EagerBaseline | None = None

    def run(self, model: torch.nn.Module | None, inputs_fn: Callable[..., Any] | None) -> None:
        platform = JAX_PLATFORMS[self.device.type]
        try:
            self.jax_device = jax.devices(platform)[0]
        except RuntimeError:
            self.result.status = UNSUPPORTED
            self.result.error_message = (
                f"jax {jax.__version__} has no {platform} backend here "
                f"(its backends: {jax.default_backend()})"
            )
            self.result.error_signature = f"unsupported: jax has no {platform} backend"
            return
        COMPILES.reset()
        # fp32 means full fp32 matmuls on both sides: torch's TF32 is off (Measurement),
        # and JAX, which uses TF32 for fp32 matmuls on GPUs by default, runs at highest.
        precision = "highest" if self.cast_dtype is None else None
        try:
            with jax.default_device(self.jax_device), _matmul_precision(precision):
                super().run(model, inputs_fn)
        finally:
            if self.baseline is not None:
                self.baseline.close()
            self.states = self.jax_inputs = self.executable = None
            jax.clear_caches()

    # -- precision: a cast, not autocast --------------------------------------------

    def precision(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def precision_treatment(self) -> str:
        if self.cast_dtype is not None:
            return f"cast {self.config.precision} (model and inputs, eager too)"
        tf32 = ", tf32 off" if self.on_cuda else ""
        return f"fp32{tf32}, jax matmul precision highest"

    def cast(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return cast_floats(inputs, self.cast_dtype)

    # -- steps -----------------------------------------------------------------------

    def compile_and_check_accuracy(self) -> None:
        # The eager baseline's process builds its model while this one compiles.
        self.baseline = EagerBaseline(self.cell)
        with self.gpu_work():
            fp64_ref = self.reference_outputs()
            if self.cast_dtype is not None:
                self.model = self.model.to(self.cast_dtype)
                self.inputs = self.cast(self.inputs)
            eager, eager_once_s = self.eager_outputs()
        compiled = self.first_compiled_outputs(eager_once_s)
        self.check_accuracy(fp64_ref, eager, compiled)
        self.step = "eager baseline"
        self.baseline.wait_ready()

    def warm_up_untimed(self) -> None:
        """Nothing here: the eager side warms up in its own process, on the cores it
        times on, when told to time; both sides warm up inside the timed hold."""

    def time_eager_and_compiled(self) -> None:
        """Eager in a process without JAX (``runner.eager_baseline``): beside JAX, eager
        torch slows down. Its blocks of calls alternate with blocks of XLA calls here."""
        assert self.baseline is not None
        self.enter("timing")
        self.step = "eager baseline"
        self.baseline.warm_up()
        timer = self.synced_timer()

        def eager_block(count: int) -> list[float]:
            self.step = "eager baseline"  # its failures are the cell's eager_error
            return self.baseline.time(count)

        def xla_block(count: int) -> list[float]:
            self.step = "timing"
            return eager_baseline.timed_block(self.run_compiled, timer, count)

        self.step = "timing"
        warm_up(lambda: (self.run_compiled(), self.sync()))
        eager, compiled = alternate_blocks(
            eager_block, xla_block, self.timing_plan(), BASELINE_BLOCK
        )
        self.step = "eager baseline"
        self.baseline.finish()
        self.baseline.close()
        _record_timing(self.result, eager, compiled)
        self.notes.append(
            "eager timed in a process without JAX, in blocks of "
            f"{BASELINE_BLOCK} calls alternating with blocks of XLA calls, each block "
            f"after {eager_baseline.REWARM_CALLS} untimed calls"
        )

    def first_compiled_outputs(self, eager_once_s: float) -> list[torch.Tensor]:
        self.enter("compile")
        module = TensorOutputs(self.model)
        started = time.perf_counter()
        if self.config.backend == XLA_EXPORT:
            self.step = "export"
            # Attention is exported as math on every device: decomposed on CUDA, SDPA
            # becomes the fused efficient/cuDNN kernels, which torchax cannot lower
            # (measured on the H200: BertForMaskedLM failed in both precisions).
            with sdpa_kernel(SDPBackend.MATH):
                exported = torch.export.export(
                    module, self.inputs, dynamic_shapes=self.export_dynamic_shapes()
                )
                self.states, function = torchax.export.exported_program_to_jax(exported)
            export_s = time.perf_counter() - started
        else:
            self.step = "jax trace"
            self.states, function = torchax.extract_jax(module)
            export_s = 0.0
        self.jitted = jax.jit(_named(function, MODEL_FUNCTION))
        self.jax_inputs = self.to_jax(self.inputs)
        _seed_everything()
        self.step = "jax trace"
        lowered = self.jitted.lower(self.states, self.jax_inputs)
        self.step = "xla compile"
        # XLA's compiler autotunes: it times candidate GEMM/convolution kernels on the
        # GPU. Like Inductor's kernel benchmarking, that holds the GPU's timing lock
        # (neighbours would skew its choices, and its kernels their timings); the wait
        # for the lock is not compile time.
        waiting = time.perf_counter()
        with self.timing_gate(TUNING):
            waited_s = time.perf_counter() - waiting
            self.executable = lowered.compile()
            self.step = "compiled_run"
            # The jitted function finds the executable just compiled in its cache.
            outputs = jax.block_until_ready(self.jitted(self.states, self.jax_inputs))
        self.result.first_call_s = time.perf_counter() - started - waited_s
        self.result.compile_s = export_s + COMPILES.total_s()
        self.first_graphs = COMPILES.count
        seconds = ", ".join(f"{name} {s:.2f} s" for name, s in COMPILES.seconds.items())
        export = f"torch.export and conversion {export_s:.2f} s, " if export_s else ""
        self.notes.append(f"XLA: {COMPILES.count} compile(s); {export}{seconds}")
        return _host_tensors(self.env.j2t_copy(outputs))

    def probe_shape_change(self) -> None:
        # A new shape is a new XLA compile, autotuning included: under the lock too.
        with self.timing_gate(TUNING):
            super().probe_shape_change()

    def export_dynamic_shapes(self) -> dict[str, Any] | None:
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
                for x in self.inputs
            )
        }

    def to_jax(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        converted = tuple(self.env.t2j_copy(tuple(inputs)))
        narrowed = [
            f"{torch_dtype} as {y.dtype}"
            for x, y in zip(inputs, converted, strict=True)
            if isinstance(x, torch.Tensor)
            and str(y.dtype) != (torch_dtype := str(x.dtype).removeprefix("torch."))
        ]
        note = f"inputs run in JAX as other dtypes: {', '.join(dict.fromkeys(narrowed))}"
        if narrowed and note not in self.notes:
            # int64 becomes int32 unless jax_enable_x64 is on.
            self.notes.append(note)
        return converted

    def graphs_compiled(self) -> int:
        return COMPILES.count

    def run_compiled(self) -> Any:
        self.step = "compiled_run"
        return jax.block_until_ready(self.jitted(self.states, self.jax_inputs))

    def call_compiled(self, inputs: tuple[Any, ...]) -> Any:
        jax_inputs = self.to_jax(self.cast(inputs))
        return jax.block_until_ready(self.jitted(self.states, jax_inputs))

    def timer(self) -> Callable[[Callable[[], Any]], float]:
        """Host clock around each call, synchronized: JAX runs on its own streams, which
        torch's CUDA events do not see (the compiled call blocks until JAX is done)."""
        return self.synced_timer()

    def measure_peak_memory(self) -> None:
        """Eager: torch's peak of one call. Compiled: what XLA's buffer assignment plans
        for one call (arguments, outputs and temporaries), on devices where JAX reports
        memory at all (not the CPU). JAX's own peak counter cannot be reset, so it only
        goes to the notes."""
        stats = self.jax_device.memory_stats()
        if stats is None or not self.on_cuda:
            return
        self.enter("memory")
        eager_alloc, eager_reserved = self.peak_memory_mb(self.run_eager)
        self.result.eager_peak_alloc_mb = eager_alloc
        self.result.eager_peak_reserved_mb = eager_reserved
        analysis = self.executable.memory_analysis()
        if analysis is not None:
            planned = (
                analysis.argument_size_in_bytes
                + analysis.output_size_in_bytes
                + analysis.temp_size_in_bytes
                - analysis.alias_size_in_bytes
            )
            self.result.compiled_peak_alloc_mb = planned / MB
            self.result.memory_ratio = planned / MB / eager_alloc if eager_alloc else None
        if "peak_bytes_in_use" in stats:
            self.notes.append(
                f"JAX allocator peak in this worker so far: {stats['peak_bytes_in_use'] / MB:.0f} MB"
            )

    def record_graph_breaks(self) -> None:
        # jax.jit traces the whole forward or fails: there are no graph breaks.
        self.result.graph_count = self.first_graphs
        self.result.graph_break_count = 0
        self.result.unique_break_count = 0


class EagerBaseline:
    """A ``runner.eager_baseline`` process for one cell: started early, so that it builds
    while this one compiles; asked to time when the cell holds the GPU's lock."""

    def __init__(self, cell: Cell) -> None:
        # Its stderr is the worker's log; it shares the worker's process group, so a
        # worker killed for its timeout takes it along.
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "runner.eager_baseline"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._send(json.dumps({"cell": cell.to_dict()}))

    def _send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def _receive(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(
                f"the eager baseline process ended (exit {self.proc.wait()}); "
                "its traceback is in the worker's log"
            )
        return line.strip()

    def wait_ready(self) -> None:
        if (line := self._receive()) != eager_baseline.READY:
            raise RuntimeError(f"the eager baseline process said {line!r}, not ready")

    def warm_up(self) -> None:
        """Called while holding the GPU lock: the baseline times on this thread's cores
        (the reserved timing cores when ``--timing-cpus`` is on)."""
        self._send(f"{eager_baseline.GO} {format_cpus(os.sched_getaffinity(0))}")
        if (line := self._receive()) != eager_baseline.WARM:
            raise RuntimeError(f"the eager baseline process said {line!r}, not warm")

    def time(self, count: int) -> list[float]:
        self._send(f"{eager_baseline.TIME} {count}")
        return json.loads(self._receive())["samples"]

    def finish(self) -> None:
        self._send(eager_baseline.DONE)
        if json.loads(self._receive())["jax_imported"]:
            raise RuntimeError("the eager baseline process imported jax")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@contextlib.contextmanager
def _matmul_precision(precision: str | None):
    saved = jax.config.jax_default_matmul_precision
    jax.config.update("jax_default_matmul_precision", precision)
    try:
        yield
    finally:
        jax.config.update("jax_default_matmul_precision", saved)


def _named(function: Callable[..., Any], name: str) -> Callable[..., Any]:
    def named(states: Any, inputs: tuple[Any, ...]) -> Any:
        return function(states, inputs)

    named.__name__ = named.__qualname__ = name
    return named
