"""The interface of a step (``runner.steps.registry`` lists the implementations)."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import torch

from runner.matrix.cells import Cell


class Step(ABC):
    """What one call of a cell is. The cell protocol (``runner.cell``) runs the program
    eagerly, has the backend compile it, and compares the outputs ``outputs`` picks."""

    name: str

    def __init__(self, cell: Cell) -> None:
        self.cell = cell

    @abstractmethod
    def prepare(self, model: torch.nn.Module) -> None:
        """Put a freshly built model in the mode the step runs it in."""

    @abstractmethod
    def grad_mode(self) -> contextlib.AbstractContextManager[Any]:
        """Around every call of the program, eager, compiled and reference alike."""

    @abstractmethod
    def program(self, model: torch.nn.Module) -> torch.nn.Module:
        """The module one call runs, called with the cell's inputs as positional
        arguments: what a backend compiles and the eager side calls. Each call of this
        gives the side that asks its own program (a step that changes state, training,
        gives each its own copy of the model)."""

    @abstractmethod
    def outputs(self, value: Any) -> list[torch.Tensor]:
        """The tensors of one call's return value that are compared for accuracy."""

    def output_names(self, count: int) -> list[str]:
        """Names of the compared tensors, in order (which ones failed goes in the row)."""
        return [f"output {index}" for index in range(count)]

    def notes(self, model: torch.nn.Module) -> list[str]:
        """What the cell's notes should say about how the step runs ``model``."""
        return []


def eager_draws() -> contextlib.AbstractContextManager[Any]:
    """Inductor draws random numbers as eager draws them (``fallback_random``): with
    every side's call started from one seed, dropout masks (training) and random
    masking or noise (ViTMAE, VITS in eval mode) are the same draw on both sides of the
    accuracy check. A program that draws nothing compiles to the same code either way."""
    import torch._inductor.config as inductor_config

    return inductor_config.patch(fallback_random=True)


# A program may say which of its parts a compiler compiles (a training step: its model
# and loss, not its backward call or, unless asked, its optimizer); a plain module is
# compiled whole. Backends that compile a program call these.


def compile_program(program: Any, compile_part: Callable[[Any], Any]) -> Callable[..., Any]:
    """``program`` with ``compile_part`` applied where it says (the whole of it by
    default): what a torch.compile backend calls as the compiled side."""
    parts = getattr(program, "compile_parts", None)
    return parts(compile_part) if parts is not None else compile_part(program)


def compiled_parts(program: Any) -> int:
    """How many separately compiled parts the program has (graphs beyond them are
    splits: graph breaks)."""
    return getattr(program, "part_count", 1)


def explain_target(program: Any, inputs: tuple[Any, ...]) -> tuple[Callable[..., Any], tuple]:
    """What ``torch._dynamo.explain`` traces for the program's graph breaks, and with
    which arguments: the part a compiler compiles first."""
    target = getattr(program, "explain_target", None)
    return target(inputs) if target is not None else (program, inputs)
