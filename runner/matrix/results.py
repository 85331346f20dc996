"""What a cell records: ``CellResult`` and ``GraphBreak``, stored as they are.

Every attempted cell ends as one ``CellResult``, whatever happened to it. A new field
is a column: it needs a migration (``runner.store.schema``) and a line in the README.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

# Statuses, in the order a reader cares about them.
PASS = "pass"
FAIL_ACCURACY = "fail_accuracy"
COMPILE_ERROR = "compile_error"
EAGER_ERROR = "eager_error"
BUILD_ERROR = "build_error"
OOM = "oom"
TIMEOUT = "timeout"
CRASH = "crash"
UNSUPPORTED = "unsupported"
STATUSES = (
    PASS,
    FAIL_ACCURACY,
    COMPILE_ERROR,
    EAGER_ERROR,
    BUILD_ERROR,
    OOM,
    TIMEOUT,
    CRASH,
    UNSUPPORTED,
)
# Statuses rerun only with --retry-failed: the process died or ran out of room,
# which may say more about the machine at the time than about the model.
RETRY_STATUSES = (CRASH, TIMEOUT, OOM)
# Statuses a torch.compile cell is triaged for (runner.triage): it failed under the compiler.
TRIAGED_STATUSES = (COMPILE_ERROR, FAIL_ACCURACY, CRASH)
# The triage_rung of a failing cell whose triage job the run's end cut off.
TRIAGE_INTERRUPTED = "triage interrupted"
# The error type of a ``timeout`` row stopped at the end of a time-limited run that it
# could not end within (runner.schedule.executor.LONG_CELL_SHARE), its own timeout not
# reached: --retry-failed reruns it only in a run without --time-limit.
OUTLASTED_RUN = "OutlastedTimeLimit"
# How an out-of-memory cell's note begins when other processes held most of the device's
# memory: the cell did not run out on its own (a parallel sweep's neighbour did it).
CROWDED = "out of memory beside other processes"
# How the note begins of a max-autotune cell that compiled with its partner's tuning
# (runner.measure.tuning): its compile time leaves autotuning out.
TUNING_REUSED = "autotuning reused"


@dataclass
class GraphBreak:
    """One distinct graph-break reason of a cell, with the user frame it came from."""

    reason: str
    user_frame: str | None = None
    # break events explain recorded for this (reason, frame)
    count: int = 1
    # the break's type (the first line of dynamo's message) and its id in torch's graph
    # break registry (torch/_dynamo/graph_break_registry.json), "unregistered" when the
    # type is not there; the registry's hints for it (JSON list)
    break_type: str | None = None
    registry_id: str | None = None
    hints: str | None = None


# A cell that compiled beside this many other cells or more (``compile_beside``, a mean
# over its compile) compiled on a crowded host: its notes and zoo-run's summary say so.
CROWDED_COMPILE = 1.0


@dataclass
class CellResult:
    """One row of the ``results`` table. Units are in the names (ms, s, mb)."""

    # identity (the cell key fields, plus where the model comes from)
    cell_key: str
    model_id: str
    suite: str
    family: str
    task: str
    size: str
    backend: str
    mode: str
    dynamic: str
    precision: str
    step: str
    batch_size: int | None
    seq_len: int | None
    device: str
    env_id: str
    status: str = CRASH
    # errors
    error_type: str | None = None
    error_phase: str | None = None
    error_signature: str | None = None
    error_message: str | None = None
    traceback_tail: str | None = None
    stderr_tail: str | None = None
    # graph capture
    graph_count: int | None = None
    graph_break_count: int | None = None
    unique_break_count: int | None = None
    # the break events explain recorded (the sum of graph_breaks.count: a break with no
    # graph after it is an event but no split), and their distinct types (JSON list)
    graph_break_events: int | None = None
    break_types: str | None = None
    recompile_count: int | None = None
    # why each recompile happened: the guard that failed (JSON list, in order)
    recompile_reasons: str | None = None
    # for a failing cell with --triage: the first rung of the backend ladder that failed
    # (dynamo, aot autograd, decompositions/partitioning, the backend itself) and what
    triage_rung: str | None = None
    triage_detail: str | None = None
    # with --triage bisect, for a cell that fails in Inductor: the subsystem Inductor's
    # compiler bisector names (backend/subsystem, pass number, its debug text)
    triage_bisect: str | None = None
    # with --triage minify, for a cell whose failure reaches a backend's graph: what
    # dynamo's minifier made of it (nodes left, time, whether the repro fails as the cell
    # did) and the repro script it wrote (Python, run with `python repro.py`)
    triage_minify: str | None = None
    triage_repro: str | None = None
    # with --trace: where the failing rung's structured trace (and tlparse's report) is
    triage_trace: str | None = None
    # torch.export (the export and aot_inductor backends): the exported graph's nodes and
    # operator calls, the input dims it took as dynamic (JSON, one list per input), and
    # for a program that did not export, what torch.export.draft_export found (JSON:
    # issue kind -> count)
    graph_nodes: int | None = None
    graph_ops: int | None = None
    dynamic_dims: str | None = None
    export_issues: str | None = None
    # the dynamic-shape probe (dynamic true/auto only)
    probe_shapes: str | None = None
    probe_ok: bool | None = None
    probe_recompiles: int | None = None
    # time
    compile_s: float | None = None
    first_call_s: float | None = None
    eager_ms: float | None = None
    eager_ms_p25: float | None = None
    eager_ms_p75: float | None = None
    compiled_ms: float | None = None
    compiled_ms_p25: float | None = None
    compiled_ms_p75: float | None = None
    eager_samples_ms: list[float] | None = None
    compiled_samples_ms: list[float] | None = None
    speedup: float | None = None
    # how far the more disturbed side's median sits above its fastest sample (1.0: not)
    timing_disturbance: float | None = None
    # one profiled call per side (runner.measure.profile): GPU busy time and its speedup
    # (empty off the GPU), kernels run (on the CPU: top-level operators), the host's part
    # of the median wall time (wall minus GPU busy), and what profiling cost (s)
    eager_gpu_ms: float | None = None
    compiled_gpu_ms: float | None = None
    gpu_speedup: float | None = None
    eager_kernels: int | None = None
    compiled_kernels: int | None = None
    eager_host_ms: float | None = None
    compiled_host_ms: float | None = None
    profile_s: float | None = None
    # memory (CUDA only: None on CPU)
    eager_peak_alloc_mb: float | None = None
    eager_peak_reserved_mb: float | None = None
    compiled_peak_alloc_mb: float | None = None
    compiled_peak_reserved_mb: float | None = None
    memory_ratio: float | None = None
    # what the accuracy reference (a float64 copy beside the model, or the fp32 model)
    # reserved at its peak: often several times either side's, and what a parallel
    # sweep must leave room for (runner.schedule.memory)
    reference_peak_reserved_mb: float | None = None
    # what the cell holds while it compiles, and what its compile reserved at its peak
    # (CUDA, torch-allocated routes only): the memory allocated just before the compile,
    # eager's cached blocks released (the weights, the inputs, whatever else stays live:
    # what a cell under way holds through most of its wall), and the peak from
    # there through the first compiled call, whose activations and Inductor's kernel
    # benchmarks run outside the lock's exclusive holds, beside neighbours' peaks
    # (docs/PERFORMANCE.md, "What still bounds an 80 GiB card")
    resident_mb: float | None = None
    compile_peak_reserved_mb: float | None = None
    # accuracy
    accuracy_ref_dtype: str | None = None
    max_abs_error: float | None = None
    rmse: float | None = None
    eager_rmse: float | None = None
    accuracy_pass: bool | None = None
    # the compared tensors that failed the rule, by name (a training step: loss, grad
    # <param>, param <param>)
    accuracy_failed: str | None = None
    # what ran: the batch that ran, where an out-of-memory retry halved the one asked
    # for (batch_size, the cell's key)
    batch_size_run: int | None = None
    input_shapes: str | None = None
    param_count: int | None = None
    precision_treatment: str | None = None
    notes: str | None = None
    wall_s: float | None = None
    # what the cell cost its GPU: the seconds its worker held the GPU alone to time its
    # calls, and to autotune (Inductor's and XLA's kernel benchmarking) while compiling
    # (runner.schedule.gpu_lock); None where its worker kept no lock
    gpu_timing_s: float | None = None
    gpu_tuning_s: float | None = None
    # how crowded the host was while the cell compiled: the mean number of other cells
    # of its run building, tracing or compiling on the same host meanwhile (0: alone;
    # runner.schedule.executor, time-weighted over its compile phases). Compiles share
    # the host's cores, so compile_s grows with it; None where no compile was seen.
    compile_beside: float | None = None
    # how crowded and how fast the host was while the cell was timed: the mean number of
    # other cells building, tracing or compiling on the same host through its timed
    # calls (as compile_beside), and the launch canary (runner.measure.timing): the
    # host's microseconds per call of a tiny operator on the cell's device, the median of
    # readings taken through the timed calls, inside the timed hold
    timing_beside: float | None = None
    host_launch_us: float | None = None
    started_at: str | None = None
    finished_at: str | None = None
    graph_breaks: list[GraphBreak] = field(default_factory=list)

    def add_note(self, note: str) -> None:
        """Append ``note`` to the row's notes ("; " between notes)."""
        self.notes = f"{self.notes}; {note}" if self.notes else note

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CellResult:
        data = dict(data)
        data["graph_breaks"] = [GraphBreak(**b) for b in data.get("graph_breaks") or []]
        return cls(**data)

    @classmethod
    def for_cell(cls, cell, **values: Any) -> CellResult:
        """An empty result carrying the identity of ``cell`` (a ``runner.matrix.cells.Cell``)."""
        return cls(
            cell_key=cell.key,
            suite=cell.spec.suite,
            family=cell.spec.family,
            task=cell.spec.task,
            **cell.key_fields(),
            **values,
        )


# The peaks a row records (MB reserved): its accuracy reference's, its compile's, and
# its two sides' in the memory pass. A cell of the model is expected to reach the
# largest of them (runner.schedule.memory, runner.store.db.peak_reserved_mb).
PEAK_COLUMNS = (
    "reference_peak_reserved_mb",
    "compile_peak_reserved_mb",
    "eager_peak_reserved_mb",
    "compiled_peak_reserved_mb",
)


def largest_peak_sql() -> str:
    """SQL for a results row's largest recorded peak (0 where it recorded none)."""
    return "greatest(" + ", ".join(f"coalesce({c}, 0)" for c in PEAK_COLUMNS) + ")"


def result_columns() -> list[str]:
    """The ``results`` columns, in order (graph breaks live in their own table)."""
    return [f.name for f in fields(CellResult) if f.name != "graph_breaks"]
