"""The measurement of one cell, inside a worker process.

``measure_cell`` builds the model, computes a float64 reference, runs eager, compiles,
checks the compiled output, times eager and compiled calls interleaved, reads peak
memory, probes one shape change (dynamic cells) and collects the graph breaks. Every
exception a model raises ends as a ``CellResult``. Worker processes are reused across
cells, so everything global a cell touches is restored before it returns.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import json
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import torch
from torch._dynamo.utils import counters

from runner.config import NO_MODE, Cell
from runner.failure import classify, headline, signature, traceback_tail
from runner.gpu_lock import TIMING, UNTIMED
from runner.result import FAIL_ACCURACY, PASS, UNSUPPORTED, CellResult, GraphBreak

MESSAGE_CHARS = 2000
REASON_CHARS = 300
SEED = 0
# Warm-up pairs (eager, compiled) before timing: at least WARMUPS, and more until
# WARMUP_S has passed, so that GPU clocks and allocator caches settle first. They run as
# untimed GPU work (a shared hold of the GPU's lock, beside other untimed work); the
# timed hold then starts with HELD_WARMUPS pairs more, untimed, which run with the GPU
# alone before the first timed one.
WARMUPS = 3
WARMUP_S = 0.5
HELD_WARMUPS = 2
MB = 2**20
# The reference model is a float64 copy: it must leave room for the measured model.
FP64_REF_CUDA_FREE_FRACTION = 0.25
FP64_REF_CPU_BYTES = 4 * 2**30
# Inductor modes whose compiled code replays CUDA graphs, which need a step marker per call.
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
INDUCTOR_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
TRITON_CACHE_ENV = "TRITON_CACHE_DIR"
WARM_CACHE_ENV = "ZOO_WARM_CACHE"
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


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


def _ignore_phase(phase: str) -> None:
    pass


def no_gate(kind: str = TIMING) -> contextlib.AbstractContextManager[Any]:
    """The timing gate where there is no lock: nothing to wait for."""
    return contextlib.nullcontext()


def measure_cell(
    cell: Cell,
    *,
    report_phase: Callable[[str], None] = _ignore_phase,
    timing_gate: Callable[..., contextlib.AbstractContextManager[Any]] = no_gate,
    model: torch.nn.Module | None = None,
    inputs_fn: Callable[[int | None, str, int | None], tuple[torch.Tensor, ...]] | None = None,
) -> CellResult:
    """Measure ``cell`` and return its result; a model failure never raises.

    ``report_phase(name)`` is called as each step starts. ``timing_gate()`` is entered
    around the timed calls and never around compiling; ``timing_gate(TUNING)`` around
    compilers that time kernels themselves (XLA's autotuning compile), which yield to
    timing; ``timing_gate(UNTIMED)`` around untimed GPU work (``GpuLock.held``).
    ``model`` and ``inputs_fn(batch_size, device, seq_len)`` replace ``cell.spec.build``
    and ``cell.spec.example_inputs``.
    """
    result = CellResult.for_cell(cell, started_at=_utc_now())
    started = time.perf_counter()
    notes: list[str] = []
    with _cold_compile_caches(), _restored_process_state(notes):
        measurement_class = _measurement_class(cell, result)
        if measurement_class is not None:
            measurement = measurement_class(cell, result, notes, report_phase, timing_gate)
            try:
                measurement.run(model, inputs_fn)
            except Exception as exc:
                record_failure(result, exc, measurement.step)
            del measurement
    result.notes = "; ".join(notes) or None
    result.finished_at = _utc_now()
    result.wall_s = time.perf_counter() - started
    return result


def _measurement_class(cell: Cell, result: CellResult) -> type[Measurement] | None:
    """The measurement of the cell's backend; ``None`` when the cell cannot run here (its
    result then says why). XLA is imported only for XLA cells: it breaks torch.compile
    in the same process, and their workers never run torch.compile cells."""
    if cell.config.process_kind != "xla":
        return Measurement
    from runner.xla_support import TORCH_XLA, unavailable_reason, version

    reason = unavailable_reason(cell.config.backend, cell.device)
    if reason is None and cell.config.backend == TORCH_XLA:
        # No torch_xla release pairs with the torch this project pins (torch_xla 2.9.0
        # needs torch 2.9.0), so there is nothing to build its run against yet.
        reason = (
            f"torch_xla {version('torch_xla')} is installed, but zoo-matrix does not run "
            "torch_xla cells yet"
        )
    if reason is None:
        try:
            from runner.xla import XlaMeasurement
        except Exception as exc:
            reason = f"the {cell.config.backend} route does not import here: {signature(exc)}"
        else:
            return XlaMeasurement
    result.status = UNSUPPORTED
    result.error_message = reason
    result.error_signature = f"unsupported: {reason}"
    return None


def record_failure(result: CellResult, exc: Exception, step: str) -> None:
    result.status, result.error_phase = classify(exc, step)
    result.error_type = type(exc).__name__
    result.error_signature = signature(exc)
    result.error_message = _truncate(str(exc), MESSAGE_CHARS)
    result.traceback_tail = traceback_tail(exc)


class Measurement:
    """The steps of one cell. ``step`` names the one running, for the failure report.

    This is the torch.compile measurement; other routes (``runner.xla``) subclass it and
    replace how the model is compiled and called, keeping the reference, accuracy rule,
    timing loop and shape probe."""

    def __init__(
        self,
        cell: Cell,
        result: CellResult,
        notes: list[str],
        report_phase: Callable[[str], None],
        timing_gate: Callable[..., contextlib.AbstractContextManager[Any]],
    ) -> None:
        self.cell = cell
        self.config = cell.config
        self.result = result
        self.notes = notes
        self.report_phase = report_phase
        self.timing_gate = timing_gate
        self.device = torch.device(cell.device)
        self.on_cuda = self.device.type == "cuda"
        self.uses_cudagraphs = self.config.backend == "cudagraphs" or (
            self.config.backend == "inductor" and self.config.mode in CUDAGRAPH_MODES
        )
        self.step = "build"
        self.model: torch.nn.Module
        self.compiled: Callable[..., Any]
        self.make_inputs: Callable[..., tuple[torch.Tensor, ...]]
        self.inputs: tuple[Any, ...] = ()
        # dynamo's counters right after the first compiled call
        self.first_graphs = 0
        self.break_events: dict[str, int] = {}
        self.unsupported_events: dict[str, int] = {}

    def run(
        self,
        model: torch.nn.Module | None,
        inputs_fn: Callable[..., tuple[torch.Tensor, ...]] | None,
    ) -> None:
        self.build(model, inputs_fn)
        with torch.no_grad(), self.fp32_treatment():
            self.compile_and_check_accuracy()
            self.warm_up_untimed()
            with self.timing_gate():
                self.time_eager_and_compiled()
            self.measure_peak_memory()
            self.probe_shape_change()
            self.record_recompiles()
            self.record_graph_breaks()
        self.result.status = PASS if self.result.accuracy_pass else FAIL_ACCURACY

    def fp32_treatment(self) -> contextlib.AbstractContextManager[Any]:
        """fp32 cells run with TF32 off on CUDA: full fp32 matmuls."""
        if self.config.precision == "fp32":
            return _tf32_disabled(self.on_cuda)
        return contextlib.nullcontext()

    def enter(self, phase: str) -> None:
        self.step = phase
        self.report_phase(phase)

    # -- calls -----------------------------------------------------------------------

    def precision(self) -> contextlib.AbstractContextManager[Any]:
        dtype = AUTOCAST_DTYPES.get(self.config.precision)
        return torch.autocast(self.device.type, dtype=dtype) if dtype else contextlib.nullcontext()

    def run_eager(self) -> Any:
        self.step = "eager"
        return self.model(*self.inputs)

    def run_compiled(self) -> Any:
        self.step = "compiled_run"
        return self.call_compiled(self.inputs)

    def call_compiled(self, inputs: tuple[Any, ...]) -> Any:
        if self.uses_cudagraphs:
            torch.compiler.cudagraph_mark_step_begin()
        return self.compiled(*inputs)

    def sync(self) -> None:
        if self.on_cuda:
            torch.cuda.synchronize(self.device)

    # -- steps -----------------------------------------------------------------------

    def build(
        self,
        model: torch.nn.Module | None,
        inputs_fn: Callable[..., tuple[torch.Tensor, ...]] | None,
    ) -> None:
        self.enter("build")
        if model is None:
            model = self.cell.spec.build()
        # What the build changed from the model's defaults (an hf depth cut) is data.
        self.notes.extend(getattr(model, "build_notes", ()))
        self.model = model.eval().to(self.device)
        self.result.param_count = sum(p.numel() for p in self.model.parameters())
        self.result.precision_treatment = self.precision_treatment()
        self.step = "inputs"
        self.make_inputs = inputs_fn or self.cell.spec.example_inputs
        self.inputs = tuple(
            self.make_inputs(self.cell.batch_size, self.cell.device, self.cell.seq_len)
        )
        self.result.input_shapes = _shapes_json(self.inputs)

    def precision_treatment(self) -> str:
        if self.config.precision in AUTOCAST_DTYPES:
            return f"autocast {self.config.precision}"
        return "fp32, tf32 off" if self.on_cuda else "fp32"

    def compile_and_check_accuracy(self) -> None:
        # The outputs live on the host, and only inside this method, so that they take
        # no device memory while the model is timed and its peak memory read.
        with self.gpu_work():
            fp64_ref = self.reference_outputs()
            eager, eager_once_s = self.eager_outputs()
        compiled = self.first_compiled_outputs(eager_once_s)
        self.check_accuracy(fp64_ref, eager, compiled)

    @contextlib.contextmanager
    def gpu_work(self) -> Iterator[None]:
        """Around untimed steps that run the model on the GPU (the fp64 reference, the
        eager outputs, the peak-memory pass): a shared hold of the GPU's lock, so that
        they run beside each other but never beside a neighbour's timing or tuning.
        Python's garbage is collected before and after, outside the hold: a collection
        takes 0.1-0.2 s of CPU in a process that has compiled, which the lock should
        not be held for."""
        gc.collect()
        with self.timing_gate(UNTIMED):
            yield
        gc.collect()

    def reference_outputs(self) -> list[torch.Tensor]:
        self.enter("reference")
        with _tf32_disabled(self.on_cuda):
            if self.fp64_reference_fits():
                try:
                    outputs = self.fp64_outputs()
                except Exception as exc:
                    self.notes.append(f"fp64 reference failed, fp32 used: {signature(exc)}")
                else:
                    self.result.accuracy_ref_dtype = "fp64"
                    return outputs
                _free_device_memory()
            self.result.accuracy_ref_dtype = "fp32"
            _seed_everything()
            return _host_tensors(self.model(*self.inputs))

    def fp64_reference_fits(self) -> bool:
        tensors = [*self.model.parameters(), *self.model.buffers()]
        fp64_bytes = 8 * sum(t.numel() for t in tensors if t.is_floating_point())
        if self.on_cuda:
            _release_cached_memory()  # garbage was collected before the hold
            free_bytes, _ = torch.cuda.mem_get_info(self.device)
            return fp64_bytes <= FP64_REF_CUDA_FREE_FRACTION * free_bytes
        return fp64_bytes <= FP64_REF_CPU_BYTES

    def fp64_outputs(self) -> list[torch.Tensor]:
        model = copy.deepcopy(self.model).to(torch.float64)
        inputs = tuple(_to_float64(x) for x in self.inputs)
        try:
            _seed_everything()
            return _host_tensors(model(*inputs))
        finally:
            del model, inputs
            _release_cached_memory()  # any cycles of the copy: collected after the hold

    def eager_outputs(self) -> tuple[list[torch.Tensor], float]:
        self.enter("eager")
        with self.precision():
            _seed_everything()
            outputs = _host_tensors(self.run_eager())
            once_s = self.wall_time(self.run_eager)
        return outputs, once_s

    def first_compiled_outputs(self, eager_once_s: float) -> list[torch.Tensor]:
        self.enter("compile")
        mode = None if self.config.mode in (NO_MODE, "default") else self.config.mode
        self.compiled = torch.compile(
            self.model, backend=self.config.backend, mode=mode, dynamic=self.config.dynamic_arg
        )
        with self.precision():
            _seed_everything()
            self.sync()
            start = time.perf_counter()
            outputs = self.call_compiled(self.inputs)
            self.sync()
            self.result.first_call_s = time.perf_counter() - start
            self.result.compile_s = self.result.first_call_s - eager_once_s
            outputs = _host_tensors(outputs)
        self.first_graphs = self.graphs_compiled()
        self.break_events = dict(counters["graph_break"])
        self.unsupported_events = dict(counters["unimplemented"])
        return outputs

    def graphs_compiled(self) -> int:
        """Graphs compiled so far in this cell (for recompiles and the shape probe)."""
        return counters["stats"]["unique_graphs"]

    def wall_time(self, fn: Callable[[], Any]) -> float:
        self.sync()
        start = time.perf_counter()
        fn()
        self.sync()
        return time.perf_counter() - start

    def check_accuracy(
        self,
        fp64_ref: list[torch.Tensor],
        eager: list[torch.Tensor],
        compiled: list[torch.Tensor],
    ) -> None:
        self.enter("accuracy")
        tol, multiplier = accuracy_tolerance(self.config.precision, self.device.type)
        accuracy = compare_outputs(fp64_ref, eager, compiled, tol=tol, multiplier=multiplier)
        self.result.accuracy_pass = accuracy.passed
        self.result.max_abs_error = accuracy.max_abs_error
        self.result.rmse = accuracy.rmse
        self.result.eager_rmse = accuracy.eager_rmse
        if accuracy.failure:
            self.notes.append(f"accuracy: {accuracy.failure}")

    def warm_up_untimed(self) -> None:
        """Most of the warm-up before timing, as untimed GPU work: it holds the lock
        shared, so that the timed hold (exclusive, the scarce resource of a parallel
        sweep) is not spent on it."""
        with self.gpu_work(), self.precision():
            self.enter("warm-up")
            warm_up(self.untimed_pair)

    def untimed_pair(self) -> None:
        self.run_eager()
        self.run_compiled()
        self.sync()

    def time_eager_and_compiled(self) -> None:
        self.enter("timing")
        timer = self.timer()
        with self.precision():
            warm_up(self.untimed_pair, calls=HELD_WARMUPS, seconds=0.0)
            pairs = _repeat(
                lambda: (timer(self.run_eager), timer(self.run_compiled)), self.timing_plan()
            )
        _record_timing(self.result, [e for e, _ in pairs], [c for _, c in pairs])

    def synced_timer(self) -> Callable[[Callable[[], Any]], float]:
        """The host clock around each call, the device synchronized before it stops."""

        def synced_ms(fn: Callable[[], Any]) -> float:
            start = time.perf_counter()
            fn()
            self.sync()
            return (time.perf_counter() - start) * 1000

        return synced_ms

    def timing_plan(self) -> TimingPlan:
        return TIMING_PLANS["cuda" if self.on_cuda else "cpu"]

    def timer(self) -> Callable[[Callable[[], Any]], float]:
        """How one call is timed, in ms: CUDA events on the current stream, else the
        host clock (CPU calls are synchronous)."""
        return _cuda_event_ms if self.on_cuda else _perf_counter_ms

    def measure_peak_memory(self) -> None:
        if not self.on_cuda:
            return
        self.enter("memory")
        with self.gpu_work(), self.precision():
            eager_alloc, eager_reserved = self.peak_memory_mb(self.run_eager)
            compiled_alloc, compiled_reserved = self.peak_memory_mb(self.run_compiled)
        self.result.eager_peak_alloc_mb = eager_alloc
        self.result.eager_peak_reserved_mb = eager_reserved
        self.result.compiled_peak_alloc_mb = compiled_alloc
        self.result.compiled_peak_reserved_mb = compiled_reserved
        self.result.memory_ratio = compiled_alloc / eager_alloc if eager_alloc else None

    def peak_memory_mb(self, fn: Callable[[], Any]) -> tuple[float, float]:
        _release_cached_memory()  # garbage was collected before the hold
        torch.cuda.reset_peak_memory_stats(self.device)
        fn()
        self.sync()
        return (
            torch.cuda.max_memory_allocated(self.device) / MB,
            torch.cuda.max_memory_reserved(self.device) / MB,
        )

    def probe_shape_change(self) -> None:
        if self.config.dynamic not in ("true", "auto"):
            return
        self.enter("probe")
        try:
            inputs = self.probe_inputs()
        except Exception as exc:
            self.notes.append(f"shape probe skipped, its inputs failed: {signature(exc)}")
            return
        if inputs is None:
            self.notes.append("shape probe skipped: no input dimension can be halved")
            return
        self.result.probe_shapes = _shapes_json(inputs)
        graphs_before = self.graphs_compiled()
        try:
            with self.precision():
                self.call_compiled(inputs)
            self.result.probe_ok = True
        except Exception as exc:
            self.result.probe_ok = False
            _, stage = classify(exc, "probe")
            self.notes.append(f"shape probe failed ({stage}): {signature(exc)}")
        self.result.probe_recompiles = self.graphs_compiled() - graphs_before

    def probe_inputs(self) -> tuple[Any, ...] | None:
        """Inputs with the batch halved (at least 2: 1 would be specialized) and the
        sequence halved; ``None`` when that changes no shape."""
        batch, seq = self.cell.batch_size, self.cell.seq_len
        if batch is None:
            return _halve_leading_dims(self.inputs)
        probe_batch = max(2, batch // 2)
        probe_seq = max(2, seq // 2) if seq else seq
        if (probe_batch, probe_seq) == (batch, seq):
            return None
        return tuple(self.make_inputs(probe_batch, self.cell.device, probe_seq))

    def record_recompiles(self) -> None:
        self.result.recompile_count = self.graphs_compiled() - self.first_graphs

    def record_graph_breaks(self) -> None:
        """Graph and break counts as ``torch._dynamo.explain`` reports them.

        explain counts graph breaks as captured graphs minus one. Dynamo's
        ``graph_break`` counter counts break events instead, which differ: a break with
        no graph before or after it (a ``print`` first or last in ``forward``) splits
        nothing, and a data-dependent branch is counted as ``unimplemented``. The
        stored count follows explain; a differing event count goes to the notes.
        """
        result = self.result
        result.graph_count = self.first_graphs
        if self.first_graphs == 0:
            reasons = " | ".join(dict.fromkeys(map(summarize_reason, self.unsupported_events)))
            self.notes.append(f"dynamo captured no graph, the model ran eagerly: {reasons}")
            return
        result.graph_break_count = self.first_graphs - 1
        result.unique_break_count = 0
        events = sum(self.break_events.values())
        if events != result.graph_break_count:
            self.notes.append(
                f"dynamo counted {events} graph-break event(s) for "
                f"{result.graph_break_count} graph split(s)"
            )
        if result.graph_break_count:
            self.explain_graph_breaks()

    def explain_graph_breaks(self) -> None:
        # explain resets dynamo, dropping the compiled code: it must come last.
        self.enter("breaks")
        result = self.result
        try:
            with self.precision():
                explained = torch._dynamo.explain(self.model)(*self.inputs)
        except Exception as exc:
            self.notes.append(f"explain failed, break frames unknown: {signature(exc)}")
            result.graph_breaks = [
                GraphBreak(summarize_reason(reason), None, count)
                for reason, count in self.break_events.items()
            ]
        else:
            if explained.graph_break_count != result.graph_break_count:
                self.notes.append(
                    f"explain found {explained.graph_break_count} graph break(s), "
                    f"the compiled run {result.graph_break_count}"
                )
                result.graph_break_count = explained.graph_break_count
            result.graph_breaks = _merge_breaks(explained.break_reasons)
        finally:
            torch._dynamo.reset()
        result.unique_break_count = len({b.reason for b in result.graph_breaks})


# -- accuracy ------------------------------------------------------------------------


@dataclass
class Accuracy:
    """The outcome of comparing compiled outputs with eager ones and a reference."""

    passed: bool
    max_abs_error: float | None = None
    rmse: float | None = None
    eager_rmse: float | None = None
    failure: str | None = None


def accuracy_tolerance(precision: str, device_type: str) -> tuple[float, float]:
    """``(tol, multiplier)`` of the RMSE rule for a precision on a device type."""
    if precision in AUTOCAST_DTYPES:
        return 1e-2, 3.0
    return (1e-3 if device_type == "cuda" else 1e-4), 2.0


def compare_outputs(
    fp64_ref: list[torch.Tensor],
    eager: list[torch.Tensor],
    compiled: list[torch.Tensor],
    *,
    tol: float,
    multiplier: float,
) -> Accuracy:
    """The RMSE rule of PyTorch's dynamo benchmark harness, output by output.

    A floating output passes if it is allclose to eager, or if its RMSE against the
    reference is at most ``multiplier`` x eager's RMSE against the reference + tol/10.
    Other outputs must be equal. ``rmse``/``eager_rmse`` are those of the output
    closest to failing (or failing worst); ``max_abs_error`` is over all outputs.
    """
    if not len(fp64_ref) == len(eager) == len(compiled):
        return Accuracy(
            False,
            failure=f"{len(compiled)} compiled outputs, {len(eager)} eager, "
            f"{len(fp64_ref)} reference",
        )
    accuracy = Accuracy(True)
    worst_margin = -math.inf
    for index, (gold, ref, res) in enumerate(zip(fp64_ref, eager, compiled, strict=True)):
        mismatch = _structural_mismatch(ref, res)
        if mismatch:
            return Accuracy(False, failure=f"output {index}: {mismatch}")
        if not _is_float(ref):
            if not torch.equal(ref, res):
                accuracy.passed = False
                accuracy.failure = accuracy.failure or f"output {index}: values differ"
            continue
        if ref.numel() == 0:
            continue
        check = _compare_float(gold, ref, res, tol, multiplier)
        accuracy.max_abs_error = max(accuracy.max_abs_error or 0.0, check.max_abs_error)
        if check.margin > worst_margin:
            worst_margin = check.margin
            accuracy.rmse, accuracy.eager_rmse = check.rmse, check.eager_rmse
        if not check.passed:
            accuracy.passed = False
            accuracy.failure = accuracy.failure or (
                f"output {index}: rmse {check.rmse:.3g} > {multiplier:g} x eager rmse "
                f"{check.eager_rmse:.3g} + {tol / 10:g}"
            )
    return accuracy


@dataclass
class _FloatCheck:
    passed: bool
    max_abs_error: float
    rmse: float
    eager_rmse: float
    margin: float  # how far past the RMSE bound (positive: failing)


def _compare_float(
    gold: torch.Tensor, ref: torch.Tensor, res: torch.Tensor, tol: float, multiplier: float
) -> _FloatCheck:
    gold, ref, res = (_as_float64(t) for t in (gold, ref, res))
    identical = (ref == res) | (ref.isnan() & res.isnan())
    max_abs = (ref - res).abs().masked_fill(identical, 0).max().item()
    # NaN or inf in the same place in both is agreement, and no distance to the reference.
    finite = ~(identical & ~ref.isfinite())
    rmse = _rmse(gold[finite], res[finite])
    eager_rmse = _rmse(gold[finite], ref[finite])
    bound = multiplier * eager_rmse + tol / 10
    close = torch.allclose(ref, res, rtol=tol, atol=tol, equal_nan=True)
    passed = close or rmse <= bound
    return _FloatCheck(passed, max_abs, rmse, eager_rmse, rmse - bound)


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    return torch.sqrt(torch.mean((a - b) ** 2)).item() if a.numel() else 0.0


def _structural_mismatch(ref: torch.Tensor, res: torch.Tensor) -> str | None:
    if ref.shape != res.shape:
        return f"shape {list(ref.shape)} eager, {list(res.shape)} compiled"
    if _is_float(ref) != _is_float(res) or (not _is_float(ref) and ref.dtype != res.dtype):
        return f"dtype {ref.dtype} eager, {res.dtype} compiled"
    return None


def _is_float(t: torch.Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def _as_float64(t: torch.Tensor) -> torch.Tensor:
    return (torch.view_as_real(t) if t.is_complex() else t).to(torch.float64)


def flatten_tensors(value: Any) -> list[torch.Tensor]:
    """The tensors of a model output, in order: tensors, sequences, mappings, and
    HuggingFace ``ModelOutput``-like objects (``to_tuple()``)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if hasattr(value, "to_tuple"):
        value = value.to_tuple()
    elif isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, list | tuple):
        return [t for item in value for t in flatten_tensors(item)]
    return []


