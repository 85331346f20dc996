"""The single writer of the results database (``data/zoo.duckdb`` by default).

DuckDB allows one writer process and, while it writes, no reader from another process.
So the store never keeps the file open: every operation connects, does its work in one
transaction and closes, which lets the dashboard read between batches during a sweep.
When another process holds the file, connecting is retried for ``lock_timeout_s``.
"""

from __future__ import annotations

import os
import socket
import time
import types
import typing
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb

from runner.result import STATUSES, CellResult, result_columns
from zoo.errors import UsageError, ZooMatrixError

DEFAULT_DB_PATH = Path("data/zoo.duckdb")
SCHEMA_VERSION = 2
RUN_STATUSES = ("running", "finished", "interrupted", "failed")
LOCK_RETRY_SLEEP_S = 0.2

# Migrations are frozen once released: a database at version N has exactly the tables
# that migrations 1..N made, whatever the dataclasses look like today. A new CellResult
# field therefore needs a new migration (ALTER TABLE results ADD COLUMN ...);
# tests/test_store.py checks that the results table matches the dataclass.
MIGRATIONS: list[tuple[int, tuple[str, ...]]] = [
    (
        1,
        (
            """
            CREATE TABLE runs (
                run_id VARCHAR PRIMARY KEY,
                label VARCHAR,
                command VARCHAR,
                started_at TIMESTAMP,
                finished_at TIMESTAMP,
                status VARCHAR CHECK (status IN ('running', 'finished', 'interrupted', 'failed')),
                host VARCHAR,
                device VARCHAR,
                gpu VARCHAR,
                env_id VARCHAR,
                zoo_version VARCHAR,
                cells_planned INTEGER,
                cells_recorded INTEGER,
                schema_version INTEGER NOT NULL
            )
            """,
            """
            CREATE TABLE environments (
                env_id VARCHAR PRIMARY KEY,
                python VARCHAR,
                torch VARCHAR,
                triton VARCHAR,
                cuda VARCHAR,
                gpu VARCHAR,
                timm VARCHAR,
                transformers VARCHAR,
                jax VARCHAR,
                jaxlib VARCHAR,
                torchax VARCHAR,
                torch_xla VARCHAR,
                driver VARCHAR,
                cudnn VARCHAR,
                gpu_count INTEGER,
                gpu_memory_gb DOUBLE,
                cpu VARCHAR,
                cpu_count INTEGER,
                host VARCHAR,
                platform VARCHAR,
                captured_at VARCHAR,
                schema_version INTEGER NOT NULL
            )
            """,
            """
            CREATE TABLE results (
                result_id VARCHAR PRIMARY KEY,
                run_id VARCHAR NOT NULL,
                cell_key VARCHAR NOT NULL,
                model_id VARCHAR,
                suite VARCHAR,
                family VARCHAR,
                task VARCHAR,
                size VARCHAR,
                backend VARCHAR,
                mode VARCHAR,
                dynamic VARCHAR,
                precision VARCHAR,
                step VARCHAR,
                batch_size BIGINT,
                seq_len BIGINT,
                device VARCHAR,
                env_id VARCHAR,
                status VARCHAR,
                error_type VARCHAR,
                error_phase VARCHAR,
                error_signature VARCHAR,
                error_message VARCHAR,
                traceback_tail VARCHAR,
                stderr_tail VARCHAR,
                graph_count BIGINT,
                graph_break_count BIGINT,
                unique_break_count BIGINT,
                recompile_count BIGINT,
                probe_shapes VARCHAR,
                probe_ok BOOLEAN,
                probe_recompiles BIGINT,
                compile_s DOUBLE,
                eager_ms DOUBLE,
                eager_ms_p25 DOUBLE,
                eager_ms_p75 DOUBLE,
                compiled_ms DOUBLE,
                compiled_ms_p25 DOUBLE,
                compiled_ms_p75 DOUBLE,
                eager_samples_ms DOUBLE[],
                compiled_samples_ms DOUBLE[],
                speedup DOUBLE,
                eager_peak_alloc_mb DOUBLE,
                eager_peak_reserved_mb DOUBLE,
                compiled_peak_alloc_mb DOUBLE,
                compiled_peak_reserved_mb DOUBLE,
                memory_ratio DOUBLE,
                accuracy_ref_dtype VARCHAR,
                max_abs_error DOUBLE,
                rmse DOUBLE,
                eager_rmse DOUBLE,
                accuracy_pass BOOLEAN,
                input_shapes VARCHAR,
                param_count BIGINT,
                precision_treatment VARCHAR,
                notes VARCHAR,
                wall_s DOUBLE,
                started_at VARCHAR,
                finished_at VARCHAR,
                recorded_at TIMESTAMP NOT NULL,
                schema_version INTEGER NOT NULL
            )
            """,
            """
            CREATE TABLE graph_breaks (
                result_id VARCHAR NOT NULL,
                run_id VARCHAR NOT NULL,
                cell_key VARCHAR NOT NULL,
                idx INTEGER NOT NULL,
                reason VARCHAR,
                user_frame VARCHAR,
                count BIGINT,
                schema_version INTEGER NOT NULL
            )
            """,
        ),
    ),
    (
        2,
        (
            # The wall time of the first compiled call (compile_s is it minus one eager
            # call; for XLA cells compile_s is what jax.monitoring reports).
            "ALTER TABLE results ADD COLUMN first_call_s DOUBLE",
            # Which XLA routes this environment can run, and why not (JSON).
            "ALTER TABLE environments ADD COLUMN xla_routes VARCHAR",
        ),
    ),
]

