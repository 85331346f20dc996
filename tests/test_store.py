import hashlib
import math
import subprocess
import sys
import time
from datetime import UTC, datetime

import duckdb
import pytest

from runner.cli.export import main
from runner.matrix.process import start_token
from runner.matrix.results import CROWDED, GraphBreak, result_columns
from runner.store.db import Store
from runner.store.export import export_runs
from runner.store.schema import (
    MIGRATIONS,
    RESULT_TYPES,
    RUN_COLUMNS,
    SCHEMA_VERSION,
    RunRecord,
    apply_step,
)
from tests.results import make_result
from zoo.errors import DatabaseLockedError, UsageError

ENV = {
    "env_id": "env-a",
    "python": "3.11.7",
    "torch": "2.5.1",
    "triton": "3.1.0",
    "cuda": "12.4",
    "gpu": "NVIDIA H200",
    "timm": "1.0.11",
    "transformers": "4.46.0",
    "jax": "absent",
    "jaxlib": "absent",
    "torchax": "absent",
    "torch_xla": "absent",
    "driver": "550.54",
    "cudnn": "90100",
    "gpu_count": 8,
    "gpu_memory_gb": 139.8,
    "cpu": "x86_64",
    "cpu_count": 128,
    "host": "node-1",
    "platform": "Linux (cpython)",
    "captured_at": "2025-01-01T00:00:00+00:00",
}

