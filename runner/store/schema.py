"""The database's schema, as data: tables, their columns and row identities, the
migrations that make them, the default paths, and the SQL that picks a cell's latest row.

Imports neither torch nor anything that writes: the store (``runner.store.db``), export,
merge and the dashboard all take their tables from here.
"""

from __future__ import annotations

import functools
import os
import re
import types
import typing
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from runner.matrix.cells import KEY_FIELDS, cell_key
from runner.matrix.clock import utc_now
from runner.matrix.fingerprint import TORCH_PROCESS, XLA_PROCESS, environment_id
from runner.matrix.process import current_host, start_token
from runner.matrix.results import CROWDED, OOM, CellResult, GraphBreak, result_columns

DEFAULT_DB_PATH = Path("data/zoo.duckdb")
DEFAULT_RUNS_DIR = Path("data/runs")
SCHEMA_VERSION = 10
# abandoned: the run's process died without finishing it (killed, the host rebooted);
# a later run on its host found it so (runner.matrix.process) and counted its rows.
RUN_STATUSES = ("running", "finished", "interrupted", "failed", "abandoned")

# Parents before children, so a reader never sees a result whose run is missing.
TABLES = ("environments", "runs", "results", "graph_breaks")
# What identifies a row of each table: a row already present by these is the same row
# (merge skips it, the dashboard keeps it once).
IDENTITY = {
    "environments": ("env_id",),
    "runs": ("run_id",),
    "results": ("result_id",),
    "graph_breaks": ("result_id", "idx"),
}


def error_text(error: BaseException) -> str:
    """A DuckDB error as a person reads it: its first paragraph, without the statement
    and the carets under it that DuckDB appends (our SQL, not the user's problem)."""
    return str(error).split("\n\nLINE ", 1)[0].strip()


def crowded_row(alias: str = "") -> str:
    """The SQL condition that a results row ran out of memory beside other processes
    (``runner.matrix.results.CROWDED`` in its notes): its neighbours' doing, not its
    model's, so it says nothing about its cell but that this run could not measure it."""
    prefix = f"{alias}." if alias else ""
    crowded = CROWDED.replace("'", "''")
    return f"({prefix}status = '{OOM}' AND contains(coalesce({prefix}notes, ''), '{crowded}'))"


def one_autocast_region(alias: str = "") -> str:
    """The SQL condition that a results row was timed inside one autocast region: its
    ``precision_treatment`` is the label cells wrote before each call entered autocast
    itself (``runner.backends.base.Sides``; now ``autocast bf16 per call``). Its eager
    calls after the first reused autocast's weight casts, so its speedup reads low and
    its compiled peak memory high (docs/PERFORMANCE.md, "Autocast's scope")."""
    prefix = f"{alias}." if alias else ""
    return f"coalesce({prefix}precision_treatment = 'autocast ' || {prefix}precision, false)"


def latest_row(partition: str = "cell_key", alias: str = "") -> str:
    """The window condition that keeps the row that stands for each ``partition``
    (results are history: every rerun of a cell stays). That is its newest row by
    recorded_at, the greater result_id breaking ties (as the dashboard's ``max_by``
    picks), except that a crowded row (``crowded_row``) never hides a measured one: a
    cell measured once and crowded out of memory in a later run keeps its measurement,
    and a cell crowded out every time shows the newest crowding.
    ``alias``: the results table's alias in the query."""
    prefix = f"{alias}." if alias else ""
    return (
        f"row_number() OVER (PARTITION BY {partition} ORDER BY {crowded_row(alias)}, "
        f"{prefix}recorded_at DESC, {prefix}result_id DESC) = 1"
    )


# A step of a migration: a statement, or a function of the connection for what SQL
# cannot say (re-keying rows).
Step = str | Callable[[duckdb.DuckDBPyConnection], None]

