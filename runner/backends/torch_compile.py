"""``torch.compile`` with the backends dynamo ships: inductor (and its modes), eager,
aot_eager, cudagraphs. Graph breaks are counted as ``torch._dynamo.explain`` counts them,
with their reasons and user frames."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch._dynamo.exc import Unsupported
from torch._dynamo.utils import clear_compilation_metrics, counters, get_compilation_metrics

from runner.backends.base import Backend, Compiled
from runner.matrix import break_types
from runner.matrix.axes import NO_MODE, base_mode, mode_options
from runner.matrix.phases import BREAKS, COMPILE
from runner.matrix.results import GraphBreak
from runner.matrix.text import truncate
from runner.measure.context import CellContext
from runner.measure.failure import headline, signature
from runner.measure.subject import Subject
from runner.steps.base import compile_program, compiled_parts, explain_target

# Inductor modes whose compiled code replays CUDA graphs, which need a step marker per call.
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")
REASON_CHARS = 300
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


def dynamic_arg(dynamic: str) -> bool | None:
    """The value passed to ``torch.compile(dynamic=...)`` for a cell's dynamic axis."""
    return {"false": False, "true": True, "auto": None}[dynamic]


class TorchCompile(Backend):
    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """Inductor's configs the cell's mode carries (``default+freezing``), for the
        whole cell: compiles happen lazily, at the first call and at recompiles."""
        options = mode_options(self.config.mode)
        if not options:
            yield
            return
        import torch._inductor.config as inductor_config

        with inductor_config.patch(dict.fromkeys(options, True)):
            yield

    def compile(
        self,
        subject: Subject,
        program: torch.nn.Module,
        outputs: Callable[[Any], list],
        eager_once_s: float,
    ) -> Compiled:
        self.ctx.enter(COMPILE)
        config = self.config
        base = base_mode(config.mode)
        mode = None if base in (NO_MODE, "default") else base
        compiled = compile_program(
            program,
            lambda part: torch.compile(
                part, backend=config.backend, mode=mode, dynamic=dynamic_arg(config.dynamic)
            ),
        )
        uses_cudagraphs = config.backend == "cudagraphs" or (
            config.backend == "inductor" and base in CUDAGRAPH_MODES
        )
        compiled_module = CompiledModule(
            self.ctx, subject, program, compiled, uses_cudagraphs, outputs
        )
        # The first call compiled and ran once: its compiling is the rest. Never below
        # zero (as second_call's): with little to compile (the eager backend on a small
        # graph) a busy host can make the one eager call the longer, and a negative
        # compile time means nothing (TimmBackbone, CPU, beside another worker: -0.7 s).
        assert compiled_module.first_call_s is not None
        compiled_module.compile_s = max(0.0, compiled_module.first_call_s - eager_once_s)
        return compiled_module


class CompiledModule(Compiled):
    """A module compiled by dynamo; its first call runs (and times) on construction."""

    def __init__(
        self,
        ctx: CellContext,
        subject: Subject,
        program: torch.nn.Module,
        compiled: Callable[..., Any],
        uses_cudagraphs: bool,
        outputs: Callable[[Any], list],
    ) -> None:
        self.ctx = ctx
        self.subject = subject
        self.program = program
        self.compiled = compiled
        self.uses_cudagraphs = uses_cudagraphs
        with subject.autocast():
            self.first_call(subject, outputs)
        self.first_graphs = self.graphs()
        # dynamo's counters right after the first compiled call
        self.break_events = dict(counters["graph_break"])
        self.unsupported_events = dict(counters["unimplemented"])

    def __call__(self, inputs: tuple[Any, ...]) -> Any:
        if self.uses_cudagraphs:
            torch.compiler.cudagraph_mark_step_begin()
        return self.compiled(*inputs)

    def run(self) -> Any:
        return self(self.subject.inputs)

    def graphs(self) -> int:
        return counters["stats"]["unique_graphs"]

    def record_graph_breaks(self, ctx: CellContext) -> None:
        """Graph and break counts as ``torch._dynamo.explain`` reports them.

        explain counts graph breaks as captured graphs minus one. Dynamo's
        ``graph_break`` counter counts break events instead, which differ: a break with
        no graph before or after it (a ``print`` first or last in ``forward``) splits
        nothing, and a data-dependent branch is counted as ``unimplemented``. The
        stored count follows explain; a differing event count goes to the notes.
        """
        result = ctx.result
        result.graph_count = self.first_graphs
        self.record_recompile_reasons(ctx)
        if self.first_graphs == 0:
            reasons = " | ".join(dict.fromkeys(map(summarize_reason, self.unsupported_events)))
            ctx.note(f"dynamo captured no graph, the model ran eagerly: {reasons}")
            return
        # Every graph beyond the program's separately compiled parts is a split.
        parts = compiled_parts(self.program)
        result.graph_break_count = max(0, self.first_graphs - parts)
        result.unique_break_count = 0
        result.graph_break_events = 0
        if result.graph_break_count or sum(self.break_events.values()):
            self.explain_graph_breaks(ctx)

    def explain_graph_breaks(self, ctx: CellContext) -> None:
        # explain resets dynamo, dropping the compiled code: it must come last.
        ctx.enter(BREAKS)
        result = ctx.result
        try:
            target, args = explain_target(self.program, self.subject.inputs)
            clear_compilation_metrics()  # the recompile reasons were read before
            with self.subject.autocast():
                explained = torch._dynamo.explain(target)(*args)
        except Exception as exc:
            ctx.note(f"explain failed, break frames unknown: {signature(exc)}")
            result.graph_breaks = [
                graph_break(reason, None, count) for reason, count in self.break_events.items()
            ]
        else:
            if explained.graph_break_count != result.graph_break_count:
                ctx.note(
                    f"the compiled run captured {self.first_graphs} graph(s), explain "
                    f"{explained.graph_count}: the break count is explain's"
                )
                result.graph_break_count = explained.graph_break_count
            skipped = skipped_frames(get_compilation_metrics())
            if skipped:
                frames = sum(b.count for b in skipped)
                ctx.note(
                    f"dynamo gave up on {frames} frame(s) whole and ran them eagerly, "
                    "compiling the calls inside them as frames of their own: explain "
                    "lists no reason for those splits; the break rows carry the "
                    "construct it gave up on"
                )
            result.graph_breaks = merge_breaks(explained.break_reasons) + skipped
        finally:
            torch._dynamo.reset()
        result.unique_break_count = len({b.reason for b in result.graph_breaks})
        result.graph_break_events = sum(b.count for b in result.graph_breaks)
        types = sorted({b.break_type for b in result.graph_breaks if b.break_type})
        result.break_types = json.dumps(types) if types else None

    def record_recompile_reasons(self, ctx: CellContext) -> None:
        """The guard that failed for each recompile of this cell (dynamo's compilation
        metrics, cleared at the cell's start)."""
        reasons = [
            truncate(metric.recompile_reason, REASON_CHARS)
            for metric in get_compilation_metrics()
            if getattr(metric, "recompile_reason", None)
        ]
        if reasons:
            ctx.result.recompile_reasons = json.dumps(reasons)