ENVIRONMENT_COLUMNS = (
    "env_id",
    "python",
    "torch",
    "triton",
    "cuda",
    "gpu",
    "timm",
    "transformers",
    "jax",
    "jaxlib",
    "torchax",
    "torch_xla",
    "xla_routes",
    "driver",
    "cudnn",
    "gpu_count",
    "gpu_memory_gb",
    "cpu",
    "cpu_count",
    "host",
    "platform",
    "captured_at",
)

_SQL_TYPES: dict[Any, str] = {
    int: "BIGINT",
    float: "DOUBLE",
    bool: "BOOLEAN",
    str: "VARCHAR",
    list[float]: "DOUBLE[]",
}


def empty_table_sql(table: str) -> str:
    """A statement creating ``table`` empty, with the columns every migration gave it:
    readers with no data use it to get a table with the right columns."""
    with duckdb.connect(":memory:") as con:
        for _, statements in MIGRATIONS:
            for statement in statements:
                con.execute(statement)
        try:
            columns = con.execute(f"DESCRIBE {table}").fetchall()
        except duckdb.CatalogException:
            raise ValueError(f"no migration creates table {table!r}") from None
    definitions = ", ".join(f'"{name}" {sql}' for name, sql, *_ in columns)
    return f"CREATE TABLE {table} ({definitions})"


def sql_type(annotation: Any) -> str:
    """The DuckDB type of a ``CellResult`` field annotation (``X | None`` is nullable X)."""
    if typing.get_origin(annotation) in (types.UnionType, typing.Union):
        (annotation,) = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    try:
        return _SQL_TYPES[annotation]
    except KeyError:
        raise TypeError(f"no DuckDB type for a CellResult field of type {annotation}") from None


def result_column_types() -> dict[str, str]:
    """``results`` columns from ``CellResult`` -> DuckDB type, in column order."""
    hints = typing.get_type_hints(CellResult)
    return {name: sql_type(hints[name]) for name in result_columns()}


RESULT_TYPES = result_column_types()


class DatabaseLockedError(ZooMatrixError):
    """Another process held the database for longer than the store waits."""


