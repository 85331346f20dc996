"""Export runs as parquet shards: ``<out_dir>/<run_id>/<table>.parquet``.

Shards are how runs travel between machines and ship with the dashboard; every row
carries the schema version it was written under.
"""

from __future__ import annotations

import os
from pathlib import Path

from runner.store.db import Store
from runner.store.schema import DEFAULT_DB_PATH, DEFAULT_RUNS_DIR
from zoo.errors import UsageError

DEFAULT_OUT_DIR = DEFAULT_RUNS_DIR

# Each query takes the run id for every "?".
SHARD_QUERIES = {
    "runs": "SELECT * FROM runs WHERE run_id = ?",
    "results": "SELECT * FROM results WHERE run_id = ? ORDER BY recorded_at",
    "graph_breaks": (
        "SELECT g.* FROM graph_breaks g JOIN results r USING (result_id) "
        "WHERE g.run_id = ? ORDER BY r.recorded_at, g.idx"
    ),
    "environments": (
        "SELECT * FROM environments WHERE env_id IN "
        "(SELECT env_id FROM results WHERE run_id = ? UNION SELECT env_id FROM runs WHERE run_id = ?) "
        "ORDER BY env_id"
    ),
}


def _sql_string(text: str) -> str:
    """A SQL string literal: COPY's target cannot be a parameter in every DuckDB we support."""
    return "'" + text.replace("'", "''") + "'"


def _select_runs(store: Store, run_ids: list[str] | None, label: str | None) -> list[str]:
    with store.connection(read_only=True) as con:
        if run_ids is None and label is None:
            rows = con.execute("SELECT run_id FROM runs ORDER BY started_at").fetchall()
            return [row[0] for row in rows]
        selected: set[str] = set()
        if run_ids:
            found = {
                row[0]
                for row in con.execute(
                    "SELECT run_id FROM runs WHERE run_id IN (SELECT unnest(?::VARCHAR[]))",
                    [list(run_ids)],
                ).fetchall()
            }
            missing = [run_id for run_id in run_ids if run_id not in found]
            if missing:
                raise UsageError(
                    f"no run {', '.join(missing)} in {store.path}. "
                    "Check the run id (zoo-run prints it at the start and the end)."
                )
            selected |= found
        if label is not None:
            labelled = {
                row[0]
                for row in con.execute(
                    "SELECT run_id FROM runs WHERE label = ?", [label]
                ).fetchall()
            }
            if not labelled:
                raise UsageError(f"no run labelled {label!r} in {store.path}.")
            selected |= labelled
        return [
            row[0]
            for row in con.execute(
                "SELECT run_id FROM runs WHERE run_id IN (SELECT unnest(?::VARCHAR[])) "
                "ORDER BY started_at",
                [sorted(selected)],
            ).fetchall()
        ]


def export_runs(
    db_path: str | os.PathLike = DEFAULT_DB_PATH,
    out_dir: str | os.PathLike = DEFAULT_OUT_DIR,
    run_ids: list[str] | None = None,
    label: str | None = None,
) -> list[Path]:
    """Write the shards of the runs given by id or label (all runs if neither); the paths."""
    db_path = Path(db_path)
    out_dir = Path(out_dir)
    if not db_path.is_file():
        raise UsageError(f"no database at {db_path}. Pass the database to export (--db).")
    # Exporting only reads: a database that cannot be written exports all the same.
    store = Store.open(db_path, writable=False)
    written: list[Path] = []
    for run_id in _select_runs(store, run_ids, label):
        run_dir = out_dir / run_id
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UsageError(
                f"cannot create {run_dir} ({error.strerror}). Pass a writable directory (--out)."
            ) from None
        # One connection per run, so a sweep waiting on the file waits for one run at most.
        with store.connection(read_only=True) as con:
            for table, query in SHARD_QUERIES.items():
                path = run_dir / f"{table}.parquet"
                con.execute(
                    f"COPY ({query}) TO {_sql_string(str(path))} (FORMAT parquet)",
                    [run_id] * query.count("?"),
                )
                written.append(path)
    return written