# Migrations are frozen once released: a database at version N has exactly the tables
# that migrations 1..N made, whatever the dataclasses look like today. A new CellResult
# field therefore needs a new migration (ALTER TABLE results ADD COLUMN ...);
# tests/test_store.py checks that the results table matches the dataclass.
MIGRATIONS: list[tuple[int, tuple[Step, ...]]] = [
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
    (
        3,
        (
            # One profiled call per side: GPU busy time, kernels, the host's share.
            "ALTER TABLE results ADD COLUMN timing_disturbance DOUBLE",
            "ALTER TABLE results ADD COLUMN eager_gpu_ms DOUBLE",
            "ALTER TABLE results ADD COLUMN compiled_gpu_ms DOUBLE",
            "ALTER TABLE results ADD COLUMN gpu_speedup DOUBLE",
            "ALTER TABLE results ADD COLUMN eager_kernels BIGINT",
            "ALTER TABLE results ADD COLUMN compiled_kernels BIGINT",
            "ALTER TABLE results ADD COLUMN eager_host_ms DOUBLE",
            "ALTER TABLE results ADD COLUMN compiled_host_ms DOUBLE",
            "ALTER TABLE results ADD COLUMN profile_s DOUBLE",
            # The batch that ran, where an out-of-memory retry halved the one asked for.
            "ALTER TABLE results ADD COLUMN batch_size_run BIGINT",
            # Which process kind's versions an environment id hashes.
            "ALTER TABLE environments ADD COLUMN fingerprint VARCHAR",
            # Ids of torch.compile cells hash the torch stack only, no longer jax and
            # torchax: re-key the rows written before.
            lambda con: rekey_by_fingerprint(con),
        ),
    ),
    (
        4,
        (
            # The export and aot_inductor backends: what torch.export made of the model.
            "ALTER TABLE results ADD COLUMN graph_nodes BIGINT",
            "ALTER TABLE results ADD COLUMN graph_ops BIGINT",
            "ALTER TABLE results ADD COLUMN dynamic_dims VARCHAR",
            "ALTER TABLE results ADD COLUMN export_issues VARCHAR",
            # Which compared tensors failed the accuracy rule (training compares many).
            "ALTER TABLE results ADD COLUMN accuracy_failed VARCHAR",
            # Why it broke: break types and registry ids, events, recompile reasons,
            # the triage ladder's verdict.
            "ALTER TABLE results ADD COLUMN graph_break_events BIGINT",
            "ALTER TABLE results ADD COLUMN break_types VARCHAR",
            "ALTER TABLE results ADD COLUMN recompile_reasons VARCHAR",
            "ALTER TABLE results ADD COLUMN triage_rung VARCHAR",
            "ALTER TABLE results ADD COLUMN triage_detail VARCHAR",
            "ALTER TABLE results ADD COLUMN triage_bisect VARCHAR",
            "ALTER TABLE graph_breaks ADD COLUMN break_type VARCHAR",
            "ALTER TABLE graph_breaks ADD COLUMN registry_id VARCHAR",
            "ALTER TABLE graph_breaks ADD COLUMN hints VARCHAR",
        ),
    ),
    (
        5,
        (
            # A new run status, abandoned, and who owns a running run (host, pid, start
            # token: runner.matrix.process). DuckDB cannot alter a CHECK constraint,
            # so the table is made again with the rows of before.
            "CREATE TABLE runs_v4 AS SELECT * FROM runs",
            "DROP TABLE runs",
            """
            CREATE TABLE runs (
                run_id VARCHAR PRIMARY KEY,
                label VARCHAR,
                command VARCHAR,
                started_at TIMESTAMP,
                finished_at TIMESTAMP,
                status VARCHAR CHECK (
                    status IN ('running', 'finished', 'interrupted', 'failed', 'abandoned')
                ),
                host VARCHAR,
                device VARCHAR,
                gpu VARCHAR,
                env_id VARCHAR,
                zoo_version VARCHAR,
                cells_planned INTEGER,
                cells_recorded INTEGER,
                schema_version INTEGER NOT NULL,
                pid BIGINT,
                pid_started VARCHAR
            )
            """,
            "INSERT INTO runs BY NAME SELECT * FROM runs_v4",
            "DROP TABLE runs_v4",
            # --triage minify: the minifier's verdict and the repro script it wrote.
            "ALTER TABLE results ADD COLUMN triage_minify VARCHAR",
            "ALTER TABLE results ADD COLUMN triage_repro VARCHAR",
            # --trace: the failing rung's structured trace and tlparse report.
            "ALTER TABLE results ADD COLUMN triage_trace VARCHAR",
        ),
    ),
    (
        6,
        (
            # What a cell cost its GPU: seconds held alone to time, and to autotune.
            "ALTER TABLE results ADD COLUMN gpu_timing_s DOUBLE",
            "ALTER TABLE results ADD COLUMN gpu_tuning_s DOUBLE",
        ),
    ),
    (
        7,
        # What the accuracy reference reserved at its peak.
        ("ALTER TABLE results ADD COLUMN reference_peak_reserved_mb DOUBLE",),
    ),
    (
        8,
        # How many other cells compiled beside it while it compiled.
        ("ALTER TABLE results ADD COLUMN compile_beside DOUBLE",),
    ),
    (
        9,
        (
            # How crowded the host was while the cell was timed, and how fast it launched.
            "ALTER TABLE results ADD COLUMN timing_beside DOUBLE",
            "ALTER TABLE results ADD COLUMN host_launch_us DOUBLE",
        ),
    ),
    (
        10,
        (
            # What a cell holds while it compiles, and its compile's peak.
            "ALTER TABLE results ADD COLUMN resident_mb DOUBLE",
            "ALTER TABLE results ADD COLUMN compile_peak_reserved_mb DOUBLE",
        ),
    ),
]