def _utc_naive(moment: datetime | None) -> datetime | None:
    """TIMESTAMP columns hold naive UTC; an aware datetime would be shifted to local time."""
    if moment is None or moment.tzinfo is None:
        return moment
    return moment.astimezone(UTC).replace(tzinfo=None)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _is_lock_conflict(error: duckdb.Error) -> bool:
    return isinstance(error, duckdb.IOException) and "Could not set lock" in str(error)


@dataclass
class RunRecord:
    """One row of ``runs``: one ``zoo-run`` invocation. Times are UTC."""

    run_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    label: str | None = None
    command: str = ""
    started_at: datetime = field(default_factory=_now)
    finished_at: datetime | None = None
    status: str = "running"
    host: str | None = None
    device: str | None = None
    gpu: str | None = None
    env_id: str | None = None
    zoo_version: str | None = None
    cells_planned: int | None = None
    cells_recorded: int | None = 0
    # The store stamps its own SCHEMA_VERSION on write; read back, this is the row's.
    schema_version: int = SCHEMA_VERSION

    @classmethod
    def starting(cls, env: dict[str, Any], device: str, **values: Any) -> RunRecord:
        """A run starting now on this host, in the environment ``env``
        (``runner.env.capture``); ``values``: label, command, cells_planned, ..."""
        gpu = env.get("gpu")
        return cls(
            run_id=str(uuid.uuid4()),
            started_at=datetime.now(UTC),
            host=socket.gethostname(),
            device=device,
            gpu=None if gpu in (None, "absent") else gpu,
            env_id=str(env["env_id"]),
            **values,
        )


RUN_COLUMNS = tuple(f.name for f in fields(RunRecord))


def _insert_sql(table: str, columns: tuple[str, ...] | list[str], suffix: str = "") -> str:
    names = ", ".join(f'"{name}"' for name in columns)
    marks = ", ".join("?" for _ in columns)
    return f"INSERT INTO {table} ({names}) VALUES ({marks}){suffix}"


