"""The interface of a step (``runner.steps.registry`` lists the implementations)."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from typing import Any

import torch


class Step(ABC):
    """What one call of a cell is. The cell protocol (``runner.cell``) runs the program
    eagerly, has the backend compile it, and compares the outputs ``outputs`` picks."""

    name: str

    @abstractmethod
    def prepare(self, model: torch.nn.Module) -> None:
        """Put a freshly built model in the mode the step runs it in."""

    @abstractmethod
    def grad_mode(self) -> contextlib.AbstractContextManager[Any]:
        """Around every call of the program, eager, compiled and reference alike."""

    @abstractmethod
    def program(self, model: torch.nn.Module) -> torch.nn.Module:
        """The module one call runs, called with the cell's inputs as positional
        arguments: what a backend compiles and the eager side calls."""

    @abstractmethod
    def outputs(self, value: Any) -> list[torch.Tensor]:
        """The tensors of one call's return value that are compared for accuracy."""
