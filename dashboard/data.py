"""Where the dashboard's data comes from: shipped parquet plus the user's database.

Everything is read into one in-memory DuckDB database that the dashboard owns, so it
never writes anywhere and never holds the user's file: that file is attached
read-only just long enough to copy its tables, retrying while a sweep holds it
(DuckDB lets no other process read while one writes).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from runner.matrix import break_types
from runner.store.schema import (
    DEFAULT_DB_PATH,
    DEFAULT_RUNS_DIR,
    IDENTITY,
    TABLES,
    error_text,
    latest_row,
    schema_columns,
)

# Rows that can arrive from both sources (a run exported to parquet and still in the
# database) are kept once, by their identity.
_IDENTITY = {table: ", ".join(columns) for table, columns in IDENTITY.items()}
# The raw timing samples are the bulk of the results (hundreds of doubles a row) and no
# page shows them (quartiles are columns of their own): they are not loaded, which
# makes a cold start of 200,000 rows several times faster. Each side's fastest sample
# is kept: a median far above it says the timing was disturbed.
_LEAN = {
    "results": " EXCLUDE (eager_samples_ms, compiled_samples_ms), "
    "NULL::DOUBLE[] AS eager_samples_ms, NULL::DOUBLE[] AS compiled_samples_ms, "
    "list_min(eager_samples_ms) AS eager_fastest_ms, "
    "list_min(compiled_samples_ms) AS compiled_fastest_ms"
}
DEFAULT_DB = DEFAULT_DB_PATH
DB_ENV = "ZOO_DB"
RUNS_DIR_ENV = "ZOO_RUNS_DIR"
LOCK_RETRY_S = 0.25


@dataclass
class Sources:
    """What was loaded, for the header and for friendly messages."""

    runs_dir: Path
    db_path: Path | None
    parquet_files: int = 0
    db_loaded: bool = False
    problems: list[str] = field(default_factory=list)


def default_paths() -> tuple[Path, Path]:
    """The runs folder and database, from the environment or the defaults."""
    return (
        Path(os.environ.get(RUNS_DIR_ENV, DEFAULT_RUNS_DIR)),
        Path(os.environ.get(DB_ENV, DEFAULT_DB)),
    )


def load(
    runs_dir: Path = DEFAULT_RUNS_DIR,
    db_path: Path | None = DEFAULT_DB,
    lock_timeout_s: float = 10.0,
) -> tuple[duckdb.DuckDBPyConnection, Sources]:
    """An in-memory database with the tables ``runs``, ``results``, ``graph_breaks`` and
    ``environments`` (shipped and user rows together, each row once) and the view
    ``latest_results`` (the newest row of every cell key).

    A missing source is no error (the tables may be empty); an unreadable one is noted
    in ``Sources.problems`` and skipped, so the dashboard can still show the rest: an
    unreadable parquet shard costs only its own rows.
    """
    sources = Sources(runs_dir=runs_dir, db_path=db_path)
    con = duckdb.connect(":memory:")
    parts: dict[str, list[str]] = {table: [] for table in TABLES}
    for table in TABLES:
        files = sorted(runs_dir.glob(f"*/{table}.parquet")) if runs_dir.is_dir() else []
        if not files:
            continue
        sources.parquet_files += len(files)
        if _read_shards(con, table, files, sources):
            parts[table].append(f"shipped_{table}")
    if (
        db_path is not None
        and db_path.exists()
        and _copy_user_tables(con, db_path, lock_timeout_s, sources)
    ):
        sources.db_loaded = True
        for table in TABLES:
            parts[table].append(f"user_{table}")
    for table in TABLES:
        _combine(con, table, parts[table])
        _add_missing_columns(con, table)
    # Breaks recorded untyped (schema < 4) or before one-line "TYPE: explanation"
    # messages were read get the types classify gives now (as zoo-merge gives them).
    break_types.reclassify(con)
    con.execute(f"CREATE VIEW latest_results AS SELECT * FROM results QUALIFY {latest_row()}")
    return con, sources


def _read_shards(
    con: duckdb.DuckDBPyConnection, table: str, files: list[Path], sources: Sources
) -> bool:
    """``shipped_<table>`` from the shards of ``files`` that can be read; each one that
    cannot is named in ``sources.problems`` and costs only its own rows. False when no
    shard was left."""
    usable = [path for path in files if not _shard_problem(con, table, path, sources)]
    select = f"SELECT *{_LEAN.get(table, '')} FROM read_parquet(?, union_by_name=true)"
    try:
        if usable:
            con.execute(f"CREATE TABLE shipped_{table} AS {select}", [[str(f) for f in usable]])
        return bool(usable)
    except duckdb.Error:
        pass
    # A shard whose footer reads but whose data does not: read them one by one to find it.
    shards = []
    for number, path in enumerate(usable):
        try:
            con.execute(f"CREATE TABLE shard_{number} AS {select}", [[str(path)]])
            shards.append(f"shard_{number}")
        except duckdb.Error as error:
            sources.problems.append(_skipped(path, error_text(error)))
    if not shards:
        return False
    union = " UNION ALL BY NAME ".join(f"SELECT * FROM {shard}" for shard in shards)
    con.execute(f"CREATE TABLE shipped_{table} AS {union}")
    for shard in shards:
        con.execute(f"DROP TABLE {shard}")
    return True


def _shard_problem(
    con: duckdb.DuckDBPyConnection, table: str, path: Path, sources: Sources
) -> bool:
    """Whether the shard at ``path`` cannot be used (noted in ``sources.problems``): it
    does not read as parquet, or lacks what identifies its rows."""
    try:
        columns = {
            row[0]
            for row in con.execute(
                "DESCRIBE SELECT * FROM read_parquet(?)", [[str(path)]]
            ).fetchall()
        }
    except duckdb.Error as error:
        sources.problems.append(_skipped(path, error_text(error)))
        return True
    missing = [name for name in (*IDENTITY[table], "schema_version") if name not in columns]
    if missing:
        sources.problems.append(
            _skipped(path, f"it is no zoo-matrix {table} shard (no column {', '.join(missing)})")
        )
        return True
    return False


def _skipped(path: Path, reason: str) -> str:
    return (
        f"{path} skipped, its rows are not shown: {reason}. Export that run again "
        "(zoo-export --run RUN_ID) or move its folder out of the runs folder."
    )


def _copy_user_tables(
    con: duckdb.DuckDBPyConnection, db_path: Path, lock_timeout_s: float, sources: Sources
) -> bool:
    deadline = time.monotonic() + lock_timeout_s
    while True:
        try:
            con.execute("ATTACH ? AS user_db (READ_ONLY)", [str(db_path)])
            break
        except duckdb.Error as error:
            locked = "lock" in str(error).lower()
            if locked and time.monotonic() < deadline:
                time.sleep(LOCK_RETRY_S)
                continue
            reason = (
                "a sweep is writing to it; reload in a moment"
                if locked
                else f"it is not a readable zoo-matrix database ({error_text(error)})"
            )
            sources.problems.append(f"{db_path} skipped: {reason}")
            return False
    try:
        for table in TABLES:
            con.execute(
                f"CREATE TABLE user_{table} AS SELECT *{_LEAN.get(table, '')} FROM user_db.{table}"
            )
        return True
    except duckdb.Error as error:
        sources.problems.append(
            f"{db_path} skipped: it lacks zoo-matrix tables ({error_text(error)})"
        )
        for table in TABLES:
            con.execute(f"DROP TABLE IF EXISTS user_{table}")
        return False
    finally:
        con.execute("DETACH user_db")


def _combine(con: duckdb.DuckDBPyConnection, table: str, parts: list[str]) -> None:
    if not parts:
        # No data at all: an empty table with the store's columns keeps queries valid.
        from runner.store.schema import empty_table_sql

        con.execute(empty_table_sql(table))
        if table in _LEAN:  # the same projection as every source gets: the same columns
            con.execute(f"ALTER TABLE {table} RENAME TO empty_{table}")
            con.execute(f"CREATE TABLE {table} AS SELECT *{_LEAN[table]} FROM empty_{table}")
            con.execute(f"DROP TABLE empty_{table}")
        return
    union = " UNION ALL BY NAME ".join(f"SELECT * FROM {part}" for part in parts)
    # Usually no row is there twice: then skip the window over every row (0.8 of the 1.3 s
    # that 200,000 result rows took to load) and, for a single source, even the copy.
    (unique,) = con.execute(
        f"SELECT count(*) = count(DISTINCT ({_IDENTITY[table]})) FROM ({union})"
    ).fetchone()
    if unique and len(parts) == 1:
        con.execute(f"ALTER TABLE {parts[0]} RENAME TO {table}")
        return
    keep_once = "" if unique else f"QUALIFY row_number() OVER (PARTITION BY {_IDENTITY[table]}) = 1"
    con.execute(f"CREATE TABLE {table} AS SELECT * FROM ({union}) {keep_once}")
    for part in parts:
        con.execute(f"DROP TABLE {part}")


def _add_missing_columns(con: duckdb.DuckDBPyConnection, table: str) -> None:
    """Columns of this schema version that none of the sources has (every row written
    before they existed): added empty, so that queries can name them."""
    have = {row[0] for row in con.execute(f"DESCRIBE {table}").fetchall()}
    for name, sql_type in schema_columns(table):
        if name not in have:
            con.execute(f'ALTER TABLE {table} ADD COLUMN "{name}" {sql_type}')