def _host_tensors(value: Any) -> list[torch.Tensor]:
    # Copies: compiled code (CUDA graphs) may overwrite its outputs on the next call.
    return [t.detach().to("cpu", copy=True) for t in flatten_tensors(value)]


# -- timing --------------------------------------------------------------------------


def cast_floats(inputs: tuple[Any, ...], dtype: torch.dtype | None) -> tuple[Any, ...]:
    """The floating-point tensors of ``inputs`` cast to ``dtype`` (none when None)."""
    if dtype is None:
        return inputs
    return tuple(
        x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs
    )


def warm_up(call: Callable[[], Any], calls: int = WARMUPS, seconds: float = WARMUP_S) -> None:
    """At least ``calls`` calls, and more until ``seconds`` have passed: GPU clocks and
    allocator caches settle first."""
    done, started = 0, time.perf_counter()
    while done < calls or time.perf_counter() - started < seconds:
        call()
        done += 1


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


def _repeat(sample: Callable[[], Any], plan: TimingPlan) -> list[Any]:
    """``sample()`` at least ``plan.min_pairs`` times, then until ``plan.budget_s`` has
    passed, at most ``plan.max_pairs`` times. Sampling eager and compiled together, in
    alternation, lets clock drift hit both alike."""
    samples: list[Any] = []
    started = time.perf_counter()
    while plan.wants_more(len(samples), started):
        samples.append(sample())
    return samples


