"""Inference: the model in eval mode under ``no_grad``, one forward call, every tensor
it returns compared."""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from runner.measure.tensors import flatten_tensors
from runner.steps.base import Step
from runner.steps.registry import INFER


class Infer(Step):
    name = INFER

    def prepare(self, model: torch.nn.Module) -> None:
        model.eval()

    def grad_mode(self) -> contextlib.AbstractContextManager[Any]:
        return torch.no_grad()

    def program(self, model: torch.nn.Module) -> torch.nn.Module:
        return model

    def outputs(self, value: Any) -> list[torch.Tensor]:
        return flatten_tensors(value)
