"""Plug-ins named by import path (``"package.module:Name"``), resolved only where they
run: the registries stay importable without torch or jax."""

from __future__ import annotations

import importlib
from typing import Any


def resolve(path: str) -> Any:
    """The object ``path`` names (``"runner.backends.torch_compile:TorchCompile"``)."""
    module, _, name = path.partition(":")
    if not module or not name:
        raise ValueError(f"a plug-in path is 'module:Name', not {path!r}")
    return getattr(importlib.import_module(module), name)
