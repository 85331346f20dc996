"""The one protocol of a cell, for any backend and step.

``measure_cell`` builds the subject, takes a float64 reference, runs the step's program
eagerly, has the backend compile it, checks the compiled output, times eager and
compiled calls interleaved, reads peak memory, probes one shape change (dynamic cells)
and records the graph capture. What differs between routes is the backend's
(``runner.backends``), what one call is the step's (``runner.steps``). Every exception a
model raises ends as a ``CellResult``. Worker processes are reused across cells, so
everything global a cell touches is restored before it returns
(``runner.measure.isolation``).
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable
from typing import Any

import torch

from runner.backends import registry as backends
from runner.backends.base import Backend, Compiled, Sides
from runner.matrix.cells import Cell
from runner.matrix.clock import utc_now_iso
from runner.matrix.phases import (
    ACCURACY,
    BUILD,
    COMPILE,
    EAGER,
    INPUTS,
    PROBE,
    PROFILE,
    REFERENCE,
)
from runner.matrix.results import FAIL_ACCURACY, OOM, PASS, UNSUPPORTED, CellResult
from runner.measure import tuning, vec_isa
from runner.measure.accuracy import accuracy_tolerance, compare_outputs
from runner.measure.context import CellContext, Gate, Unsupported, no_gate
from runner.measure.failure import classify, device_memory_note, record_failure, signature
from runner.measure.isolation import (
    cold_compile_caches,
    free_device_memory,
    release_cached_memory,
    restored_process_state,
    seed_everything,
    tf32_disabled,
)
from runner.measure.subject import InputsFn, Subject
from runner.measure.tensors import MB, halve_leading_dims, host_tensors, shapes_json, to_float64
from runner.steps import registry as steps
from runner.steps.base import Step

# The reference model is a float64 copy: it must leave room for the measured model.
FP64_REF_CUDA_FREE_FRACTION = 0.25
FP64_REF_CPU_BYTES = 4 * 2**30
# Names of failing outputs kept in the row (a training step compares every parameter).
ACCURACY_FAILED_SHOWN = 20
# The longest note of an exception kept in the row's notes.
NOTE_CHARS = 300


def non_finite(outputs: list[torch.Tensor]) -> int:
    """How many values of the floating outputs are NaN or inf."""
    return sum(
        int((~t.isfinite()).sum())
        for t in outputs
        if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())
    )


def measure_cell(
    cell: Cell,
    *,
    report_phase: Callable[[str], None] = lambda phase: None,
    gate: Gate = no_gate,
    model: torch.nn.Module | None = None,
    inputs_fn: InputsFn | None = None,
    checks_only: bool = False,
    checkpoint: Callable[[CellResult], None] | None = None,
) -> CellResult:
    """Measure ``cell`` and return its result; a model failure never raises.
    ``checks_only``: stop after the accuracy check (no timing, memory, probe or breaks:
    what triage asks of each rung of its ladder).

    ``report_phase(name)`` is called as each phase starts. ``gate()`` is entered around
    the timed calls and never around compiling; ``gate(TUNING)`` around compilers that
    time kernels themselves, which yield to timing; ``gate(UNTIMED)`` around untimed GPU
    work (``runner.schedule.gpu_lock.GpuLock.held``). ``model`` and
    ``inputs_fn(batch_size, device, seq_len)`` replace ``cell.spec.build`` and
    ``cell.spec.example_inputs``.
    """
    # Inductor's machine-wide probe before the cell's clock starts: recorded once per
    # machine, reused by every cell after it (runner.measure.vec_isa). A cell of an
    # Inductor backend that builds no C++ itself may still (a graph's CPU part): it uses
    # the record if there is one; other backends never build C++.
    entry = backends.get(cell.config.backend)
    if entry.builds_cpp(cell.device, cell.config.mode):
        vec_isa.ensure()
    elif entry.cpp_on_cpu:
        vec_isa.known()
    result = CellResult.for_cell(cell, started_at=utc_now_iso())
    started = time.perf_counter()
    ctx = CellContext(cell, result, report_phase, gate, checkpoint=checkpoint)
    with cold_compile_caches() as cache_dir, restored_process_state(ctx.notes):
        # A model's other max-autotune cell of this run may have tuned its kernels already.
        shares = cache_dir is not None and not checks_only and tuning.share_key(cell) is not None
        tuned_by = tuning.adopt(cell, cache_dir) if shares else None
        if tuned_by is not None:
            ctx.note(tuning.reused_note(tuned_by))
        # Or, with --tuning-pool, what any earlier cell of the run tuned.
        pooled = tuning.adopt_pool(cell, cache_dir) if shares and tuned_by is None else None
        try:
            CellProtocol(ctx, checks_only=checks_only).run(model, inputs_fn)
        except Unsupported as outcome:
            result.status = UNSUPPORTED
            result.error_message = outcome.reason
            result.error_signature = outcome.signature
        except Exception as exc:
            record_failure(result, exc, ctx.phase)
            # What the raiser added about the failure (the zoo: whose a build failure is).
            ctx.notes.extend(str(note)[:NOTE_CHARS] for note in getattr(exc, "__notes__", ()))
            # Read before the cell's memory is freed: what it and the others held.
            if result.status == OOM and (note := device_memory_note()):
                ctx.note(note)
        if shares and tuned_by is None and result.status in (PASS, FAIL_ACCURACY):
            tuning.keep(cell, cache_dir)
            tuning.add_to_pool(cell, cache_dir)
        if pooled is not None and pooled.held:
            ctx.note(tuning.pooled_note(pooled, tuning.tuned_here(cache_dir, pooled)))
    result.notes = "; ".join(ctx.notes) or None
    result.finished_at = utc_now_iso()
    result.wall_s = time.perf_counter() - started
    return result


def backend_for(ctx: CellContext) -> Backend:
    """The cell's backend, or ``Unsupported`` with the reason it cannot run here. Its
    implementation is imported only now: XLA's would break torch.compile in a torch
    worker, whose cells never name it."""
    name = ctx.cell.config.backend
    entry = backends.get(name)
    reason = entry.unavailable_reason(ctx.cell.device)
    if reason is not None:
        raise Unsupported(reason)
    try:
        implementation = entry.load()
    except Exception as exc:
        raise Unsupported(f"the {name} route does not import here: {signature(exc)}") from None
    return implementation(ctx)


class CellProtocol:
    """The phases of one cell, in order; ``ctx.phase`` names the one running."""

    def __init__(self, ctx: CellContext, checks_only: bool = False) -> None:
        self.ctx = ctx
        self.result = ctx.result
        self.checks_only = checks_only

    def run(self, model: torch.nn.Module | None, inputs_fn: InputsFn | None) -> None:
        ctx = self.ctx
        backend = backend_for(ctx)
        step = steps.load(ctx.cell)
        with backend.session():
            subject = self.build(backend, step, model, inputs_fn)
            with step.grad_mode(), subject.fp32_treatment():
                backend.start(subject)
                # The outputs live on the host, and only here, so that they take no
                # device memory while the model is timed and its peak memory read.
                with ctx.gpu_work():
                    reference = self.reference_outputs(subject, step)
                    subject.cast()
                    program = step.program(subject.model)
                    eager, eager_once_s = self.eager_outputs(subject, step, program)
                compiled = self.compile(backend, step, subject, eager_once_s)
                try:
                    self.measure_compiled(
                        backend, step, subject, program, compiled, reference, eager, eager_once_s
                    )
                finally:
                    compiled.close()
        self.result.status = PASS if self.result.accuracy_pass else FAIL_ACCURACY

    def compile(
        self, backend: Backend, step: Step, subject: Subject, eager_once_s: float
    ) -> Compiled:
        """``backend.compile``. On CUDA, where torch's allocator holds the compiled side's
        memory, eager's cached blocks are released first (so that neighbours may use them
        through the compile, the cell's longest phase), and the row records what the cell
        holds going in (``resident_mb``) and what it reserved at its peak until the first
        compiled call had run (``compile_peak_reserved_mb``), which a compile that fails
        records too."""
        watch = subject.on_cuda and backend.torch_allocated
        if watch:
            release_cached_memory()  # eager's outputs went to the host, its garbage collected
            self.result.resident_mb = torch.cuda.memory_allocated(subject.device) / MB
            torch.cuda.reset_peak_memory_stats(subject.device)
        try:
            return backend.compile(subject, step.program(subject.model), step.outputs, eager_once_s)
        finally:
            # Read after a failed compile too (an out-of-memory one says how far it got),
            # never in place of its error: reading the allocator's counters launches
            # nothing, and should it raise all the same, the row goes without the figure.
            if watch:
                with contextlib.suppress(Exception):
                    self.result.compile_peak_reserved_mb = (
                        torch.cuda.max_memory_reserved(subject.device) / MB
                    )

    def measure_compiled(
        self,
        backend: Backend,
        step: Step,
        subject: Subject,
        program: Callable[..., Any],
        compiled: Compiled,
        reference: list[torch.Tensor],
        eager: list[torch.Tensor],
        eager_once_s: float,
    ) -> None:
        result = self.result
        result.first_call_s = compiled.first_call_s
        result.compile_s = compiled.compile_s
        self.check_accuracy(subject, step, reference, eager, compiled.first_outputs)
        if self.checks_only:
            return
        self.ctx.enter(COMPILE)
        recompiled_s = compiled.second_call(subject, eager_once_s)
        if recompiled_s is not None:
            if result.compile_s is not None:
                result.compile_s += recompiled_s
            self.ctx.note(
                f"the second call compiled again ({recompiled_s:.1f} s, counted in "
                "compile_s): the first call changed what the compiler guards on "
                "(recompile_reasons names the guard)"
            )
        sides = Sides(self.ctx, subject, program, compiled)
        backend.before_timing(sides)
        with self.ctx.gate():
            backend.time(sides)
            self.profile(backend, sides)
        backend.measure_memory(sides)
        self.probe_shape_change(subject, compiled)
        result.recompile_count = compiled.graphs() - compiled.first_graphs
        self.keep_partial()
        compiled.record_graph_breaks(self.ctx)

    def keep_partial(self) -> None:
        """Everything but the graph breaks is measured: kept, so that a cell stopped
        while its breaks are captured (dynamo's explain traces the model once more, which
        can take as long as the compile) still gets its row."""
        if self.ctx.checkpoint is None:
            return
        partial = copy.copy(self.result)
        partial.status = PASS if partial.accuracy_pass else FAIL_ACCURACY
        partial.notes = "; ".join(self.ctx.notes) or None
        self.ctx.checkpoint(partial)

    def profile(self, backend: Backend, sides: Sides) -> None:
        """One profiled call per side (``runner.measure.profile``), in the timed hold: a
        profile that fails costs the cell its GPU-time fields, not its row."""
        self.ctx.enter(PROFILE)
        try:
            backend.profile(sides)
        except Exception as exc:
            self.ctx.note(f"profile failed, no GPU time: {signature(exc)}")

    # -- the subject ---------------------------------------------------------------------

    def build(
        self,
        backend: Backend,
        step: Step,
        model: torch.nn.Module | None,
        inputs_fn: InputsFn | None,
    ) -> Subject:
        ctx = self.ctx
        ctx.enter(BUILD)
        subject = Subject.build(ctx.cell, model=model, treatment=backend.treatment)
        ctx.notes.extend(subject.build_notes)
        step.prepare(subject.model)
        ctx.notes.extend(step.notes(subject.model))
        self.result.param_count = subject.param_count()
        self.result.precision_treatment = backend.precision_treatment(subject)
        ctx.phase = INPUTS
        subject.load_inputs(inputs_fn)
        ctx.notes.extend(subject.input_notes())
        self.result.input_shapes = shapes_json(subject.inputs)
        self.result.batch_size_run = ctx.cell.run_batch_size
        return subject

    # -- reference and eager -------------------------------------------------------------

    def reference_outputs(self, subject: Subject, step: Step) -> list[torch.Tensor]:
        """A float64 copy's outputs where it fits (TF32 off), else the fp32 model's; the
        fp32 model's too where the float64 copy's hold NaN or inf that they do not (the
        model fails at float64 itself: Canine builds its attention mask in float32 from
        float64's smallest value, and 0 x -inf is NaN everywhere)."""
        self.ctx.enter(REFERENCE)
        if subject.on_cuda:
            release_cached_memory()
            torch.cuda.reset_peak_memory_stats(subject.device)
        try:
            return self._reference_outputs(subject, step)
        finally:
            if subject.on_cuda:
                self.result.reference_peak_reserved_mb = (
                    torch.cuda.max_memory_reserved(subject.device) / MB
                )

    def _reference_outputs(self, subject: Subject, step: Step) -> list[torch.Tensor]:
        with tf32_disabled(subject.on_cuda):
            if self.fp64_reference_fits(subject):
                try:
                    outputs = self.fp64_outputs(subject, step)
                except Exception as exc:
                    self.ctx.note(f"fp64 reference failed, fp32 used: {signature(exc)}")
                else:
                    if not (bad := non_finite(outputs)):
                        self.result.accuracy_ref_dtype = "fp64"
                        return outputs
                    fp32 = self.fp32_outputs(subject, step)
                    if (fp32_bad := non_finite(fp32)) >= bad:
                        self.result.accuracy_ref_dtype = "fp64"
                        return outputs
                    self.ctx.note(
                        f"fp64 reference not finite ({bad} values NaN or inf, fp32's "
                        f"{fp32_bad}): fp32 used"
                    )
                    self.result.accuracy_ref_dtype = "fp32"
                    return fp32
                free_device_memory()
            self.result.accuracy_ref_dtype = "fp32"
            return self.fp32_outputs(subject, step)

    def fp32_outputs(self, subject: Subject, step: Step) -> list[torch.Tensor]:
        seed_everything()
        return host_tensors(step.outputs(step.program(subject.model)(*subject.inputs)))

    def fp64_reference_fits(self, subject: Subject) -> bool:
        tensors = [*subject.model.parameters(), *subject.model.buffers()]
        fp64_bytes = 8 * sum(t.numel() for t in tensors if t.is_floating_point())
        if subject.on_cuda:
            release_cached_memory()  # garbage was collected before the hold
            free_bytes, _ = torch.cuda.mem_get_info(subject.device)
            return fp64_bytes <= FP64_REF_CUDA_FREE_FRACTION * free_bytes
        return fp64_bytes <= FP64_REF_CPU_BYTES

    def fp64_outputs(self, subject: Subject, step: Step) -> list[torch.Tensor]:
        model = copy.deepcopy(subject.model).to(torch.float64)
        inputs = tuple(to_float64(x) for x in subject.inputs)
        try:
            seed_everything()
            return host_tensors(step.outputs(step.program(model)(*inputs)))
        finally:
            del model, inputs
            release_cached_memory()  # any cycles of the copy: collected after the hold

    def eager_outputs(
        self, subject: Subject, step: Step, program: Callable[..., Any]
    ) -> tuple[list[torch.Tensor], float]:
        """The eager outputs, and the wall time of one more eager call (each call in an
        autocast region of its own, as ``Sides`` calls: its casts not kept from the
        other)."""
        self.ctx.enter(EAGER)
        with subject.autocast():
            seed_everything()
            outputs = host_tensors(step.outputs(program(*subject.inputs)))
        subject.sync()
        start = time.perf_counter()
        with subject.autocast():
            program(*subject.inputs)
        subject.sync()
        once_s = time.perf_counter() - start
        return outputs, once_s

    # -- accuracy and the shape probe ----------------------------------------------------

    def check_accuracy(
        self,
        subject: Subject,
        step: Step,
        reference: list[torch.Tensor],
        eager: list[torch.Tensor],
        compiled: list[torch.Tensor],
    ) -> None:
        self.ctx.enter(ACCURACY)
        tol, multiplier = accuracy_tolerance(subject.precision, subject.device.type)
        accuracy = compare_outputs(reference, eager, compiled, tol=tol, multiplier=multiplier)
        result = self.result
        result.accuracy_pass = accuracy.passed
        result.max_abs_error = accuracy.max_abs_error
        result.rmse = accuracy.rmse
        result.eager_rmse = accuracy.eager_rmse
        if accuracy.failure:
            self.ctx.note(f"accuracy: {accuracy.failure}")
        if accuracy.failed:
            names = step.output_names(len(compiled))
            failed = [names[i] if i < len(names) else f"output {i}" for i in accuracy.failed]
            shown = failed[:ACCURACY_FAILED_SHOWN]
            more = len(failed) - len(shown)
            result.accuracy_failed = ", ".join(shown) + (f" and {more} more" if more else "")

    def probe_shape_change(self, subject: Subject, compiled: Compiled) -> None:
        """Dynamic cells: one call on inputs of another shape, and what it recompiled."""
        if self.ctx.cell.config.dynamic not in ("true", "auto"):
            return
        hold = self.ctx.gate(compiled.probe_hold) if compiled.probe_hold else None
        with hold or contextlib.nullcontext():
            self._probe(subject, compiled)

    def _probe(self, subject: Subject, compiled: Compiled) -> None:
        ctx, result = self.ctx, self.result
        ctx.enter(PROBE)
        try:
            inputs = self.probe_inputs(subject)
        except Exception as exc:
            ctx.note(f"shape probe skipped, its inputs failed: {signature(exc)}")
            return
        if inputs is None:
            ctx.note("shape probe skipped: no input dimension can be halved")
            return
        result.probe_shapes = shapes_json(inputs)
        graphs_before = compiled.graphs()
        try:
            with subject.autocast():
                compiled(inputs)
            result.probe_ok = True
        except Exception as exc:
            result.probe_ok = False
            _, stage = classify(exc, PROBE)
            ctx.note(f"shape probe failed ({stage}): {signature(exc)}")
        result.probe_recompiles = compiled.graphs() - graphs_before

    def probe_inputs(self, subject: Subject) -> tuple[Any, ...] | None:
        """Inputs with the batch halved (at least 2: 1 would be specialized) and the
        sequence halved; ``None`` when that changes no shape."""
        cell = self.ctx.cell
        batch, seq = cell.run_batch_size, cell.seq_len
        if batch is None:
            return halve_leading_dims(subject.inputs)
        probe_batch = max(2, batch // 2)
        probe_seq = max(2, seq // 2) if seq else seq
        if (probe_batch, probe_seq) == (batch, seq):
            return None
        return subject.inputs_for(probe_batch, probe_seq)
