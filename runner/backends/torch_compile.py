"""``torch.compile`` with the backends dynamo ships: inductor (and its modes), eager,
aot_eager, cudagraphs. Graph breaks are counted as ``torch._dynamo.explain`` counts them,
with their reasons and user frames."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch._dynamo.utils import counters

from runner.backends.base import Backend, Compiled
from runner.backends.registry import base_mode, mode_options
from runner.matrix.axes import NO_MODE
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
        # The first call compiled and ran once: its compiling is the rest.
        assert compiled_module.first_call_s is not None
        compiled_module.compile_s = compiled_module.first_call_s - eager_once_s
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
        if self.first_graphs == 0:
            reasons = " | ".join(dict.fromkeys(map(summarize_reason, self.unsupported_events)))
            ctx.note(f"dynamo captured no graph, the model ran eagerly: {reasons}")
            return
        # Every graph beyond the program's separately compiled parts is a split.
        parts = compiled_parts(self.program)
        result.graph_break_count = max(0, self.first_graphs - parts)
        result.unique_break_count = 0
        events = sum(self.break_events.values())
        if events != result.graph_break_count:
            ctx.note(
                f"dynamo counted {events} graph-break event(s) for "
                f"{result.graph_break_count} graph split(s)"
            )
        if result.graph_break_count:
            self.explain_graph_breaks(ctx)

    def explain_graph_breaks(self, ctx: CellContext) -> None:
        # explain resets dynamo, dropping the compiled code: it must come last.
        ctx.enter(BREAKS)
        result = ctx.result
        try:
            target, args = explain_target(self.program, self.subject.inputs)
            with self.subject.autocast():
                explained = torch._dynamo.explain(target)(*args)
        except Exception as exc:
            ctx.note(f"explain failed, break frames unknown: {signature(exc)}")
            result.graph_breaks = [
                GraphBreak(summarize_reason(reason), None, count)
                for reason, count in self.break_events.items()
            ]
        else:
            if explained.graph_break_count != result.graph_break_count:
                ctx.note(
                    f"explain found {explained.graph_break_count} graph break(s), "
                    f"the compiled run {result.graph_break_count}"
                )
                result.graph_break_count = explained.graph_break_count
            result.graph_breaks = merge_breaks(explained.break_reasons)
        finally:
            torch._dynamo.reset()
        result.unique_break_count = len({b.reason for b in result.graph_breaks})


def summarize_reason(reason: str) -> str:
    """A graph-break reason in one line: its type and explanation, without the hints,
    developer context and links that follow."""
    return truncate(headline(reason), REASON_CHARS)


def merge_breaks(reasons: Iterable[Any]) -> list[GraphBreak]:
    """One ``GraphBreak`` per distinct (reason, user frame) of explain's break reasons."""
    merged: dict[tuple[str, str | None], GraphBreak] = {}
    for reason in reasons:
        key = (summarize_reason(reason.reason), user_frame(reason.user_stack))
        if key in merged:
            merged[key].count += 1
        else:
            merged[key] = GraphBreak(*key)
    return list(merged.values())


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
