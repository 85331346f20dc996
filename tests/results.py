"""Result rows for the tests: a ``CellResult`` with every field the store needs, where a
test names only what it cares about; and the rows a database holds, as dicts."""

from __future__ import annotations

from pathlib import Path

import duckdb

from runner.matrix.results import CellResult

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


def rows(db: Path, sql: str = "SELECT * FROM results ORDER BY model_id, backend", *params):
    """The rows of ``sql`` in the database file ``db``, each a dict by column name."""
    with duckdb.connect(str(db), read_only=True) as con:
        cursor = con.execute(sql, list(params))
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
