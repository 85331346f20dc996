"""Merge parquet run folders and other zoo-matrix databases into one database.

Rows are identified as everywhere else (run id, result id, environment id, result id +
break index), so a row already in the target is skipped and merging twice changes
nothing. Results are history: every rerun of a cell key stays, and readers take the
latest row of a key by ``recorded_at`` (``runner.store.schema.latest_row``: a crowded
``oom`` row never hides another).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from runner.matrix import break_types
from runner.store.db import LOCK_RETRY_SLEEP_S, Store
from runner.store.schema import (
    IDENTITY,
    MIGRATIONS,
    SCHEMA_VERSION,
    TABLES,
    apply_step,
    error_text,
    rekey_by_fingerprint,
)
from zoo.errors import DatabaseLockedError, UsageError


@dataclass
class Source:
    """One thing to merge: parquet shards (``files`` per table) or a database file."""

    path: Path
    files: dict[str, list[str]] = field(default_factory=dict)

    @property
    def is_database(self) -> bool:
        return not self.files

    def describe(self) -> str:
        if self.is_database:
            return f"database {self.path}"
        runs = len(self.files.get("runs", [])) or len(self.files.get("results", []))
        return f"{runs} run folder(s) under {self.path}"


@dataclass
class TableCount:
    added: int = 0
    present: int = 0


@dataclass
class MergeSummary:
    target: Path
    sources: list[Source]
    counts: dict[str, TableCount]
    keys_merged: int
    keys_with_reruns: int


def find_source(path: Path) -> Source:
    """What ``path`` holds: a run folder, a folder of run folders, or a database file."""
    if not path.exists():
        raise UsageError(f"no such source {path}. Pass a parquet run folder or a database.")
    if path.is_dir():
        # A run folder holds the shards itself; a folder like data/runs holds run folders.
        folders = [path] if _shards_in(path) else sorted(p for p in path.iterdir() if p.is_dir())
        folders = [folder for folder in folders if _shards_in(folder)]
        if not folders:
            raise UsageError(
                f"{path} holds no zoo-export shards (<run_id>/results.parquet, runs.parquet). "
                "Pass a folder written by zoo-export, or one run folder inside it."
            )
        # zoo-export writes every table of a run; a folder without one is a copy cut
        # short, and its rows would merge without what they refer to (results without
        # their environment, graph breaks without their result).
        incomplete = [
            f"{folder} lacks {', '.join(f'{table}.parquet' for table in missing)}"
            for folder in folders
            if (missing := [table for table in TABLES if table not in _shards_in(folder)])
        ]
        if incomplete:
            raise UsageError(
                "incomplete run folder(s): "
                + "; ".join(incomplete)
                + ". zoo-export writes runs, results, graph_breaks and environments for every "
                "run: export the run again (zoo-export --run RUN_ID) or copy the missing "
                "file. Nothing was merged."
            )
        files = {
            table: [str(folder / f"{table}.parquet") for folder in folders] for table in TABLES
        }
        return Source(path, files)
    if path.suffix == ".parquet":
        raise UsageError(
            f"{path} is a single parquet file; pass the run folder that holds it "
            f"({path.parent}) so its runs, results and graph breaks travel together."
        )
    return Source(path)


def _shards_in(folder: Path) -> set[str]:
    """The tables whose shard ``folder`` holds."""
    return {table for table in TABLES if (folder / f"{table}.parquet").is_file()}


def _relation(source: Source, alias: str, table: str) -> tuple[str, list]:
    """SQL naming ``table`` of a source, and its parameters (paths are never spliced in)."""
    if source.is_database:
        return f"{alias}.{table}", []
    return "read_parquet(?, union_by_name = true)", [source.files[table]]


def _tables_of(source: Source) -> list[str]:
    return [table for table in TABLES if source.is_database or table in source.files]


@contextmanager
def _attached(
    con: duckdb.DuckDBPyConnection, source: Source, alias: str, lock_timeout_s: float
) -> Iterator[None]:
    if not source.is_database:
        yield
        return
    # A sweep writing to the source holds it only for a batch of rows: wait, as Store does.
    deadline = time.monotonic() + lock_timeout_s
    while True:
        try:
            con.execute(f"ATTACH ? AS {alias} (READ_ONLY)", [str(source.path)])
            break
        except duckdb.Error as error:
            if "Could not set lock" not in str(error):
                raise UsageError(
                    f"{source.path} is neither a parquet run folder nor a DuckDB database "
                    f"({error_text(error)})."
                ) from None
            if time.monotonic() >= deadline:
                raise DatabaseLockedError(
                    f"the source {source.path} stayed locked by another process for "
                    f"{lock_timeout_s:g} s. Merge it when that process (a zoo-run?) has finished."
                ) from None
            time.sleep(LOCK_RETRY_SLEEP_S)
    yield
    # Not in a finally: an aborted transaction refuses DETACH, and closing detaches anyway.
    con.execute(f"DETACH {alias}")


def _check_source(
    con: duckdb.DuckDBPyConnection, source: Source, alias: str, target_columns: dict
) -> None:
    """Refuse a source this version cannot merge: missing tables, a newer schema, columns
    the target has no place for (they would be dropped silently)."""
    if source.is_database:
        names = {
            row[0]
            for row in con.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_catalog = ? AND table_schema = 'main'",
                [alias],
            ).fetchall()
        }
        missing = {"schema_version", *TABLES} - names
        if missing:
            raise UsageError(
                f"{source.path} is a DuckDB database but not a zoo-matrix one "
                f"(no {', '.join(sorted(missing))} table). Pass a database written by zoo-run."
            )
        (version,) = con.execute(
            f"SELECT coalesce(max(version), 0) FROM {alias}.schema_version"
        ).fetchone()
        _check_version(source, "its schema_version table", version)
    for table in _tables_of(source):
        relation, params = _relation(source, alias, table)
        try:
            columns = [
                row[0]
                for row in con.execute(f"DESCRIBE SELECT * FROM {relation}", params).fetchall()
            ]
        except duckdb.Error as error:
            raise UsageError(
                f"cannot read {table} of {source.path}: {error_text(error)}. Export that run "
                "again (zoo-export --run RUN_ID) or leave its folder out; nothing was merged."
            ) from None
        if "schema_version" not in columns:
            raise UsageError(
                f"{table} of {source.path} has no schema_version column: not written by "
                "zoo-matrix. Pass folders written by zoo-export."
            )
        extra = [name for name in columns if name not in target_columns[table]]
        if extra:
            raise UsageError(
                f"{table} of {source.path} has columns this zoo-matrix does not know "
                f"({', '.join(extra)}). Upgrade zoo-matrix (pip install -U zoo-matrix)."
            )
        try:
            (version,) = con.execute(
                f"SELECT coalesce(max(schema_version), 0) FROM {relation}", params
            ).fetchone()
        except duckdb.Error as error:
            raise UsageError(
                f"cannot read {table} of {source.path}: {error_text(error)}. Export that run "
                "again (zoo-export --run RUN_ID) or leave its folder out; nothing was merged."
            ) from None
        _check_version(source, f"rows of {table}", version)


def _check_version(source: Source, what: str, version: int) -> None:
    if version > SCHEMA_VERSION:
        raise UsageError(
            f"{source.path}: {what} have schema version {version}, newer than this "
            f"zoo-matrix knows ({SCHEMA_VERSION}). Upgrade zoo-matrix "
            "(pip install -U zoo-matrix) to merge it; nothing was merged."
        )


def _merge_table(
    con: duckdb.DuckDBPyConnection, source: Source, alias: str, table: str
) -> TableCount:
    relation, params = _relation(source, alias, table)
    # By name: a source at an older schema version lacks the newer columns (left NULL).
    columns = [
        row[0] for row in con.execute(f"DESCRIBE SELECT * FROM {relation}", params).fetchall()
    ]
    keys = IDENTITY[table]
    partition = ", ".join(keys)
    # Deduplicate inside the source too: every run folder carries its environment row.
    incoming = f"SELECT * FROM {relation} QUALIFY row_number() OVER (PARTITION BY {partition}) = 1"
    (distinct,) = con.execute(f"SELECT count(*) FROM ({incoming})", params).fetchone()
    names = ", ".join(f'"{name}"' for name in columns)
    match = " AND ".join(f"t.{key} = s.{key}" for key in keys)
    (added,) = con.execute(
        f"INSERT INTO {table} ({names}) SELECT {names} FROM ({incoming}) s "
        f"WHERE NOT EXISTS (SELECT 1 FROM {table} t WHERE {match})",
        params,
    ).fetchone()
    return TableCount(added=added, present=distinct - added)


def _check_target(target: Path, sources: list[Source]) -> None:
    for source in sources:
        if source.is_database and target.exists() and source.path.resolve() == target.resolve():
            raise UsageError(f"{target} is both a source and the target; it merges into itself.")
    # Root passes os.access; DuckDB's own refusal is caught when writing.
    if target.is_file() and not os.access(target, os.W_OK):
        raise UsageError(f"cannot write to {target}. Pass a writable database path (--into).")


def merge(
    sources: list[str | os.PathLike], into: str | os.PathLike, lock_timeout_s: float = 30.0
) -> MergeSummary:
    """Merge ``sources`` into the database ``into`` (created if missing) in one transaction.

    Bad input raises ``UsageError`` before anything is written, and leaves ``into`` as it was.
    """
    target = Path(into)
    found = [find_source(Path(path)) for path in sources]
    if not found:
        raise UsageError("no sources to merge. Pass parquet run folders or databases.")
    _check_target(target, found)
    # Validate every source against this version's tables before the target is created.
    with duckdb.connect(":memory:") as probe:
        for version, steps in MIGRATIONS:
            for step in steps if version <= SCHEMA_VERSION else ():
                apply_step(probe, step)
        target_columns = {
            table: [row[0] for row in probe.execute(f"DESCRIBE {table}").fetchall()]
            for table in TABLES
        }
        for number, source in enumerate(found):
            with _attached(probe, source, f"source_{number}", lock_timeout_s):
                _check_source(probe, source, f"source_{number}", target_columns)
    existed = target.exists()
    store = Store.open(target, lock_timeout_s, flag="--into")
    counts = {table: TableCount() for table in TABLES}
    merged_ids: set[str] = set()
    try:
        with store.transaction() as con:
            for number, source in enumerate(found):
                alias = f"source_{number}"
                with _attached(con, source, alias, lock_timeout_s):
                    for table in _tables_of(source):
                        count = _merge_table(con, source, alias, table)
                        counts[table].added += count.added
                        counts[table].present += count.present
                    if "results" in _tables_of(source):
                        relation, params = _relation(source, alias, "results")
                        merged_ids |= {
                            row[0]
                            for row in con.execute(
                                f"SELECT DISTINCT result_id FROM {relation}", params
                            ).fetchall()
                        }
            # Rows of older versions get the keys and break types of this one (idempotent).
            rekey_by_fingerprint(con)
            break_types.reclassify(con)
            keys = {
                row[0]
                for row in con.execute(
                    "SELECT DISTINCT cell_key FROM results "
                    "WHERE result_id IN (SELECT unnest(?::VARCHAR[]))",
                    [sorted(merged_ids)],
                ).fetchall()
            }
            (reruns,) = con.execute(
                "SELECT count(*) FROM (SELECT cell_key FROM results "
                "WHERE cell_key IN (SELECT unnest(?::VARCHAR[])) "
                "GROUP BY cell_key HAVING count(*) > 1)",
                [sorted(keys)],
            ).fetchone()
    except Exception as error:
        # The transaction rolled back; a target this call created goes too.
        if not existed:
            target.unlink(missing_ok=True)
            target.with_name(target.name + ".wal").unlink(missing_ok=True)
        if isinstance(error, duckdb.Error):
            raise UsageError(
                f"merging into {target} failed ({error_text(error)}). Nothing was merged; {target} is as "
                "it was."
            ) from None
        raise
    return MergeSummary(target, found, counts, len(keys), reruns)


def summary_lines(summary: MergeSummary) -> list[str]:
    lines = [f"merged into {summary.target}:"]
    lines += [f"  from {source.describe()}" for source in summary.sources]
    width = max(len(table) for table in TABLES)
    for table in ("runs", "results", "graph_breaks", "environments"):
        count = summary.counts[table]
        lines.append(
            f"  {table:<{width}}  {count.added:>6} added  {count.present:>6} already present"
        )
    lines.append(
        f"{summary.keys_with_reruns} of {summary.keys_merged} cell key(s) merged have more than "
        "one row (reruns): all rows are kept as history, and readers take the latest by "
        "recorded_at."
    )
    return lines
