"""The model spec: what a model is, how to build it and how to feed it.

A spec is plain data (it travels to worker processes as JSON); building and
making inputs import torch lazily, in the suite module that owns the spec.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

SUITES = ("timm", "hf", "custom")

# Which module builds the specs of each suite. Each must define
# ``build(spec)`` and ``example_inputs(spec, batch_size, device, seq_len)``.
_SUITE_MODULES = {
    "timm": "zoo.timm_suite",
    "hf": "zoo.hf_suite",
    "custom": "zoo.custom",
}

# Full-size models above this many parameters are built shallower (--max-params).
DEFAULT_MAX_PARAMS = 1_000_000_000
_COUNT_SUFFIXES = {"K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}


def parse_param_count(text: str) -> int:
    """A parameter count: ``1000000000``, ``1e9``, ``1B`` or ``500M``; ValueError with
    what to write otherwise."""
    number, scale = text.strip(), 1
    if number[-1:].upper() in _COUNT_SUFFIXES:
        number, scale = number[:-1], _COUNT_SUFFIXES[number[-1].upper()]
    try:
        value = float(number) * scale
    except ValueError:
        raise ValueError(f"{text!r} is not a parameter count; write e.g. 1B, 500M or 1e9") from None
    if not math.isfinite(value) or int(value) <= 0:
        raise ValueError(f"must be a finite positive count, got {text}")
    return int(value)


@dataclass(frozen=True)
class ModelSpec:
    """One model of the catalogue.

    ``id`` is ``<suite>/<name>`` (``timm/resnet50``, ``custom/file:Class``);
    ``family`` groups related models (for timm, the module that registers it);
    ``input_size`` is the default per-sample input shape, when the suite knows it;
    ``source`` is where a custom model lives (``/abs/path/file.py:ClassName``).

    ``size``, ``max_params`` and ``device`` say how to build it; the plan sets them for
    each cell. ``size`` is ``tiny`` or ``full`` (suites with one size, timm and custom,
    are always ``full``); a ``full`` model above ``max_params`` parameters is built
    shallower; ``device`` is where its weights are made.
    """

    id: str
    suite: str
    name: str
    family: str
    task: str
    input_size: tuple[int, ...] | None = None
    source: str | None = None
    size: str = "full"
    max_params: int | None = None
    device: str | None = None

    @property
    def build_limit(self) -> int | None:
        """The parameter limit when it is not the default one (``None`` otherwise): a
        full model built under another limit may be another model, so another cell."""
        if self.size != "full" or self.max_params in (None, DEFAULT_MAX_PARAMS):
            return None
        return self.max_params

    def _suite(self):
        try:
            return importlib.import_module(_SUITE_MODULES[self.suite])
        except KeyError:
            raise ValueError(f"no builder for suite {self.suite!r}") from None

    def build(self) -> torch.nn.Module:
        """Build the model with random weights (never downloads anything)."""
        return self._suite().build(self)

    def example_inputs(
        self, batch_size: int | None, device: str, seq_len: int | None = None
    ) -> tuple[torch.Tensor, ...]:
        """Deterministic example inputs: a tuple of positional tensors."""
        return self._suite().example_inputs(self, batch_size, device, seq_len)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelSpec:
        data = dict(data)
        if data.get("input_size") is not None:
            data["input_size"] = tuple(data["input_size"])
        return cls(**data)
