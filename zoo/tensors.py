"""The one flattener of model outputs, shared by the zoo's wrappers and the runner.

Importing this module imports no torch: torch is looked up when a value is flattened,
which only happens where a model ran (and torch is therefore loaded).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any


def flatten_tensors(value: Any) -> list[Any]:
    """The tensors of a model output, in order: tensors, sequences, mappings, and
    HuggingFace ``ModelOutput``-like objects (``to_tuple()``). Anything else (a cache
    object, a number, None) holds no tensor and is dropped."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return [value]
    if hasattr(value, "to_tuple"):
        value = value.to_tuple()
    elif isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, list | tuple):
        return [t for item in value for t in flatten_tensors(item)]
    return []
