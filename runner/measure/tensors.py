"""Tensors in and out of a cell: outputs flattened and copied to the host, inputs cast,
halved for the shape probe, described as shapes."""

from __future__ import annotations

import json
from typing import Any

import torch

from zoo.tensors import flatten_tensors

__all__ = [
    "MB",
    "cast_floats",
    "flatten_tensors",
    "halve_leading_dims",
    "host_tensors",
    "shapes_json",
    "to_float64",
]

MB = 2**20


def host_tensors(value: Any) -> list[torch.Tensor]:
    """Host copies of the tensors of an output: compiled code (CUDA graphs) may overwrite
    its outputs on the next call."""
    return [t.detach().to("cpu", copy=True) for t in flatten_tensors(value)]


def cast_floats(inputs: tuple[Any, ...], dtype: torch.dtype | None) -> tuple[Any, ...]:
    """The floating-point tensors of ``inputs`` cast to ``dtype`` (none when None)."""
    if dtype is None:
        return inputs
    return tuple(
        x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs
    )


def to_float64(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(torch.float64)
    return value


def halve_leading_dims(inputs: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """Inputs with dim 0 halved wherever it is at least 4; ``None`` if none is."""
    halved = tuple(
        x[: x.shape[0] // 2] if isinstance(x, torch.Tensor) and x.dim() and x.shape[0] >= 4 else x
        for x in inputs
    )
    changed = any(h is not x for h, x in zip(halved, inputs, strict=True))
    return halved if changed else None


def shapes_json(inputs: tuple[Any, ...]) -> str:
    return json.dumps([list(x.shape) if isinstance(x, torch.Tensor) else None for x in inputs])