def _cuda_event_ms(fn: Callable[[], Any]) -> float:
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def _perf_counter_ms(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def _record_timing(result: CellResult, eager: list[float], compiled: list[float]) -> None:
    result.eager_ms_p25, result.eager_ms, result.eager_ms_p75 = _quartiles(eager)
    result.compiled_ms_p25, result.compiled_ms, result.compiled_ms_p75 = _quartiles(compiled)
    result.eager_samples_ms = eager
    result.compiled_samples_ms = compiled
    result.speedup = result.eager_ms / result.compiled_ms if result.compiled_ms else None


def _quartiles(samples: list[float]) -> tuple[float, float, float]:
    p25, median, p75 = statistics.quantiles(samples, n=4, method="inclusive")
    return p25, median, p75


# -- graph breaks --------------------------------------------------------------------


def summarize_reason(reason: str) -> str:
    """A graph-break reason in one line: its type and explanation, without the hints,
    developer context and links that follow."""
    return _truncate(headline(reason), REASON_CHARS)


def _merge_breaks(reasons: Iterable[Any]) -> list[GraphBreak]:
    """One ``GraphBreak`` per distinct (reason, user frame) of explain's break reasons."""
    merged: dict[tuple[str, str | None], GraphBreak] = {}
    for reason in reasons:
        key = (summarize_reason(reason.reason), _user_frame(reason.user_stack))
        if key in merged:
            merged[key].count += 1
        else:
            merged[key] = GraphBreak(*key)
    return list(merged.values())


def _user_frame(stack: list[Any] | None) -> str | None:
    """``file:line in function`` of the innermost frame outside torch (else the innermost)."""
    if not stack:
        return None
    frame = next((f for f in reversed(stack) if not f.filename.startswith(_TORCH_DIR)), stack[-1])
    return f"{_short_path(frame.filename)}:{frame.lineno} in {frame.name}"


def _short_path(path: str) -> str:
    """Installed packages by their path inside site-packages, the same on every machine."""
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


# -- process state -------------------------------------------------------------------


@contextlib.contextmanager
def _cold_compile_caches():
    """Fresh Inductor and Triton cache directories for the cell (unless warm caches are
    asked for), so that compile time is a cold compile; removed afterwards."""
    if os.environ.get(WARM_CACHE_ENV) == "1":
        yield
        return
    saved = {name: os.environ.get(name) for name in (INDUCTOR_CACHE_ENV, TRITON_CACHE_ENV)}
    directory = tempfile.mkdtemp(prefix="zoo-inductor-")
    os.environ[INDUCTOR_CACHE_ENV] = directory
    os.environ[TRITON_CACHE_ENV] = os.path.join(directory, "triton")
    _clear_inductor_memory_caches()
    try:
        yield
    finally:
        _clear_inductor_memory_caches()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(directory, ignore_errors=True)


def _clear_inductor_memory_caches() -> None:
    import torch._inductor.utils as inductor_utils

    # ``clear_caches`` since torch 2.8; the older name is kept as an alias.
    clear = getattr(inductor_utils, "clear_caches", None) or inductor_utils.clear_inductor_caches
    clear()


@contextlib.contextmanager
def _restored_process_state(notes: list[str]):
    """Fresh dynamo state and counters for the cell; on the way out, the state the
    next cell in this process expects (a failed cleanup is noted, never raised)."""
    default_dtype = torch.get_default_dtype()
    torch._dynamo.reset()
    counters.clear()
    try:
        yield
    finally:
        torch.set_default_dtype(default_dtype)
        try:
            torch._dynamo.reset()
            counters.clear()
            _free_device_memory()
        except Exception as exc:
            notes.append(f"cleanup after the cell failed: {signature(exc)}")


@contextlib.contextmanager
def _tf32_disabled(on_cuda: bool):
    if not on_cuda:
        yield
        return
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def _free_device_memory() -> None:
    gc.collect()
    _release_cached_memory()


def _release_cached_memory() -> None:
    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def _seed_everything(seed: int = SEED) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    # numpy only matters if the model imported it.
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed)


# -- small helpers -------------------------------------------------------------------


def _to_float64(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(torch.float64)
    return value


def _halve_leading_dims(inputs: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """Inputs with dim 0 halved wherever it is at least 4; ``None`` if none is."""
    halved = tuple(
        x[: x.shape[0] // 2] if isinstance(x, torch.Tensor) and x.dim() and x.shape[0] >= 4 else x
        for x in inputs
    )
    changed = any(h is not x for h, x in zip(halved, inputs, strict=True))
    return halved if changed else None


def _shapes_json(inputs: tuple[Any, ...]) -> str:
    return json.dumps([list(x.shape) if isinstance(x, torch.Tensor) else None for x in inputs])


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")
