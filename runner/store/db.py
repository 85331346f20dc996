"""The single writer of the results database (``data/zoo.duckdb`` by default).

DuckDB allows one writer process and, while it writes, no reader from another process.
So the store never keeps the file open: every operation connects, does its work in one
transaction and closes, which lets the dashboard read between batches during a sweep.
When another process holds the file, connecting is retried for ``lock_timeout_s``.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb

from runner.matrix.clock import utc_naive, utc_now
from runner.matrix.labels import launch_bound_sql
from runner.matrix.phases import BUILD
from runner.matrix.process import alive
from runner.matrix.results import (
    CRASH,
    OOM,
    OUTLASTED_RUN,
    PASS,
    STATUSES,
    TIMEOUT,
    TRIAGE_INTERRUPTED,
    CellResult,
    GraphBreak,
    largest_peak_sql,
)
from runner.store.schema import (
    BREAK_COLUMNS,
    BREAK_TYPES,
    DEFAULT_DB_PATH,
    ENVIRONMENT_COLUMNS,
    MIGRATIONS,
    RESULT_TYPES,
    RUN_COLUMNS,
    RUN_STATUSES,
    SCHEMA_VERSION,
    RunRecord,
    apply_step,
    crowded_row,
    error_text,
    latest_row,
    one_autocast_region,
)
from zoo.errors import DatabaseLockedError, UsageError

LOCK_RETRY_SLEEP_S = 0.2


def _is_lock_conflict(error: duckdb.Error) -> bool:
    return isinstance(error, duckdb.IOException) and "Could not set lock" in str(error)


def _insert_sql(table: str, columns: tuple[str, ...] | list[str], suffix: str = "") -> str:
    names = ", ".join(f'"{name}"' for name in columns)
    marks = ", ".join("?" for _ in columns)
    return f"INSERT INTO {table} ({names}) VALUES ({marks}){suffix}"


def _rows(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


# What peaks are grouped by (``peak_reserved_mb``).
PEAK_BY = ("model_id", "family")


def peak_reserved_mb(
    con: duckdb.DuckDBPyConnection, names: list[str], device: str, by: str = "model_id"
) -> dict[tuple[str, str], float]:
    """(name, step) -> the largest memory a cell of the model (``by="family"``: of any
    model of the family) reserved at its peak on ``device``: its accuracy reference's,
    its compile's (schema 10), eager's or compiled's (``PEAK_COLUMNS``), over the newest
    row of each of its cells (a cell whose newest row recorded none, an ``oom`` say, adds
    nothing). What a cell of it is expected to take there (``runner.schedule.memory``).
    Rows from before schema version 7 recorded no reference peak: theirs may be several
    times their eager one (a float64 copy beside the model, activations four times
    autocast's) and is not guessed here (9 cells of H200 run 09ca5fa0 whose recorded
    peaks were 2-14 GiB ran out of memory in their float64 reference). ``con``: a connection to a store, or to any database with
    its results table (the shipped parquet loaded in memory, say)."""
    if by not in PEAK_BY:
        raise ValueError(f"peaks by model_id or family, not {by!r}")
    if not names:
        return {}
    rows = con.execute(
        f"WITH latest AS (SELECT {by} AS name, step, {largest_peak_sql()} AS peak "
        f"FROM results WHERE device = ? AND {by} IN (SELECT unnest(?::VARCHAR[])) "
        f"QUALIFY {latest_row()}) "
        "SELECT name, step, max(peak) FROM latest GROUP BY ALL",
        [device, list(names)],
    ).fetchall()
    return {(name, step): peak for name, step, peak in rows if peak and peak > 0}


class Store:
    """Reads and writes one zoo-matrix database file. Use ``Store.open`` to get one."""

    def __init__(self, path: str | os.PathLike = DEFAULT_DB_PATH, lock_timeout_s: float = 30.0):
        self.path = Path(path)
        self.lock_timeout_s = lock_timeout_s
        # The option of the command that names this path, for messages.
        self.flag = "--db"

    @classmethod
    def open(
        cls,
        path: str | os.PathLike = DEFAULT_DB_PATH,
        lock_timeout_s: float = 30.0,
        *,
        flag: str = "--db",
        writable: bool = True,
    ) -> Store:
        """Validate ``path``, create the database if missing and migrate it to this version.

        Bad input raises ``UsageError`` and leaves the file as it was; its message names
        the command's option for the path (``flag``). ``writable=False``: the caller
        only reads (a dry run), so a file that cannot be written is no error.
        """
        store = cls(path, lock_timeout_s)
        store.flag = flag
        store._check_path(writable)
        try:
            if store.path.exists() and store._read_version() == SCHEMA_VERSION:
                return store
            store._migrate()
        except duckdb.Error as error:
            if "not a valid DuckDB database" in str(error):
                raise UsageError(
                    f"{store.path} is not a DuckDB database. zoo-matrix left it untouched: "
                    f"move it aside or pass a different database path ({flag})."
                ) from None
            raise UsageError(
                f"cannot open the database {store.path}: {error_text(error)}. "
                f"Check the path and its permissions, or pass a different one ({flag})."
            ) from None
        return store

    def _check_path(self, writable: bool) -> None:
        flag = self.flag
        if self.path.is_dir():
            raise UsageError(
                f"{self.path} is a directory; the database path must name a file "
                f"(e.g. {self.path / 'zoo.duckdb'})."
            )
        if self.path.exists():
            if writable:
                self._check_writable()
            return
        parent = self.path.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UsageError(
                f"cannot create the directory {parent} for the database {self.path} "
                f"({error.strerror}). Pass a database path in a writable directory ({flag})."
            ) from None
        if not os.access(parent, os.W_OK | os.X_OK):
            raise UsageError(
                f"cannot create the database {self.path}: {parent} is not writable. "
                f"Pass a database path in a writable directory ({flag})."
            )

    def _check_writable(self) -> None:
        """An existing file must open for writing, and its folder take DuckDB's write-ahead
        log. Opened rather than asked (os.access): root passes every permission check,
        but not an immutable file (chattr +i) or a read-only mount."""
        flag = self.flag
        try:
            os.close(os.open(self.path, os.O_RDWR))
        except OSError as error:
            raise UsageError(
                f"cannot write to the database {self.path} ({error.strerror}). Make it "
                f"writable, or pass a different database path ({flag})."
            ) from None
        parent = self.path.parent
        if not os.access(parent, os.W_OK | os.X_OK):
            raise UsageError(
                f"cannot write to the database {self.path}: its directory {parent} is not "
                f"writable, and DuckDB writes a log beside the file. Pass a database path "
                f"in a writable directory ({flag})."
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
                    f"Pass a different database path ({self.flag})."
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
            for version, steps in MIGRATIONS:
                if version <= current:
                    continue
                for step in steps:
                    apply_step(con, step)
                con.execute("INSERT INTO schema_version VALUES (?, ?)", [version, utc_now()])

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
        row["started_at"] = utc_naive(run.started_at)
        row["finished_at"] = utc_naive(run.finished_at)
        row["schema_version"] = SCHEMA_VERSION
        with self.transaction() as con:
            con.execute(_insert_sql("runs", RUN_COLUMNS), [row[name] for name in RUN_COLUMNS])

    def finish_run(self, run_id: str, status: str, cells_recorded: int) -> None:
        if status not in RUN_STATUSES or status in ("running", "abandoned"):
            raise ValueError(f"a run finishes as finished, interrupted or failed, not {status!r}")
        with self.transaction() as con:
            updated = con.execute(
                "UPDATE runs SET status = ?, finished_at = ?, cells_recorded = ? "
                "WHERE run_id = ? RETURNING run_id",
                [status, utc_now(), cells_recorded, run_id],
            ).fetchall()
            if not updated:
                raise ValueError(f"no run {run_id!r} in {self.path}")

    def abandon_dead_runs(self) -> list[tuple[str, int]]:
        """Mark ``abandoned`` every run still ``running`` whose process is gone (killed
        before it could finish its run: SIGKILL, the host's reboot), with the count of
        rows it did record and its last row's time as its end; (run id, rows) of each.
        Runs whose owner this process cannot judge (another host, no pid) stay as they
        are (``runner.matrix.process.alive``)."""
        with self.connection(read_only=True) as con:
            running = con.execute(
                "SELECT run_id, host, pid, pid_started FROM runs WHERE status = 'running'"
            ).fetchall()
        dead = [run_id for run_id, *owner in running if not alive(*owner)]
        if not dead:
            return []
        with self.transaction() as con:
            return con.execute(
                "UPDATE runs SET status = 'abandoned', "
                "cells_recorded = (SELECT count(*) FROM results r WHERE r.run_id = runs.run_id), "
                "finished_at = coalesce((SELECT max(recorded_at) FROM results r "
                "WHERE r.run_id = runs.run_id), started_at) "
                "WHERE status = 'running' AND run_id IN (SELECT unnest(?::VARCHAR[])) "
                "RETURNING run_id, cells_recorded",
                [dead],
            ).fetchall()

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
        now = utc_now()
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
                names = ", ".join(f'"{name}"' for name in BREAK_COLUMNS)
                con.execute(
                    "INSERT INTO graph_breaks (result_id, run_id, cell_key, idx, "
                    f"{names}, schema_version) SELECT unnest(?::VARCHAR[]), ?, "
                    "unnest(?::VARCHAR[]), unnest(?::INTEGER[]), "
                    + ", ".join(f"unnest(?::{sql}[])" for sql in BREAK_TYPES.values())
                    + ", ?",
                    [
                        [b[0] for b in breaks],
                        run_id,
                        [b[1] for b in breaks],
                        [b[2] for b in breaks],
                        *([getattr(b[3], name) for b in breaks] for name in BREAK_COLUMNS),
                        SCHEMA_VERSION,
                    ],
                )
        return result_ids

    def latest_by_key(self, cell_keys: list[str]) -> dict[str, str]:
        """cell_key -> status of its latest recorded row, for the keys that have one."""
        return {key: status for key, status in self._latest(cell_keys, "status")}

    def untriaged(self, cell_keys: list[str], statuses: tuple[str, ...]) -> set[str]:
        """The keys whose latest row has one of ``statuses`` and no triage verdict (none
        was asked for, or the run's end cut its triage job off)."""
        return {
            key
            for key, status, rung in self._latest(cell_keys, "status, triage_rung")
            if status in statuses and rung in (None, TRIAGE_INTERRUPTED)
        }

    def latest_results(self, cell_keys: list[str]) -> dict[str, tuple[str, CellResult]]:
        """cell_key -> (run id, result) of the latest row of each of ``cell_keys`` that
        has one, its graph breaks included: a recorded cell as the runner made it."""
        names = ", ".join(f'"{name}"' for name in RESULT_TYPES)
        rows = self._latest(cell_keys, f"result_id, run_id, {names}")
        if not rows:
            return {}
        breaks: dict[str, list[GraphBreak]] = {}
        columns = ", ".join(f'"{name}"' for name in BREAK_COLUMNS)
        with self.connection(read_only=True) as con:
            for result_id, *values in con.execute(
                f"SELECT result_id, {columns} FROM graph_breaks "
                "WHERE result_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY result_id, idx",
                [[row[1] for row in rows]],
            ).fetchall():
                breaks.setdefault(result_id, []).append(
                    GraphBreak(**dict(zip(BREAK_COLUMNS, values, strict=True)))
                )
        found = {}
        for _key, result_id, run_id, *values in rows:
            result = CellResult(**dict(zip(RESULT_TYPES, values, strict=True)))
            result.graph_breaks = breaks.get(result_id, [])
            found[result.cell_key] = (run_id, result)
        return found

    def timed_out(self, cell_keys: list[str]) -> dict[str, float | None]:
        """cell_key -> the wall seconds it ran, of the keys whose latest row is a
        ``timeout``: how long it had before it was stopped."""
        return {
            key: wall_s
            for key, status, wall_s in self._latest(cell_keys, "status, wall_s")
            if status == TIMEOUT
        }

    def outlasted_time_limit(self, cell_keys: list[str]) -> set[str]:
        """The keys whose latest row is a ``timeout`` stopped at the end of a time-limited
        run it could not end within (``runner.matrix.results.OUTLASTED_RUN``)."""
        return {
            key
            for key, status, error_type in self._latest(cell_keys, "status, error_type")
            if status == TIMEOUT and error_type == OUTLASTED_RUN
        }

    def crashed_alike(self, cell_keys: list[str]) -> set[str]:
        """The keys whose two newest rows are both a ``crash`` in the same phase: a
        process that died the same way twice (on the H200, DepthProModel was killed in its
        accuracy check in runs 246831d2 and 6da265a4, then a fourth attempt took a
        crowded retry run's first 2.5 minutes) most likely dies so again, and
        ``--retry-failed`` leaves it to ``--force``."""
        if not cell_keys:
            return set()
        with self.connection(read_only=True) as con:
            rows = con.execute(
                "SELECT cell_key FROM (SELECT cell_key, status, error_phase, row_number() "
                "OVER (PARTITION BY cell_key ORDER BY recorded_at DESC, result_id DESC) AS n "
                "FROM results WHERE cell_key IN (SELECT unnest(?::VARCHAR[]))) "
                "WHERE n <= 2 GROUP BY cell_key HAVING count(*) = 2 "
                "AND bool_and(status = ?) AND count(DISTINCT coalesce(error_phase, '')) = 1",
                [list(cell_keys), CRASH],
            ).fetchall()
        return {key for (key,) in rows}

    def out_of_memory_building(self, cell_keys: list[str]) -> set[str]:
        """The keys whose latest row ran out of memory building its model with no other
        process crowding it: the model does not fit this device at any batch (the
        batch takes no part in building it; ``runner.plan.smaller_batch``), so
        ``--retry-failed`` leaves it to ``--force``."""
        return {
            key
            for key, status, phase, crowded in self._latest(
                cell_keys, f"status, error_phase, {crowded_row()}"
            )
            if status == OOM and phase == BUILD and not crowded
        }

    def crowded(self, cell_keys: list[str]) -> set[str]:
        """The keys whose latest row ran out of memory beside other processes
        (``runner.matrix.results.CROWDED`` in its notes)."""
        return {key for key, crowded in self._latest(cell_keys, crowded_row()) if crowded}

    def peak_reserved_mb(
        self, names: list[str], device: str, by: str = "model_id"
    ) -> dict[tuple[str, str], float]:
        """``peak_reserved_mb`` over this store."""
        if not names and by in PEAK_BY:
            return {}
        with self.connection(read_only=True) as con:
            return peak_reserved_mb(con, names, device, by)

    def recorded_walls(self, cell_keys: list[str]) -> dict[str, float]:
        """cell_key -> the wall seconds its newest row took (from its hand-out to its
        result, waits included), where it took some: what a run expects of the cell
        (``runner.schedule.memory.EXPECTED_S``)."""
        return {
            key: float(wall)
            for key, wall in self._latest(cell_keys, "wall_s")
            if wall is not None and wall > 0
        }

    def disturbed(self, cell_keys: list[str], ratio: float) -> set[str]:
        """The keys whose latest row's timing was disturbed: a side's median ``ratio``
        times its fastest sample or more (``timing_disturbance``)."""
        return {
            key
            for key, disturbance in self._latest(cell_keys, "timing_disturbance")
            if disturbance is not None and disturbance >= ratio
        }

    def timed_in_one_region(self, cell_keys: list[str]) -> set[str]:
        """The keys whose latest row passed, timed inside one autocast region
        (``one_autocast_region``): measured again, since their speedup and memory do not
        compare with rows timed per call. A failure's status does not depend on it."""
        return {
            key
            for key, stale in self._latest(
                cell_keys, f"status = '{PASS}' AND {one_autocast_region()}"
            )
            if stale
        }

    def launch_bound(self, cell_keys: list[str]) -> set[str]:
        """The keys whose latest row's eager side was launch-bound: its fastest call
        took ``LAUNCH_BOUND_RATIO`` times its GPU busy time or more
        (``runner.matrix.labels.is_launch_bound``). Rows without a GPU profile are not."""
        fastest = "coalesce(list_min(eager_samples_ms), eager_ms)"
        return {
            key
            for key, bound in self._latest(cell_keys, launch_bound_sql(fastest, "eager_gpu_ms"))
            if bound
        }

    def _latest(self, cell_keys: list[str], columns: str) -> list[tuple]:
        """(cell_key, *columns) of the latest row of each of ``cell_keys`` that has one."""
        if not cell_keys:
            return []
        with self.connection(read_only=True) as con:
            return con.execute(
                f"SELECT cell_key, {columns} FROM results "
                "WHERE cell_key IN (SELECT unnest(?::VARCHAR[])) "
                f"QUALIFY {latest_row()}",
                [list(cell_keys)],
            ).fetchall()

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