def apply_step(con: duckdb.DuckDBPyConnection, step: Step) -> None:
    if isinstance(step, str):
        con.execute(step)
    else:
        step(con)


# The backends whose cells ran in XLA processes when schema version 2 was current: the
# rows re-keyed by version 3 are those of every other backend.
_XLA_BACKENDS_V2 = ("xla", "xla_export", "torch_xla")
_PARAM_LIMIT = re.compile(r"--max-params[ =](\S+)")


def rekey_by_fingerprint(con: duckdb.DuckDBPyConnection) -> None:
    """Rows written before environment ids had process kinds carry, in torch.compile
    cells too, the id of every version (jax and torchax included): give those the id of
    their torch stack, and the cell key that follows; add the environment rows the new
    ids name. XLA cells keep theirs (the XLA fingerprint is the old list). Only rows
    written before version 3 are touched, and those already on their torch stack's id
    are left alone, so merge runs it after every merge (``runner.store.merge``): rows of
    older exports arrive with the keys of this version."""
    old = (
        "schema_version < 3 AND backend NOT IN (SELECT unnest(?::VARCHAR[]))",
        [list(_XLA_BACKENDS_V2)],
    )
    referenced = [
        row[0]
        for row in con.execute(
            f"SELECT DISTINCT env_id FROM results WHERE {old[0]}", old[1]
        ).fetchall()
    ]
    names = [row[0] for row in con.execute("DESCRIBE environments").fetchall()]
    envs = {
        row[0]: dict(zip(names, row, strict=True))
        for row in con.execute(
            "SELECT * FROM environments WHERE env_id IN (SELECT unnest(?::VARCHAR[]))",
            [referenced],
        ).fetchall()
    }
    known = {row[0] for row in con.execute("SELECT env_id FROM environments").fetchall()}
    moved: dict[str, str] = {}
    for env_id, env in envs.items():
        torch_id = environment_id(env, TORCH_PROCESS)
        if torch_id == env_id:
            continue
        moved[env_id] = torch_id
        # The old row stays for the XLA cells, whose id it is.
        con.execute(
            "UPDATE environments SET fingerprint = ? WHERE env_id = ? AND fingerprint IS NULL",
            [XLA_PROCESS, env_id],
        )
        if torch_id not in known:
            row = {**env, "env_id": torch_id, "fingerprint": TORCH_PROCESS}
            columns = ", ".join(f'"{name}"' for name in row)
            marks = ", ".join("?" for _ in row)
            con.execute(
                f"INSERT INTO environments ({columns}) VALUES ({marks})", list(row.values())
            )
            known.add(torch_id)
    if not moved:
        return
    commands = dict(con.execute("SELECT run_id, command FROM runs").fetchall())
    rows = con.execute(
        "SELECT result_id, run_id, cell_key, " + ", ".join(KEY_FIELDS) + " FROM results "
        f"WHERE {old[0]} AND env_id IN (SELECT unnest(?::VARCHAR[]))",
        [*old[1], list(moved)],
    ).fetchall()
    updates = []
    for result_id, run_id, old_key, *values in rows:
        fields = dict(zip(KEY_FIELDS, values, strict=True))
        limit = _build_limit(old_key, fields, commands.get(run_id) or "")
        if limit is False:
            continue  # a key this version cannot reproduce: left as it was
        new_fields = {**fields, "env_id": moved[fields["env_id"]]}
        updates.append((result_id, new_fields["env_id"], cell_key(new_fields, build_limit=limit)))
    if updates:
        con.execute(
            "CREATE TEMP TABLE rekeyed (result_id VARCHAR, env_id VARCHAR, cell_key VARCHAR)"
        )
        con.executemany("INSERT INTO rekeyed VALUES (?, ?, ?)", updates)
        con.execute(
            "UPDATE results SET env_id = k.env_id, cell_key = k.cell_key FROM rekeyed k "
            "WHERE results.result_id = k.result_id"
        )
        con.execute(
            "UPDATE graph_breaks SET cell_key = k.cell_key FROM rekeyed k "
            "WHERE graph_breaks.result_id = k.result_id"
        )
        con.execute("DROP TABLE rekeyed")
    con.execute(
        "UPDATE runs SET env_id = m.new_id FROM (SELECT unnest(?::VARCHAR[]) AS old_id, "
        "unnest(?::VARCHAR[]) AS new_id) m WHERE runs.env_id = m.old_id "
        "AND runs.schema_version < 3",
        [list(moved), list(moved.values())],
    )


