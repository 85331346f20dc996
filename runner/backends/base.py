"""The interface of a backend, with the default of each part (torch.compile's).

The cell protocol (``runner.cell``) builds the subject, takes the fp64 reference and
the eager outputs, and then asks its backend to ``compile`` the step's program; what it
gets back (``Compiled``) is called, counted and timed. A backend overrides what its
route does differently: how the program is compiled and called (always), and where
needed how the precision is treated, how the two sides are timed, how peak memory is
read and what the graph capture was.
"""

from __future__ import annotations

import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from runner.backends import registry
from runner.matrix.phases import COMPILED_RUN, EAGER, MEMORY, TIMING, WARM_UP
from runner.measure.context import CellContext
from runner.measure.isolation import seed_everything
from runner.measure.profile import profile_call, record_profiles
from runner.measure.subject import Subject, Treatment
from runner.measure.tensors import host_tensors
from runner.measure.timing import (
    HELD_WARMUPS,
    HostCanary,
    TimingPlan,
    event_timer,
    plan_for,
    record_timing,
    repeat,
    warm_up,
    window_note,
)


class Compiled(ABC):
    """A compiled program: called by the protocol, and asked what its compiler did."""

    # Host copies of the first compiled call's compared outputs.
    first_outputs: list[torch.Tensor]
    # Wall time of the first compiled call, and of it the part that was compiling.
    first_call_s: float | None = None
    compile_s: float | None = None
    # Graphs compiled by the first call (before any recompile).
    first_graphs: int = 0
    # The kind of GPU-lock hold a call on new shapes needs (a new XLA compile autotunes).
    probe_hold: str | None = None

    @abstractmethod
    def run(self) -> Any:
        """One call on the subject's inputs, as fast as the route allows (the timed call)."""

    @abstractmethod
    def __call__(self, inputs: tuple[Any, ...]) -> Any:
        """One call on other inputs (the shape probe)."""

    @abstractmethod
    def graphs(self) -> int:
        """Graphs compiled so far in this cell (recompiles, the shape probe)."""

    @abstractmethod
    def record_graph_breaks(self, ctx: CellContext) -> None:
        """Graph and break counts (and reasons) into ``ctx.result``; runs last."""

    def first_call(self, subject: Subject, outputs: Callable[[Any], list]) -> None:
        """The first call on the subject's inputs, timed (``first_call_s``; seeded, the
        device synchronized around it), its compared outputs copied to the host."""
        seed_everything()
        subject.sync()
        start = time.perf_counter()
        value = self(subject.inputs)
        subject.sync()
        self.first_call_s = time.perf_counter() - start
        self.first_outputs = host_tensors(outputs(value))

    def second_call(self, subject: Subject, eager_once_s: float) -> float | None:
        """A second call on the subject's inputs, before the warm-up. A program whose first
        call changed what its compiler guards on (HF's classification losses set
        ``config.problem_type`` on their first call) compiles again here, in phase
        compile and outside any GPU hold, not in the warm-up's shared hold of the lock.
        Returns that compile's seconds (the call minus one eager call), or None when
        nothing compiled."""
        before = self.graphs()
        with subject.autocast():
            subject.sync()
            start = time.perf_counter()
            self.run()
            subject.sync()
        if self.graphs() == before:
            return None
        return max(0.0, time.perf_counter() - start - eager_once_s)

    def close(self) -> None:  # noqa: B027 - optional: most hold nothing beyond the cell
        """Free what the compiled program holds beyond the cell (called after it)."""


@dataclass
class Sides:
    """The two sides a cell compares, one call each. Each call sets the phase a failure
    in it is classified by (eager code and compiled code fail differently), and enters
    the subject's autocast itself: ``torch.autocast`` keeps each weight's cast until its
    outermost region exits, so a region around many calls would run eager without its
    casts after the first call (a compiled program casts in its graph every time) and
    let one side's casts serve the other's profile and peak memory. A user's loop
    enters autocast per call, as PyTorch's harness and timm's benchmark do; so do the
    cells (benchmarks/autocast_scope.py measures the difference)."""

    ctx: CellContext
    subject: Subject
    program: Callable[..., Any]
    compiled: Compiled

    def eager(self) -> Any:
        self.ctx.phase = EAGER
        with self.subject.autocast():
            return self.program(*self.subject.inputs)

    def compiled_run(self) -> Any:
        self.ctx.phase = COMPILED_RUN
        with self.subject.autocast():
            return self.compiled.run()

    def pair(self) -> None:
        self.eager()
        self.compiled_run()
        self.subject.sync()


