"""Inference: the model in eval mode under ``no_grad``, one forward call, every tensor
it returns compared.

A model may draw random numbers in its forward even in eval mode: ViTMAE shuffles its
patches by ``torch.rand`` to mask them, VITS samples its durations and its waveform's
noise. Every side's call starts from one seed, and Inductor draws as eager does
(``fallback_random``, as PyTorch's harness does for its accuracy runs and the training
step here), so the accuracy check compares outputs of the same draw, not two draws. A
model that draws nothing compiles to the same code either way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from runner.measure.tensors import flatten_tensors
from runner.steps.base import Step, eager_draws
from runner.steps.registry import INFER


class Infer(Step):
    name = INFER

    def prepare(self, model: torch.nn.Module) -> None:
        model.eval()

    def grad_mode(self) -> contextlib.AbstractContextManager[Any]:
        return _inference_state()

    def program(self, model: torch.nn.Module) -> torch.nn.Module:
        return model

    def outputs(self, value: Any) -> list[torch.Tensor]:
        return flatten_tensors(value)


@contextlib.contextmanager
def _inference_state() -> Iterator[None]:
    """Gradients off, and Inductor's random numbers drawn as eager draws them."""
    with torch.no_grad(), eager_draws():
        yield