def _rows(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


class Store:
    """Reads and writes one zoo-matrix database file. Use ``Store.open`` to get one."""

    def __init__(self, path: str | os.PathLike = DEFAULT_DB_PATH, lock_timeout_s: float = 30.0):
        self.path = Path(path)
        self.lock_timeout_s = lock_timeout_s

    @classmethod
    def open(cls, path: str | os.PathLike = DEFAULT_DB_PATH, lock_timeout_s: float = 30.0) -> Store:
        """Validate ``path``, create the database if missing and migrate it to this version.

        Bad input raises ``UsageError`` and leaves the file as it was.
        """
        store = cls(path, lock_timeout_s)
        store._check_path()
        try:
            if store.path.exists() and store._read_version() == SCHEMA_VERSION:
                return store
            store._migrate()
        except duckdb.Error as error:
            if "not a valid DuckDB database" in str(error):
                raise UsageError(
                    f"{store.path} is not a DuckDB database. zoo-matrix left it untouched: "
                    "move it aside or pass a different database path (--db)."
                ) from None
            raise UsageError(
                f"cannot open the database {store.path}: {error}. "
                "Check the path and its permissions, or pass a different one (--db)."
            ) from None
        return store

    def _check_path(self) -> None:
        if self.path.is_dir():
            raise UsageError(
                f"{self.path} is a directory; the database path must name a file "
                f"(e.g. {self.path / 'zoo.duckdb'})."
            )
        if self.path.exists():
            return
        parent = self.path.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UsageError(
                f"cannot create the directory {parent} for the database {self.path} "
                f"({error.strerror}). Pass a database path in a writable directory (--db)."
            ) from None
        if not os.access(parent, os.W_OK | os.X_OK):
            raise UsageError(
                f"cannot create the database {self.path}: {parent} is not writable. "
                "Pass a database path in a writable directory (--db)."
            )

    def _read_version(self) -> int:
        """The schema version on file (0: no zoo-matrix tables yet), without writing."""
        with self.connection(read_only=True) as con:
            return self._version(con)

    def _version(self, con: duckdb.DuckDBPyConnection) -> int:
        tables = {
            row[0]
            for row in con.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = 'main' AND table_catalog = current_database()"
            ).fetchall()
        }
        if "schema_version" not in tables:
            if tables:
                raise UsageError(
                    f"{self.path} is a DuckDB database but not a zoo-matrix one (it has "
                    f"tables {', '.join(sorted(tables))} and no schema_version). "
                    "Pass a different database path (--db)."
                )
            return 0
        (version,) = con.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()
        if version > SCHEMA_VERSION:
            raise UsageError(
                f"{self.path} has schema version {version}, newer than this zoo-matrix knows "
                f"({SCHEMA_VERSION}). Upgrade zoo-matrix (pip install -U zoo-matrix) to use it."
            )
        return version

    def _migrate(self) -> None:
        with self.transaction() as con:
            current = self._version(con)
            con.execute(
                "CREATE TABLE IF NOT EXISTS schema_version "
                "(version INTEGER PRIMARY KEY, applied_at TIMESTAMP)"
            )
            for version, statements in MIGRATIONS:
                if version <= current:
                    continue
                for statement in statements:
                    con.execute(statement)
                con.execute("INSERT INTO schema_version VALUES (?, ?)", [version, _now()])

    @contextmanager
    def connection(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection for one operation, waiting while another process holds the file."""
        deadline = time.monotonic() + self.lock_timeout_s
        while True:
            try:
                con = duckdb.connect(str(self.path), read_only=read_only)
                break
            except duckdb.Error as error:
                if not _is_lock_conflict(error):
                    raise
                if time.monotonic() >= deadline:
                    raise DatabaseLockedError(
                        f"the database {self.path} stayed locked by another process for "
                        f"{self.lock_timeout_s:g} s ({error}). Close the program holding it "
                        "(another zoo-run, or a tool with the file open) and try again."
                    ) from None
                time.sleep(LOCK_RETRY_SLEEP_S)
        try:
            yield con
        finally:
            con.close()

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self.connection() as con:
            con.begin()
            try:
                yield con
            except BaseException:
                con.rollback()
                raise
            con.commit()

    def start_run(self, run: RunRecord) -> None:
        if run.status not in RUN_STATUSES:
            raise ValueError(f"run status {run.status!r} is not one of {RUN_STATUSES}")
        row = asdict(run)
        row["started_at"] = _utc_naive(run.started_at)
        row["finished_at"] = _utc_naive(run.finished_at)
        row["schema_version"] = SCHEMA_VERSION
        with self.transaction() as con:
            con.execute(_insert_sql("runs", RUN_COLUMNS), [row[name] for name in RUN_COLUMNS])

    def finish_run(self, run_id: str, status: str, cells_recorded: int) -> None:
        if status not in RUN_STATUSES or status == "running":
            raise ValueError(f"a run finishes as finished, interrupted or failed, not {status!r}")
        with self.transaction() as con:
            updated = con.execute(
                "UPDATE runs SET status = ?, finished_at = ?, cells_recorded = ? "
                "WHERE run_id = ? RETURNING run_id",
                [status, _now(), cells_recorded, run_id],
            ).fetchall()
            if not updated:
                raise ValueError(f"no run {run_id!r} in {self.path}")

    def get_run(self, run_id: str) -> RunRecord | None:
        with self.connection(read_only=True) as con:
            rows = _rows(con.execute("SELECT * FROM runs WHERE run_id = ?", [run_id]))
        return RunRecord(**rows[0]) if rows else None

    def record_environment(self, env: dict[str, Any]) -> None:
        """Insert the environment row unless its ``env_id`` is already recorded."""
        unknown = set(env) - set(ENVIRONMENT_COLUMNS)
        if unknown:
            raise ValueError(f"environment fields with no column: {sorted(unknown)}")
        if not env.get("env_id"):
            raise ValueError("an environment needs an env_id")
        columns = (*ENVIRONMENT_COLUMNS, "schema_version")
        values = [env.get(name) for name in ENVIRONMENT_COLUMNS] + [SCHEMA_VERSION]
        with self.transaction() as con:
            con.execute(_insert_sql("environments", columns, " ON CONFLICT DO NOTHING"), values)

    def write_results(self, run_id: str, results: list[CellResult]) -> list[str]:
        """Record a batch of results and their graph breaks in one transaction."""
        if not results:
            return []
        for result in results:
            if result.status not in STATUSES:
                raise ValueError(f"result status {result.status!r} is not one of {STATUSES}")
        result_ids = [str(uuid.uuid4()) for _ in results]
        # Distinct, ordered times keep "latest by recorded_at" well defined within a batch.
        now = _now()
        recorded = [now + timedelta(microseconds=i) for i in range(len(results))]
        columns = ["result_id", "run_id", *RESULT_TYPES, "recorded_at", "schema_version"]
        selects = [
            "unnest(?::VARCHAR[])",
            "?",
            *(f"unnest(?::{sql}[])" for sql in RESULT_TYPES.values()),
            "unnest(?::TIMESTAMP[])",
            "?",
        ]
        values = [
            result_ids,
            run_id,
            *([getattr(r, name) for r in results] for name in RESULT_TYPES),
            recorded,
            SCHEMA_VERSION,
        ]
        breaks = [
            (result_id, result.cell_key, idx, brk)
            for result_id, result in zip(result_ids, results, strict=True)
            for idx, brk in enumerate(result.graph_breaks)
        ]
        with self.transaction() as con:
            if not con.execute("SELECT 1 FROM runs WHERE run_id = ?", [run_id]).fetchall():
                raise ValueError(f"no run {run_id!r} in {self.path}: call start_run first")
            names = ", ".join(f'"{name}"' for name in columns)
            con.execute(f"INSERT INTO results ({names}) SELECT {', '.join(selects)}", values)
            if breaks:
                con.execute(
                    "INSERT INTO graph_breaks (result_id, run_id, cell_key, idx, reason, "
                    "user_frame, count, schema_version) SELECT unnest(?::VARCHAR[]), ?, "
                    "unnest(?::VARCHAR[]), unnest(?::INTEGER[]), unnest(?::VARCHAR[]), "
                    "unnest(?::VARCHAR[]), unnest(?::BIGINT[]), ?",
                    [
                        [b[0] for b in breaks],
                        run_id,
                        [b[1] for b in breaks],
                        [b[2] for b in breaks],
                        [b[3].reason for b in breaks],
                        [b[3].user_frame for b in breaks],
                        [b[3].count for b in breaks],
                        SCHEMA_VERSION,
                    ],
                )
        return result_ids

    def latest_by_key(self, cell_keys: list[str]) -> dict[str, str]:
        """cell_key -> status of its latest recorded row, for the keys that have one."""
        if not cell_keys:
            return {}
        with self.connection(read_only=True) as con:
            rows = con.execute(
                "SELECT cell_key, status FROM results "
                "WHERE cell_key IN (SELECT unnest(?::VARCHAR[])) "
                "QUALIFY row_number() OVER (PARTITION BY cell_key ORDER BY recorded_at DESC) = 1",
                [list(cell_keys)],
            ).fetchall()
        return dict(rows)

    def results_for_run(self, run_id: str) -> list[dict[str, Any]]:
        with self.connection(read_only=True) as con:
            return _rows(
                con.execute("SELECT * FROM results WHERE run_id = ? ORDER BY recorded_at", [run_id])
            )

    def graph_breaks_for_run(self, run_id: str) -> list[dict[str, Any]]:
        with self.connection(read_only=True) as con:
            return _rows(
                con.execute(
                    "SELECT g.* FROM graph_breaks g JOIN results r USING (result_id) "
                    "WHERE g.run_id = ? ORDER BY r.recorded_at, g.idx",
                    [run_id],
                )
            )