def summarize_reason(reason: str) -> str:
    """A graph-break reason in one line: its type and explanation, without the hints,
    developer context and links that follow."""
    return truncate(headline(reason), REASON_CHARS)


def graph_break(reason: str, frame: str | None, count: int = 1) -> GraphBreak:
    """A break row of a reason as dynamo wrote it: its summary, type and registry id."""
    break_type, registry_id, hints = break_types.classify(reason)
    return GraphBreak(summarize_reason(reason), frame, count, break_type, registry_id, hints)


def merge_breaks(reasons: Iterable[Any]) -> list[GraphBreak]:
    """One ``GraphBreak`` per distinct (reason, user frame) of explain's break reasons,
    its count the events explain recorded for it."""
    return _merged((reason.reason, user_frame(reason.user_stack)) for reason in reasons)


def skipped_frames(metrics: Iterable[Any]) -> list[GraphBreak]:
    """Break rows for the frames dynamo could not compile at all (an unsupported
    construct where it cannot split the graph, such as a data-dependent branch inside a
    loop: HF's ``layerdrop`` in training). Dynamo runs such a frame eagerly and compiles
    each call inside it as a new frame, so the frame splits the graph, but explain lists
    no break reason for it. One row per (reason, site), its count the frames skipped."""
    return _merged(
        (metric.fail_reason, _failure_site(metric))
        for metric in metrics
        if _is_unsupported(getattr(metric, "fail_type", None)) and metric.fail_reason
    )


def _merged(events: Iterable[tuple[str, str | None]]) -> list[GraphBreak]:
    merged: dict[tuple[str, str | None], GraphBreak] = {}
    for reason, frame in events:
        key = (summarize_reason(reason), frame)
        if key in merged:
            merged[key].count += 1
        else:
            merged[key] = graph_break(reason, frame)
    return list(merged.values())


def _failure_site(metric: Any) -> str | None:
    """``file:line`` of the user code that stopped dynamo in a frame it gave up on."""
    filename = getattr(metric, "fail_user_frame_filename", None) or metric.co_filename
    lineno = getattr(metric, "fail_user_frame_lineno", None) or metric.co_firstlineno
    return f"{short_path(filename)}:{lineno}" if filename else None


def _is_unsupported(fail_type: str | None) -> bool:
    """Whether a compilation metric's ``fail_type`` names dynamo's ``Unsupported`` or a
    subclass of it (a graph-break kind), not an internal error or a backend failure."""
    kind = getattr(torch._dynamo.exc, fail_type, None) if fail_type else None
    return isinstance(kind, type) and issubclass(kind, Unsupported)


def user_frame(stack: list[Any] | None) -> str | None:
    """``file:line in function`` of the innermost frame outside torch (else the innermost)."""
    if not stack:
        return None
    frame = next((f for f in reversed(stack) if not f.filename.startswith(_TORCH_DIR)), stack[-1])
    return f"{short_path(frame.filename)}:{frame.lineno} in {frame.name}"


def short_path(path: str) -> str:
    """Installed packages by their path inside site-packages, the same on every machine."""
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path