# Holds the database open for writing from another process, as a second zoo-run would.
HOLD_LOCK = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("SELECT 1")
print("held", flush=True)
time.sleep(float(sys.argv[2]))
con.close()
"""


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def db(tmp_path):
    return tmp_path / "data" / "zoo.duckdb"


@pytest.fixture
def store(db):
    return Store.open(db)


def start(store: Store, label: str | None = None) -> str:
    run = RunRecord(command="zoo-run --models resnet18", label=label, env_id="env-a")
    store.start_run(run)
    return run.run_id


def test_open_creates_the_current_schema(db):
    Store.open(db)
    Store.open(db)  # reopening an up-to-date database is a no-op
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT version FROM schema_version ORDER BY version").fetchall() == [
            (version,) for version in range(1, SCHEMA_VERSION + 1)
        ]
        tables = {row[0] for row in con.execute("SHOW TABLES").fetchall()}
        columns = dict(
            con.execute("SELECT column_name, column_type FROM (DESCRIBE results)").fetchall()
        )
        run_columns = [row[0] for row in con.execute("DESCRIBE runs").fetchall()]
    finally:
        con.close()
    assert tables == {"schema_version", "runs", "environments", "results", "graph_breaks"}
    assert sorted(run_columns) == sorted(RUN_COLUMNS)
    # The frozen migrations must match the CellResult dataclass: a new field needs one.
    assert {name: columns[name] for name in result_columns()} == RESULT_TYPES
    assert set(columns) - set(RESULT_TYPES) == {
        "result_id",
        "run_id",
        "recorded_at",
        "schema_version",
    }


def test_a_version_1_database_is_migrated_and_keeps_its_rows(db):
    db.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(db))
    try:
        con.execute(
            "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMP)"
        )
        for statement in MIGRATIONS[0][1]:
            con.execute(statement)
        con.execute("INSERT INTO schema_version VALUES (1, NULL)")
        con.execute(
            "INSERT INTO results (result_id, run_id, cell_key, status, recorded_at, "
            "schema_version) VALUES ('r1', 'run', 'key', 'pass', now(), 1)"
        )
    finally:
        con.close()
    Store.open(db)
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT max(version) FROM schema_version").fetchone() == (
            SCHEMA_VERSION,
        )
        assert con.execute(
            "SELECT cell_key, first_call_s, schema_version FROM results"
        ).fetchall() == [("key", None, 1)]
        columns = {row[0] for row in con.execute("DESCRIBE environments").fetchall()}
    finally:
        con.close()
    assert "xla_routes" in columns


def test_a_version_4_database_gets_the_abandoned_status_and_keeps_its_runs(db):
    # Version 4 as released: migrations 1 to 4, with runs of every status it knew.
    db.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(db)) as con:
        con.execute(
            "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMP)"
        )
        for version, steps in MIGRATIONS[:4]:
            for step in steps:
                apply_step(con, step)
            con.execute("INSERT INTO schema_version VALUES (?, NULL)", [version])
        for number, status in enumerate(("running", "finished", "interrupted", "failed")):
            con.execute(
                "INSERT INTO runs (run_id, label, status, host, cells_planned, cells_recorded, "
                "started_at, schema_version) VALUES (?, 'old', ?, 'node-1', 4, ?, now(), 4)",
                [f"run-{number}", status, number],
            )
        con.execute(
            "INSERT INTO results (result_id, run_id, cell_key, status, recorded_at, "
            "schema_version) VALUES ('r1', 'run-0', 'key', 'pass', now(), 4)"
        )
        before = con.execute("SELECT * FROM runs ORDER BY run_id").fetchall()
    store = Store.open(db)
    with duckdb.connect(str(db)) as con:
        assert con.execute("SELECT max(version) FROM schema_version").fetchone() == (
            SCHEMA_VERSION,
        )
        # Rows recorded before version 6 kept no GPU-alone seconds.
        assert con.execute("SELECT gpu_timing_s, gpu_tuning_s FROM results").fetchall() == [
            (None, None)
        ]
        after = con.execute("SELECT * EXCLUDE (pid, pid_started) FROM runs ORDER BY run_id")
        assert after.fetchall() == before
        assert con.execute("SELECT DISTINCT pid, pid_started FROM runs").fetchall() == [
            (None, None)
        ]
        # The new status is allowed, an unknown one still is not, nor a second run-0.
        con.execute("UPDATE runs SET status = 'abandoned' WHERE run_id = 'run-0'")
        with pytest.raises(duckdb.ConstraintException):
            con.execute("UPDATE runs SET status = 'lost' WHERE run_id = 'run-1'")
        with pytest.raises(duckdb.ConstraintException):
            con.execute("INSERT INTO runs (run_id, schema_version) VALUES ('run-1', 5)")
    assert store.get_run("run-0").status == "abandoned"
    assert [row["result_id"] for row in store.results_for_run("run-0")] == ["r1"]


def test_runs_of_dead_processes_are_abandoned_and_live_ones_left_alone(store):
    dead = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    dead_token = start_token(dead.pid)
    dead.kill()
    dead.wait()
    me = RunRecord.starting({"env_id": "env-a"}, "cpu", command="zoo-run")
    runs = {
        "dead": RunRecord(host=me.host, pid=dead.pid, pid_started=dead_token),
        # Its pid lives on in another process (this one): the start token tells them apart.
        "reused": RunRecord(host=me.host, pid=me.pid, pid_started=dead_token),
        "live": me,
        "elsewhere": RunRecord(host="another-host", pid=dead.pid, pid_started=dead_token),
        "before-owners": RunRecord(host=me.host),
        "finished": RunRecord(host=me.host, pid=dead.pid, pid_started=dead_token),
    }
    for name, run in runs.items():
        run.run_id, run.started_at = name, datetime(2026, 1, 1, tzinfo=UTC)
        store.start_run(run)
    store.finish_run("finished", "finished", 0)
    store.write_results("dead", [make_result("a"), make_result("b")])
    assert sorted(store.abandon_dead_runs()) == [("dead", 2), ("reused", 0)]
    status = {name: store.get_run(name).status for name in runs}
    assert status == {
        "dead": "abandoned",
        "reused": "abandoned",
        "live": "running",
        "elsewhere": "running",
        "before-owners": "running",
        "finished": "finished",
    }
    dead_run = store.get_run("dead")
    assert dead_run.cells_recorded == 2 and dead_run.finished_at > dead_run.started_at
    assert store.get_run("reused").finished_at == store.get_run("reused").started_at
    assert store.abandon_dead_runs() == []  # once


def test_runs_results_and_graph_breaks_round_trip(store):
    started = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
    run = RunRecord(command="zoo-run", started_at=started, env_id="env-a", cells_planned=2)
    store.start_run(run)
    first = make_result(
        "key-1",
        eager_samples_ms=[1.5, 2.25, float("nan")],
        compiled_samples_ms=[],
        probe_ok=False,
        accuracy_pass=True,
        max_abs_error=float("nan"),
        param_count=11_689_512,
        graph_breaks=[
            GraphBreak("call to print", "model.py:12", 3),
            GraphBreak("data-dependent branch"),
        ],
    )
    second = make_result("key-2", status="compile_error", error_message="it's 'quoted'")
    ids = store.write_results(run.run_id, [first, second])
    assert len(set(ids)) == 2

    rows = store.results_for_run(run.run_id)
    assert [row["result_id"] for row in rows] == ids
    for row, result in zip(rows, [first, second], strict=True):
        expected = result.to_dict()
        del expected["graph_breaks"]
        got = {name: row[name] for name in result_columns()}
        for name in ("eager_samples_ms", "max_abs_error"):
            # NaN != NaN: compare those separately below.
            expected.pop(name), got.pop(name)
        assert got == expected
        assert row["run_id"] == run.run_id
        assert row["schema_version"] == SCHEMA_VERSION
    assert rows[0]["eager_samples_ms"][:2] == [1.5, 2.25]
    assert math.isnan(rows[0]["eager_samples_ms"][2])
    assert math.isnan(rows[0]["max_abs_error"])
    assert rows[0]["compiled_samples_ms"] == []
    assert rows[1]["eager_samples_ms"] is None
    assert rows[0]["probe_ok"] is False and rows[0]["accuracy_pass"] is True
    assert rows[1]["probe_ok"] is None and rows[1]["seq_len"] is None

    breaks = store.graph_breaks_for_run(run.run_id)
    assert [
        (b["result_id"], b["idx"], b["reason"], b["user_frame"], b["count"]) for b in breaks
    ] == [
        (ids[0], 0, "call to print", "model.py:12", 3),
        (ids[0], 1, "data-dependent branch", None, 1),
    ]
    assert all(b["cell_key"] == "key-1" and b["schema_version"] == SCHEMA_VERSION for b in breaks)

    stored = store.get_run(run.run_id)
    assert stored.status == "running" and stored.started_at == datetime(2025, 3, 1, 12, 0)
    store.finish_run(run.run_id, "finished", 2)
    stored = store.get_run(run.run_id)
    assert (stored.status, stored.cells_recorded) == ("finished", 2)
    assert stored.finished_at is not None


def test_write_results_rejects_unknown_run_and_rolls_back(store):
    with pytest.raises(ValueError, match="start_run"):
        store.write_results("no-such-run", [make_result()])
    with pytest.raises(ValueError, match="no run"):
        store.finish_run("no-such-run", "finished", 0)
    assert store.latest_by_key(["key-1"]) == {}


def test_latest_by_key_picks_the_latest_row(store):
    run_id = start(store)
    store.write_results(run_id, [make_result("a", "crash"), make_result("b", "timeout")])
    store.write_results(run_id, [make_result("a", "pass")])
    # Within one batch the later result is the latest.
    store.write_results(run_id, [make_result("c", "oom"), make_result("c", "compile_error")])
    keys = [f"missing-{i}" for i in range(10_000)] + ["a", "b", "c"]
    assert store.latest_by_key(keys) == {"a": "pass", "b": "timeout", "c": "compile_error"}
    assert store.latest_by_key([]) == {}


def test_a_crowded_oom_never_hides_a_measured_row(store):
    """An out-of-memory row beside other processes is the run's, not the model's: a
    later one leaves the cell's measurement standing (it is neither rerun nor shown), an
    earlier one gives way to what came after, and a cell crowded out every time shows
    its newest crowding and counts as crowded (its retry is due)."""
    crowded = f"depth cut from 54 to 18 layers; {CROWDED}: they held 138.0 of 139.8 GiB"
    run_id = start(store)
    store.write_results(
        run_id,
        [
            make_result("measured", "pass", eager_peak_reserved_mb=4886.0),
            make_result("recovered", "oom", notes=crowded),
            make_result("own-oom", "oom", notes="CUDA out of memory"),
            make_result("always", "oom", notes=crowded, error_message="first"),
        ],
    )
    store.write_results(
        run_id,
        [
            make_result("measured", "oom", notes=crowded),
            make_result("recovered", "pass"),
            make_result("own-oom", "oom", notes=crowded),
            make_result("always", "oom", notes=crowded, error_message="second"),
        ],
    )
    keys = ["measured", "recovered", "own-oom", "always"]
    assert store.latest_by_key(keys) == dict(zip(keys, ["pass", "pass", "oom", "oom"], strict=True))
    latest = store.latest_results(keys)
    assert latest["own-oom"][1].notes == "CUDA out of memory"
    assert latest["always"][1].error_message == "second"
    assert store.crowded(keys) == {"always"}
    peaks = store.peak_reserved_mb(["timm/resnet18"], "cpu")
    assert peaks == {("timm/resnet18", "infer"): 4886.0}


def test_crashed_alike_is_two_newest_crashes_in_one_phase(store):
    """A cell whose process died twice running in the same phase is left to --force; a
    crash after a pass, two crashes in different phases, or one crash are retried."""

    def crash(key, phase):
        return make_result(key, "crash", error_phase=phase)

    run_id = start(store)
    first = [crash("twice", "accuracy"), crash("phases", "compile"), make_result("healed")]
    first += [crash("once", "compile"), crash("old", "compile"), crash("no-phase", None)]
    store.write_results(run_id, first)
    second = [crash("twice", "accuracy"), crash("phases", "accuracy")]
    second += [crash("healed", "compile"), crash("old", "compile"), crash("no-phase", None)]
    store.write_results(run_id, second)
    store.write_results(run_id, [crash("twice", "accuracy"), make_result("old", "pass")])
    keys = ["twice", "phases", "healed", "once", "old", "no-phase", "missing"]
    assert store.crashed_alike(keys) == {"twice", "no-phase"}
    assert store.crashed_alike([]) == set()


def test_untriaged_are_latest_failures_without_a_verdict(store):
    run_id = start(store)
    judged = make_result("b", "compile_error")
    judged.triage_rung = "fails in dynamo"
    cut = make_result("c", "crash")
    cut.triage_rung = "triage interrupted"
    store.write_results(run_id, [make_result("a", "fail_accuracy"), judged, cut])
    store.write_results(run_id, [make_result("d", "compile_error"), make_result("d", "pass")])
    store.write_results(run_id, [make_result("e", "timeout")])
    statuses = ("compile_error", "fail_accuracy", "crash")
    assert store.untriaged(["a", "b", "c", "d", "e", "f"], statuses) == {"a", "c"}
    assert store.untriaged([], statuses) == set()


def test_launch_bound_reads_the_latest_rows_fastest_eager_call_against_its_gpu_time(store):
    """Launch-bound: the fastest eager sample (the median where none are kept) is
    LAUNCH_BOUND_RATIO times the eager GPU time or more; no profile is not; the latest
    row decides."""
    run_id = start(store)
    store.write_results(
        run_id,
        [
            # Fastest sample 3.0 ms over 1.5 ms of GPU time: 2.0x. Its median alone, 4.0x.
            make_result("a", eager_ms=6.0, eager_samples_ms=[3.0, 6.0, 7.0], eager_gpu_ms=1.5),
            # Fastest 2.9 ms over 2.0 ms: 1.45x, under the ratio though its median is over.
            make_result("b", eager_ms=4.0, eager_samples_ms=[2.9, 4.0], eager_gpu_ms=2.0),
            make_result("c", eager_ms=9.0, eager_samples_ms=[], eager_gpu_ms=3.0),
            make_result("d", eager_ms=9.0, eager_gpu_ms=None),
            make_result("e", eager_ms=9.0, eager_samples_ms=[9.0], eager_gpu_ms=1.0),
        ],
    )
    store.write_results(run_id, [make_result("e", eager_ms=1.1, eager_gpu_ms=1.0)])
    assert store.launch_bound(["a", "b", "c", "d", "e", "f"]) == {"a", "c"}
    assert store.launch_bound([]) == set()


def test_latest_results_read_back_the_rows_as_written(store):
    """A recorded row comes back as the CellResult the runner wrote, graph breaks and
    sample lists included, with the run that recorded it; only the latest per cell."""
    first, second = start(store), start(store)
    old = make_result("a", "fail_accuracy", speedup=1.5)
    newest = make_result(
        "a",
        "compile_error",
        error_signature="Unsupported: it broke",
        eager_samples_ms=[1.25, 2.5],
        probe_ok=False,
        graph_breaks=[
            GraphBreak("reason one", "m.py:3", 2, "Data dependent operator", "GB0033", "[]"),
            GraphBreak("reason two"),
        ],
    )
    store.write_results(first, [old])
    store.write_results(second, [newest, make_result("b", "pass")])
    found = store.latest_results(["a", "b", "missing"])
    assert sorted(found) == ["a", "b"]
    assert found["a"] == (second, newest)
    assert found["b"][1].graph_breaks == []
    assert store.latest_results([]) == {}


def test_environments_are_deduplicated(store, db):
    store.record_environment(ENV)
    store.record_environment(ENV)
    store.record_environment({**ENV, "env_id": "env-b", "torch": "2.6.0"})
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(
            "SELECT env_id, torch, gpu_count, gpu_memory_gb, schema_version FROM environments "
            "ORDER BY env_id"
        ).fetchall()
    finally:
        con.close()
    version = SCHEMA_VERSION
    assert rows == [("env-a", "2.5.1", 8, 139.8, version), ("env-b", "2.6.0", 8, 139.8, version)]
    with pytest.raises(ValueError, match="no column"):
        store.record_environment({**ENV, "bogus": 1})


def test_a_file_that_is_not_duckdb_is_left_untouched(tmp_path):
    path = tmp_path / "zoo.duckdb"
    path.write_text("my notes, not a database\n" * 100)
    before = digest(path)
    with pytest.raises(UsageError, match="not a DuckDB database"):
        Store.open(path)
    assert digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["zoo.duckdb"]


def test_a_duckdb_file_of_another_tool_is_refused(tmp_path):
    path = tmp_path / "other.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE mine (x INTEGER)")
    con.close()
    before = digest(path)
    with pytest.raises(UsageError, match="not a zoo-matrix one"):
        Store.open(path)
    assert digest(path) == before


def test_a_directory_as_the_path_is_refused(tmp_path):
    with pytest.raises(UsageError, match="is a directory"):
        Store.open(tmp_path)


def test_a_directory_that_cannot_be_created_is_refused(tmp_path):
    # A path under a regular file fails even for root, unlike a chmod-ed directory.
    blocker = tmp_path / "file.txt"
    blocker.write_text("a regular file")
    with pytest.raises(UsageError, match="cannot create the directory"):
        Store.open(blocker / "zoo.duckdb")
    assert blocker.read_text() == "a regular file"


def test_a_read_only_directory_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        try:
            (locked / "probe").touch()
        except PermissionError:
            with pytest.raises(UsageError, match="not writable"):
                Store.open(locked / "zoo.duckdb")
        else:
            pytest.skip("chmod does not stop this user's writes (root)")
    finally:
        locked.chmod(0o700)


def test_a_newer_schema_is_refused(db):
    Store.open(db)
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO schema_version VALUES (?, NULL)", [SCHEMA_VERSION + 1])
    con.close()
    before = digest(db)
    with pytest.raises(UsageError, match="Upgrade zoo-matrix"):
        Store.open(db)
    assert digest(db) == before


def hold_lock(db, seconds: float) -> subprocess.Popen:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(db), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_write_waits_for_another_process_lock(store, db):
    run_id = start(store)
    holder = hold_lock(db, 3)
    try:
        began = time.monotonic()
        (result_id,) = store.write_results(run_id, [make_result()])
        waited = time.monotonic() - began
    finally:
        holder.kill()
        holder.wait()
    assert waited > 1.5
    assert [row["result_id"] for row in store.results_for_run(run_id)] == [result_id]


def test_a_lock_outlasting_the_timeout_is_a_clear_error(db):
    run_id = start(Store.open(db))
    impatient = Store(db, lock_timeout_s=1)
    holder = hold_lock(db, 30)
    try:
        began = time.monotonic()
        with pytest.raises(DatabaseLockedError, match="locked by another process"):
            impatient.write_results(run_id, [make_result()])
        assert time.monotonic() - began < 10
    finally:
        holder.kill()
        holder.wait()


def test_export_writes_parquet_shards(store, db, tmp_path):
    store.record_environment(ENV)
    store.record_environment({**ENV, "env_id": "env-unused"})
    run_id = start(store, label="nightly")
    other = start(store)
    store.write_results(
        run_id,
        [
            make_result("a", eager_samples_ms=[1.0, 2.0], graph_breaks=[GraphBreak("why")]),
            make_result("b", "oom"),
        ],
    )
    store.write_results(other, [make_result("c")])
    out = tmp_path / "it's shards"

    paths = export_runs(db, out, label="nightly")
    names = ["runs", "results", "graph_breaks", "environments"]
    assert paths == [out / run_id / f"{name}.parquet" for name in names]

    con = duckdb.connect()
    try:

        def shard(name):
            return _rows(
                con, "SELECT * FROM read_parquet(?)", [str(out / run_id / f"{name}.parquet")]
            )

        def table(query):
            return _rows(con, query, [str(db), run_id])

        con.execute("ATTACH ? AS zoo (READ_ONLY)", [str(db)])
        assert shard("results") == table(
            "SELECT * FROM zoo.results WHERE run_id = $2 AND $1 IS NOT NULL ORDER BY recorded_at"
        )
        assert shard("runs") == table("SELECT * FROM zoo.runs WHERE run_id = $2 AND $1 IS NOT NULL")
        assert [row["env_id"] for row in shard("environments")] == ["env-a"]
        assert [row["reason"] for row in shard("graph_breaks")] == ["why"]
        for name in names:
            assert {row["schema_version"] for row in shard(name)} == {SCHEMA_VERSION}
        assert shard("results")[0]["eager_samples_ms"] == [1.0, 2.0]
    finally:
        con.close()

    assert len(export_runs(db, out)) == 8  # every run; existing shards are overwritten


def _rows(con, query, params):
    cursor = con.execute(query, params)
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def test_export_of_an_unknown_run_is_a_usage_error(store, db, tmp_path, capsys):
    start(store)
    with pytest.raises(UsageError, match="no run nope"):
        export_runs(db, tmp_path / "out", run_ids=["nope"])
    with pytest.raises(UsageError, match="no run labelled"):
        export_runs(db, tmp_path / "out", label="nope")
    assert not (tmp_path / "out").exists()

    assert main(["--db", str(db), "--run", "nope", "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.startswith("zoo-export: error: no run nope")
    assert main(["--db", str(tmp_path / "missing.duckdb")]) == 2
    assert not (tmp_path / "missing.duckdb").exists()


def test_export_main_prints_what_it_wrote(store, db, tmp_path, capsys):
    run_id = start(store)
    assert main(["--db", str(db), "--run", run_id, "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert str(tmp_path / "out" / run_id / "results.parquet") in printed
    assert "exported 1 run(s)" in printed
