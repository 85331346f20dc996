"""Result rows for the store, merge and compare tests: a ``CellResult`` with every field
the store needs, where a test names only what it cares about."""

from __future__ import annotations

from runner.result import CellResult

DEFAULTS = {
    "model_id": "timm/resnet18",
    "suite": "timm",
    "family": "resnet",
    "task": "image-classification",
    "size": "small",
    "backend": "inductor",
    "mode": "default",
    "dynamic": "false",
    "precision": "fp32",
    "step": "infer",
    "batch_size": 2,
    "seq_len": None,
    "device": "cpu",
    "env_id": "env-a",
}


def make_result(key: str = "key-1", status: str = "pass", **values) -> CellResult:
    """A result of cell ``key``; ``values`` replace the defaults or add fields."""
    return CellResult(cell_key=key, status=status, **{**DEFAULTS, **values})