class Backend(ABC):
    """One backend's route for a cell (constructed inside the worker, per cell)."""

    # Whether the compiled side's device memory is torch's allocator's (what its
    # statistics read around the compile); not so for JAX's buffers.
    torch_allocated: bool = True

    def __init__(self, ctx: CellContext) -> None:
        self.ctx = ctx
        self.config = ctx.cell.config
        # How a bf16/fp16 cell's precision is applied (its registry entry says).
        self.treatment: Treatment = registry.get(self.config.backend).treatment

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """Around the whole measurement of the cell: what the route sets up and takes
        down (it may raise ``runner.measure.context.Unsupported``)."""
        yield

    def precision_treatment(self, subject: Subject) -> str:
        return subject.treatment_label()

    def start(self, subject: Subject) -> None:  # noqa: B027 - optional, most start nothing
        """Before the reference: work that may overlap the rest of the cell's start."""

    @abstractmethod
    def compile(
        self,
        subject: Subject,
        program: torch.nn.Module,
        outputs: Callable[[Any], list],
        eager_once_s: float,
    ) -> Compiled:
        """Compile ``program`` and make the first call on the subject's inputs (under the
        subject's precision): ``outputs`` picks the step's compared tensors of a call's
        value, ``eager_once_s`` is one eager call's wall time (what of the first call
        was not compiling, where the compiler cannot say). The phases it enters are its
        own (``ctx.enter``)."""

    # -- timing, untimed work first ----------------------------------------------------

    def before_timing(self, sides: Sides) -> None:
        """Most of the warm-up before timing, as untimed GPU work: it holds the lock
        shared, so that the timed hold (exclusive, the scarce resource of a parallel
        sweep) is not spent on it."""
        with self.ctx.gpu_work():
            self.ctx.enter(WARM_UP)
            warm_up(sides.pair)

    def time(self, sides: Sides) -> None:
        """Timed calls, inside the timed hold: eager and compiled interleaved call by
        call, after a few untimed pairs with the GPU alone."""
        self.ctx.enter(TIMING)
        subject = sides.subject
        timer = event_timer(subject.device.type)
        warm_up(sides.pair, calls=HELD_WARMUPS, seconds=0.0)
        canary = HostCanary(subject.device)

        def pair() -> tuple[float, float]:
            canary.tick()
            return timer(sides.eager), timer(sides.compiled_run)

        pairs = repeat(pair, self.timing_plan(subject))
        canary.record(self.ctx.result)
        record_timing(self.ctx.result, [e for e, _ in pairs], [c for _, c in pairs])

    def timing_plan(self, subject: Subject) -> TimingPlan:
        """How many pairs to time: the protocol's plan, or the window the run asked for
        (``zoo-run --timing-s``), which the row's notes then name."""
        window = subject.cell.timing_s
        if note := window_note(subject.device.type, window):
            self.ctx.note(note)
        return plan_for(subject.device.type, window)

    def profile(self, sides: Sides) -> None:
        """One profiled call of each side, inside the timed hold, after timing."""
        subject = sides.subject
        eager = profile_call(sides.eager, subject.sync, subject.on_cuda)
        compiled = profile_call(sides.compiled_run, subject.sync, subject.on_cuda)
        record_profiles(self.ctx.result, eager, compiled)

    def measure_memory(self, sides: Sides) -> None:
        """Peak memory of one call of each side (CUDA only)."""
        subject = sides.subject
        if not subject.on_cuda:
            return
        self.ctx.enter(MEMORY)
        with self.ctx.gpu_work():
            eager = subject.peak_memory_mb(sides.eager)
            compiled = subject.peak_memory_mb(sides.compiled_run)
        result = self.ctx.result
        # CUDA graph pools belong to the compiled side: their blocks free between replays
        # are the graphs' activations (and what warm-up and other graphs left there),
        # held for the compiled model and missed by the allocated peak; the pools also
        # sit in eager's reserved memory (taken out there). docs/PERFORMANCE.md, "CUDA
        # graphs and peak memory".
        compiled_alloc = compiled.allocated + compiled.pool_idle
        result.eager_peak_alloc_mb = eager.allocated
        result.eager_peak_reserved_mb = max(eager.reserved - eager.pool_reserved, 0.0)
        result.compiled_peak_alloc_mb = compiled_alloc
        result.compiled_peak_reserved_mb = compiled.reserved
        result.memory_ratio = compiled_alloc / eager.allocated if eager.allocated else None
        if compiled.pool_reserved:
            self.ctx.note(
                f"CUDA graph pools hold {compiled.pool_reserved:.0f} MB, "
                f"{compiled.pool_idle:.0f} MB of it free between replays (the graphs' "
                f"activations): counted in the compiled peak beside the allocated "
                f"{compiled.allocated:.0f} MB"
            )