def _build_limit(key: str, fields: dict[str, Any], command: str) -> int | bool | None:
    """The parameter limit a stored key was made with (``Cell.key``): None for the
    default one, the run command's ``--max-params`` otherwise; False when neither
    reproduces the key."""
    if cell_key(fields) == key:
        return None
    match = _PARAM_LIMIT.search(command)
    if match:
        from zoo.spec import parse_param_count

        try:
            limit = parse_param_count(match.group(1))
        except ValueError:
            return False
        if cell_key(fields, build_limit=limit) == key:
            return limit
    return False


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
    "fingerprint",
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


def schema_columns(table: str) -> list[tuple[str, str]]:
    """(name, SQL type) of every column the migrations give ``table``, in order."""
    return _schema_columns()[table]


@functools.cache
def _schema_columns() -> dict[str, list[tuple[str, str]]]:
    with duckdb.connect(":memory:") as con:
        for _, steps in MIGRATIONS:
            for step in steps:
                apply_step(con, step)
        return {
            table: [(name, sql) for name, sql, *_ in con.execute(f"DESCRIBE {table}").fetchall()]
            for table in TABLES
        }


def empty_table_sql(table: str) -> str:
    """A statement creating ``table`` empty, with the columns every migration gave it:
    readers with no data use it to get a table with the right columns."""
    if table not in TABLES:
        raise ValueError(f"no migration creates table {table!r}")
    definitions = ", ".join(f'"{name}" {sql}' for name, sql in schema_columns(table))
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
# ``graph_breaks`` columns from ``GraphBreak`` (beside result_id, run_id, cell_key, idx).
BREAK_TYPES = {
    f.name: sql_type(typing.get_type_hints(GraphBreak)[f.name]) for f in fields(GraphBreak)
}
BREAK_COLUMNS = tuple(BREAK_TYPES)


@dataclass
class RunRecord:
    """One row of ``runs``: one ``zoo-run`` invocation. Times are UTC."""

    run_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    label: str | None = None
    command: str = ""
    started_at: datetime = field(default_factory=utc_now)
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
    # The process that runs it (runner.matrix.process): how a later run tells a dead
    # run from one still running elsewhere.
    pid: int | None = None
    pid_started: str | None = None

    @classmethod
    def starting(cls, env: dict[str, Any], device: str, **values: Any) -> RunRecord:
        """A run starting now on this host, in the environment ``env``
        (``runner.env.capture``); ``values``: label, command, cells_planned, ..."""
        gpu = env.get("gpu")
        pid = os.getpid()
        return cls(
            run_id=str(uuid.uuid4()),
            started_at=datetime.now(UTC),
            host=current_host(),
            pid=pid,
            pid_started=start_token(pid),
            device=device,
            gpu=None if gpu in (None, "absent") else gpu,
            env_id=str(env["env_id"]),
            **values,
        )


RUN_COLUMNS = tuple(f.name for f in fields(RunRecord))
