"""What the cell protocol shares with its plug-ins (backends, steps): the cell, the
result being filled, its notes, the phase it is in, and the GPU's lock."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from runner.matrix.cells import Cell
from runner.matrix.holds import TIMING, UNTIMED
from runner.matrix.phases import BUILD
from runner.matrix.results import CellResult

Gate = Callable[..., contextlib.AbstractContextManager[Any]]


def no_gate(kind: str = TIMING) -> contextlib.AbstractContextManager[Any]:
    """The GPU's lock where there is none: nothing to wait for."""
    return contextlib.nullcontext()


class Unsupported(Exception):
    """The cell cannot run here (a route that does not import, a device jax lacks): its
    row is ``unsupported`` with this reason, not an error."""

    def __init__(self, reason: str, signature: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.signature = signature or f"unsupported: {reason}"


@dataclass
class CellContext:
    """One cell being measured.

    ``report_phase(name)`` tells the parent which phase runs (progress, crash rows);
    ``phase`` is the one a failure is classified by, which may change without a report
    (each side of a timed pair). ``gate(kind)`` holds the GPU's lock as ``kind``
    (``runner.matrix.holds``). ``checkpoint(result)`` keeps a finished measurement
    before the cell's optional last phase, so that a worker stopped there still leaves
    its row (``runner.schedule.worker.partial_path``)."""

    cell: Cell
    result: CellResult
    report_phase: Callable[[str], None] = lambda phase: None
    gate: Gate = no_gate
    checkpoint: Callable[[CellResult], None] | None = None
    notes: list[str] = field(default_factory=list)
    phase: str = BUILD

    def enter(self, phase: str) -> None:
        self.phase = phase
        self.report_phase(phase)

    def note(self, text: str) -> None:
        self.notes.append(text)

    @contextlib.contextmanager
    def gpu_work(self) -> Iterator[None]:
        """Around untimed steps that run the model on the GPU (the fp64 reference, the
        eager outputs, the warm-up, the peak-memory pass): a shared hold of the GPU's
        lock, so that they run beside each other but never beside a neighbour's timing
        or tuning. Python's garbage is collected before and after, outside the hold: a
        collection takes 0.1-0.2 s of CPU in a process that has compiled, which the
        lock should not be held for."""
        gc.collect()
        with self.gate(UNTIMED):
            yield
        gc.collect()
