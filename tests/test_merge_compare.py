import hashlib
import io
import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from dashboard import compare
from dashboard.data import load
from runner.cli import merge as merge_cli
from runner.matrix.results import CellResult
from runner.store import merge
from runner.store.db import Store
from runner.store.export import export_runs
from runner.store.schema import SCHEMA_VERSION, RunRecord
from tests.results import make_result

SHIPPED_RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"
RUN_A1 = "aaaaaaaa-0000-4000-8000-000000000001"
RUN_A2 = "aaaaaaaa-0000-4000-8000-000000000002"
RUN_B = "bbbbbbbb-0000-4000-8000-000000000003"


def env(env_id: str, torch: str) -> dict:
    return {"env_id": env_id, "torch": torch, "gpu": "NVIDIA H200", "python": "3.11.7"}


def cell(model: str, env_id: str, status: str = "pass", eager=None, compiled=None) -> CellResult:
    """A cell of ``model``; ``eager``/``compiled`` are latency (p25, median, p75) in ms."""
    timing = {}
    if eager and compiled:
        timing = {
            "eager_ms_p25": eager[0],
            "eager_ms": eager[1],
            "eager_ms_p75": eager[2],
            "compiled_ms_p25": compiled[0],
            "compiled_ms": compiled[1],
            "compiled_ms_p75": compiled[2],
            "speedup": eager[1] / compiled[1],
        }
    # The real key hashes the key fields; any string identifies a cell here.
    return make_result(
        f"{model}|{env_id}",
        status,
        model_id=model,
        family="test",
        size="full",
        batch_size=8,
        device="cuda",
        env_id=env_id,
        **timing,
    )


TIGHT_EAGER = (9.9, 10.0, 10.1)
WIDE_EAGER = (8.0, 10.0, 12.0)
STEADY_EAGER = (9.99, 10.0, 10.01)


def record(store: Store, run_id: str, label: str, env_id: str, cells: list[CellResult]) -> None:
    store.start_run(RunRecord(run_id=run_id, label=label, env_id=env_id, device="cuda"))
    store.write_results(run_id, cells)
    store.finish_run(run_id, "finished", len(cells))


@pytest.fixture
def db(tmp_path) -> Path:
    """Label ``base`` (two runs in env-a) against run B (env-b): one cell of each class."""
    path = tmp_path / "zoo.duckdb"
    store = Store.open(path)
    store.record_environment(env("env-a", "2.10.0"))
    store.record_environment(env("env-b", "2.11.0"))
    record(
        store,
        RUN_A1,
        "base",
        "env-a",
        # Superseded by its rerun in RUN_A2: the latest row of a key counts.
        [cell("timm/fixed", "env-a", "pass", TIGHT_EAGER, (4.9, 5.0, 5.1))],
    )
    record(
        store,
        RUN_A2,
        "base",
        "env-a",
        [
            cell("timm/breaks", "env-a", "pass", TIGHT_EAGER, (4.9, 5.0, 5.1)),
            cell("timm/fixed", "env-a", "compile_error"),
            cell("timm/slows", "env-a", "pass", TIGHT_EAGER, (4.95, 5.0, 5.05)),
            cell("timm/noisy", "env-a", "pass", WIDE_EAGER, (4.0, 5.0, 6.0)),
            cell("timm/tiny", "env-a", "pass", STEADY_EAGER, (4.99, 5.0, 5.01)),
            cell("timm/ooms", "env-a", "oom"),
            cell("timm/only_a", "env-a", "pass", TIGHT_EAGER, (4.9, 5.0, 5.1)),
        ],
    )
    record(
        store,
        RUN_B,
        "next",
        "env-b",
        [
            cell("timm/breaks", "env-b", "compile_error"),
            cell("timm/fixed", "env-b", "pass", TIGHT_EAGER, (4.9, 5.0, 5.1)),
            # 2.0x -> 1.25x, the intervals far apart.
            cell("timm/slows", "env-b", "pass", TIGHT_EAGER, (7.95, 8.0, 8.05)),
            # 2.0x -> 1.8x, 10% down but within the measured spread.
            cell("timm/noisy", "env-b", "pass", WIDE_EAGER, (4.5, 5.55, 6.5)),
            # 2.0x -> 1.96x: the intervals part, but by less than the threshold.
            cell("timm/tiny", "env-b", "pass", STEADY_EAGER, (5.09, 5.1, 5.11)),
            cell("timm/ooms", "env-b", "timeout"),
        ],
    )
    return path


def run_compare(capsys, db: Path, *args: str) -> tuple[int, str, str]:
    runs_dir = db.parent / "no-runs"
    runs_dir.mkdir(exist_ok=True)
    code = compare.main([*args, "--db", str(db), "--runs-dir", str(runs_dir)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- compare --


def test_compare_classifies_each_cell(db):
    con, _ = load(db.parent / "no-runs", db)
    frame = compare.compare_frames(con, "base", RUN_B)
    changes = dict(zip(frame["model_id"], frame["change"], strict=True))
    assert changes == {
        "timm/breaks": compare.NEW_FAILURE,
        "timm/fixed": compare.FIXED,
        "timm/slows": compare.SLOWER,
        "timm/noisy": compare.SAME,
        "timm/tiny": compare.SAME,
        "timm/ooms": compare.STATUS_CHANGE,
    }
    slows = frame.set_index("model_id").loc["timm/slows"]
    assert slows["a_speedup"] == pytest.approx(2.0)
    assert slows["b_speedup_high"] < slows["a_speedup_low"]
    assert compare.unmatched_counts(
        con, compare.resolve_side(con, "base"), compare.resolve_side(con, RUN_B)
    ) == (1, 0)
    # A threshold of zero lets the small but clear change through.
    frame = compare.compare_frames(con, "base", RUN_B, threshold=0.0)
    assert frame.set_index("model_id").loc["timm/tiny", "change"] == compare.SLOWER


def test_compare_text_output_and_exit_codes(capsys, db):
    code, out, _ = run_compare(capsys, db, "base", RUN_B)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("A: label base (2 run(s)")
    assert lines[1].startswith(f"B: run {RUN_B[:8]} (next")
    # Which speedup it compared (wall-clock unless --speedup gpu).
    assert lines.pop(2).startswith("speedup: wall-clock speedup")
    assert lines[2].split() == [
        "model",
        "config",
        "A",
        "status",
        "A",
        "speedup",
        "B",
        "status",
        "B",
        "speedup",
        "change",
    ]
    # Worst first.
    assert lines[4].startswith("timm/breaks") and lines[4].endswith("new failure")
    assert lines[5].startswith("timm/slows") and "2.00x (1.96-2.04)" in lines[5]
    assert lines[-1] == (
        "6 cell(s) compared (only in A: 1, only in B: 0): new failure 1, slower 1, "
        "status change 1, disturbed 0, measured differently 0, fixed 1, faster 0, same 2"
    )
    code, _, err = run_compare(capsys, db, "base", RUN_B, "--fail-on-regression")
    assert code == 1
    assert "2 regression(s)" in err
    # B to A: each failure is a fix and the fix a failure; the slowdown is a speed-up.
    code, out, _ = run_compare(capsys, db, RUN_B, "base", "--fail-on-regression")
    assert code == 1
    assert (
        "new failure 1, slower 0, status change 1, disturbed 0, measured differently 0, fixed 1, faster 1, same 2"
        in out
    )
    code, out, _ = run_compare(capsys, db, "base", "base", "--fail-on-regression")
    assert code == 0
    assert "same 7" in out


def test_compare_csv_json_and_changed_only(capsys, db):
    code, out, _ = run_compare(capsys, db, "base", "next", "--format", "json", "--changed-only")
    assert code == 0
    document = json.loads(out)
    assert document["a"]["kind"] == "label"
    assert document["counts"]["same"] == 2
    assert {c["change"] for c in document["cells"]} == {
        "new failure",
        "slower",
        "status change",
        "fixed",
    }
    code, out, _ = run_compare(capsys, db, "base", "next", "--format", "csv", "--threshold", "50%")
    assert code == 0
    rows = out.splitlines()
    assert len(rows) == 7
    assert "a_speedup_low" in rows[0].split(",")
    # A 38% slowdown is under a 50% threshold.
    assert next(row for row in rows if row.startswith("timm/slows")).endswith(",same")


def test_compare_rich_table(db):
    pytest.importorskip("rich")
    con, _ = load(db.parent / "no-runs", db)
    a, b = compare.resolve_side(con, "base"), compare.resolve_side(con, RUN_B)
    out = io.StringIO()
    compare.write_text(compare.compare_frames(con, a, b), a, b, (1, 0), out, use_rich=True)
    # Off a terminal rich wraps at 80 columns; the classes still show.
    assert "┃ model" in out.getvalue()
    assert "new failure" in out.getvalue()


def test_resolve_side_by_prefix_label_and_env(db):
    con, _ = load(db.parent / "no-runs", db)
    run = compare.resolve_side(con, RUN_B[:8])
    assert (run.kind, run.ids) == ("run", (RUN_B,))
    assert compare.resolve_side(con, RUN_A2).ids == (RUN_A2,)
    label = compare.resolve_side(con, "base")
    assert (label.kind, label.ids) == ("label", (RUN_A1, RUN_A2))
    environment = compare.resolve_side(con, "env-b")
    assert (environment.kind, environment.ids) == ("env", ("env-b",))
    assert "torch 2.11.0" in environment.description
    frame = compare.compare_frames(con, "env-a", "env-b")
    assert len(frame) == 6
    kinds = [side.kind for side in compare.list_sides(con)]
    assert kinds == ["label", "label", "run", "run", "run", "env", "env"]


def test_unknown_or_ambiguous_side_lists_the_choices(capsys, db):
    code, _, err = run_compare(capsys, db, "nope", "base")
    assert code == 2
    assert "no run, label or environment 'nope'" in err
    for name in ("base", "next", RUN_A1, RUN_B, "env-a", "env-b"):
        assert name in err
    code, _, err = run_compare(capsys, db, "base", "aaaaaaaa")
    assert code == 2
    assert "ambiguous" in err
    assert RUN_A1 in err and RUN_A2 in err and RUN_B not in err
    code, _, err = run_compare(capsys, db, "base", "bbbb")
    assert code == 2
    assert "8 characters" in err


def test_compare_over_shipped_parquet(capsys, tmp_path):
    empty = Store.open(tmp_path / "empty.duckdb").path
    code = compare.main(
        [
            "h200-foundation",
            "h200-foundation",
            "--runs-dir",
            str(SHIPPED_RUNS),
            "--db",
            str(empty),
            "--fail-on-regression",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[-1] == (
        "27 cell(s) compared (only in A: 0, only in B: 0): new failure 0, slower 0, "
        "status change 0, disturbed 0, measured differently 0, fixed 0, faster 0, same 27"
    )


# -- merge --


def split_sources(db: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The label ``base`` as parquet shards, run B as a database of its own."""
    shards = tmp_path / "shards"
    export_runs(db, shards, label="base")
    other = tmp_path / "other.duckdb"
    merge.merge([db], other)
    with duckdb.connect(str(other)) as con:
        for table in ("graph_breaks", "results", "runs"):
            con.execute(f"DELETE FROM {table} WHERE run_id <> ?", [RUN_B])
    return shards, other


def summary(out: str) -> dict[str, tuple[int, int]]:
    """table -> (added, already present), from zoo-merge's output."""
    rows = {}
    for line in out.splitlines():
        words = line.split()
        if len(words) == 6 and words[2] == "added":
            rows[words[0]] = (int(words[1]), int(words[3]))
    return rows


def counts(path: Path) -> dict[str, int]:
    with duckdb.connect(str(path), read_only=True) as con:
        return {
            table: con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("runs", "results", "environments")
        }


def test_merge_two_sources_then_again_changes_nothing(capsys, db, tmp_path):
    shards, other = split_sources(db, tmp_path)
    target = tmp_path / "merged" / "zoo.duckdb"
    assert merge_cli.main([str(shards), str(other), "--into", str(target)]) == 0
    out = capsys.readouterr().out
    assert "from 2 run folder(s) under" in out
    assert summary(out) == {
        "runs": (3, 0),
        "results": (14, 0),
        "graph_breaks": (0, 0),
        "environments": (2, 1),
    }
    # timm/fixed ran twice in env-a.
    assert "1 of 13 cell key(s) merged have more than one row" in out
    assert "readers take the latest by recorded_at" in out
    assert counts(target) == counts(db) == {"runs": 3, "results": 14, "environments": 2}

    assert merge_cli.main([str(shards / RUN_A1), str(other), "--into", str(target)]) == 0
    out = capsys.readouterr().out
    assert summary(out) == {
        "runs": (0, 2),
        "results": (0, 7),
        "graph_breaks": (0, 0),
        # Counted per source: the run folder's env-a and the database's env-a and env-b.
        "environments": (0, 3),
    }
    assert counts(target) == counts(db)
    con, _ = load(tmp_path / "none", target)
    assert len(compare.compare_frames(con, "base", "next")) == 6


def test_merge_real_shipped_runs(capsys, tmp_path):
    target = tmp_path / "merged.duckdb"
    assert merge_cli.main([str(SHIPPED_RUNS), "--into", str(target)]) == 0
    out = capsys.readouterr().out
    # What the shipped parquet holds, counted apart from the merge.
    with duckdb.connect() as con:
        rows, keys, repeated = con.execute(
            "SELECT sum(n), count(*), count(*) FILTER (WHERE n > 1) FROM ("
            "  SELECT cell_key, count(*) AS n FROM read_parquet(?, union_by_name=true)"
            "  GROUP BY cell_key)",
            [str(SHIPPED_RUNS / "*" / "results.parquet")],
        ).fetchone()
    assert rows > 0 and repeated > 0
    assert summary(out)["results"] == (rows, 0)
    assert f"{repeated} of {keys} cell key(s) merged have more than one row" in out
    assert counts(target)["results"] == rows
    # Every shipped run is closed: one exported while under way, by a machine lost before
    # it ended, was marked abandoned as Store.abandon_dead_runs marks one.
    with duckdb.connect(str(target), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs WHERE status = 'running'").fetchall() == [
            (0,)
        ]


# Holds a database open for writing from another process, as a running zoo-run would.
HOLD_LOCK = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1])
print("held", flush=True)
time.sleep(float(sys.argv[2]))
con.close()
"""


def test_merge_waits_for_a_source_held_by_a_writer(capsys, db, tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(db), "1.0"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert merge_cli.main([str(db), "--into", str(tmp_path / "merged.duckdb")]) == 0
    finally:
        holder.wait(timeout=30)
    assert summary(capsys.readouterr().out)["results"] == (14, 0)


def test_merge_refuses_a_newer_schema(capsys, db, tmp_path):
    shards = tmp_path / "shards"
    export_runs(db, shards, run_ids=[RUN_B])
    results = shards / RUN_B / "results.parquet"
    with duckdb.connect() as con:
        con.execute(
            "CREATE TABLE t AS SELECT * REPLACE (? AS schema_version) FROM read_parquet(?)",
            [SCHEMA_VERSION + 1, str(results)],
        )
        con.execute(f"COPY t TO '{results}' (FORMAT parquet)")
    target = tmp_path / "merged.duckdb"
    assert merge_cli.main([str(shards), "--into", str(target)]) == 2
    err = capsys.readouterr().err
    assert f"schema version {SCHEMA_VERSION + 1}, newer than this zoo-matrix knows" in err
    assert "Upgrade zoo-matrix" in err
    assert not target.exists()


def test_merge_unwritable_target(capsys, db, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert merge_cli.main([str(db), "--into", str(blocker / "zoo.duckdb")]) == 2
    assert "cannot create the directory" in capsys.readouterr().err
    assert merge_cli.main([str(db), "--into", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert merge_cli.main([str(db), "--into", str(db)]) == 2
    assert "merges into itself" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["missing", "not duckdb", "not zoo", "no shards", "one file"])
def test_merge_bad_source_leaves_target_untouched(capsys, db, tmp_path, kind):
    target = tmp_path / "target.duckdb"
    merge.merge([db], target)
    before = digest(target)
    source = tmp_path / "source"
    if kind == "not duckdb":
        source.write_text("hello")
    elif kind == "not zoo":
        with duckdb.connect(str(source)) as con:
            con.execute("CREATE TABLE t (x INTEGER)")
    elif kind == "no shards":
        source.mkdir()
    elif kind == "one file":
        export_runs(db, tmp_path / "shards", run_ids=[RUN_B])
        source = tmp_path / "shards" / RUN_B / "results.parquet"
    assert merge_cli.main([str(source), "--into", str(target)]) == 2
    assert "zoo-merge: error:" in capsys.readouterr().err
    assert digest(target) == before


def test_merge_refuses_a_target_that_is_not_a_zoo_database(capsys, db, tmp_path):
    target = tmp_path / "other.duckdb"
    with duckdb.connect(str(target)) as con:
        con.execute("CREATE TABLE t (x INTEGER)")
    before = digest(target)
    assert merge_cli.main([str(db), "--into", str(target)]) == 2
    err = capsys.readouterr().err
    assert "not a zoo-matrix one" in err
    # The message names zoo-merge's option for the target, not zoo-run's.
    assert "(--into)" in err and "--db" not in err
    assert digest(target) == before
    target.write_text("notes")
    assert merge_cli.main([str(db), "--into", str(target)]) == 2
    err = capsys.readouterr().err
    assert "not a DuckDB database" in err and "(--into)" in err and "--db" not in err


def test_compare_refuses_a_path_that_does_not_exist(capsys, db, tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    runs.mkdir()
    missing = tmp_path / "nowhere"
    for args, named in (
        (["--runs-dir", str(missing), "--db", str(db)], "--runs-dir"),
        (["--runs-dir", str(runs), "--db", str(missing)], "--db"),
    ):
        assert compare.main(["base", RUN_B, *args]) == 2
        assert f"zoo-compare: error: {named}: {missing} does not exist" in (capsys.readouterr().err)
    monkeypatch.setenv("ZOO_DB", str(missing))
    assert compare.main(["base", RUN_B, "--runs-dir", str(runs)]) == 2
    assert f"ZOO_DB: {missing} does not exist" in capsys.readouterr().err
    # Defaults that do not exist yet (no database recorded) are no error.
    monkeypatch.delenv("ZOO_DB")
    monkeypatch.chdir(tmp_path)
    assert compare.main(["base", RUN_B, "--runs-dir", str(runs)]) == 2
    assert "no run, label or environment 'base'" in capsys.readouterr().err


def test_a_cell_timed_with_autocast_scoped_apart_is_measured_differently(tmp_path, capsys):
    """A: rows timed inside one autocast region (before 2026-12-05), B: per call. Eager
    read faster inside one region, so a speed change between them is the measurement's:
    'measured differently', no verdict, and a gate does not fail on it. Two rows of
    the same scope are judged as ever."""
    path = tmp_path / "zoo.duckdb"
    store = Store.open(path)
    old = [cell(m, "env-a", "pass", TIGHT_EAGER, (4.9, 5.0, 5.1)) for m in ("timm/a", "timm/b")]
    for result in old:
        result.precision = "bf16"
    old[0].precision_treatment = "autocast bf16"  # timm/b says nothing: a row before labels
    record(store, RUN_A1, "a", "env-a", old)
    new = [cell(m, "env-a", "pass", TIGHT_EAGER, (7.95, 8.0, 8.05)) for m in ("timm/a", "timm/b")]
    for result in new:
        result.precision = "bf16"
    new[0].precision_treatment = "autocast bf16 per call"
    record(store, RUN_B, "b", "env-a", new)
    con, _ = load(tmp_path / "no-runs", path)
    changes = dict(compare.compare_frames(con, "a", "b")[["model_id", "change"]].values)
    assert changes == {"timm/a": compare.MEASURED_DIFFERENTLY, "timm/b": compare.SLOWER}
    code, out, err = run_compare(capsys, path, "a", "b", "--fail-on-regression")
    assert code == 1 and "1 regression(s)" in err  # timm/b's, not timm/a's
    assert "disturbed 0, measured differently 1, fixed 0" in out
    assert "1 cell(s) changed speed between a row timed inside one autocast region" in err


def test_a_disturbed_cell_is_neither_faster_nor_slower(tmp_path, capsys):
    """Two sweeps on shared cores: the eager backend read 0.05x to 34.56x. A cell whose
    timing was disturbed on a side is 'disturbed', not a regression or a gain."""
    path = tmp_path / "zoo.duckdb"
    store = Store.open(path)
    quiet = cell("timm/quiet", "env-a", "pass", TIGHT_EAGER, (4.9, 5.0, 5.1))
    record(store, RUN_A1, "a", "env-a", [quiet, cell("timm/noisy", "env-a", "pass",
           TIGHT_EAGER, (4.9, 5.0, 5.1))])  # fmt: skip
    slow = cell("timm/quiet", "env-a", "pass", TIGHT_EAGER, (7.95, 8.0, 8.05))
    noisy = cell("timm/noisy", "env-a", "pass", TIGHT_EAGER, (7.95, 8.0, 8.05))
    noisy.timing_disturbance = 1.6  # its median far above its fastest sample
    noisy.gpu_speedup = None
    record(store, RUN_B, "b", "env-a", [slow, noisy])
    con, _ = load(tmp_path / "no-runs", path)
    changes = dict(compare.compare_frames(con, "a", "b")[["model_id", "change"]].values)
    assert changes == {"timm/quiet": compare.SLOWER, "timm/noisy": compare.DISTURBED}
    code, out, err = run_compare(capsys, path, "a", "b", "--fail-on-regression")
    assert code == 1 and "1 regression(s)" in err  # the quiet one
    assert "slower 1, status change 0, disturbed 1" in out
    assert "1 cell(s) changed speed while their timing was disturbed" in err
    # Rows written before the column: their fastest samples say it.
    with duckdb.connect(str(path)) as db:
        db.execute("UPDATE results SET timing_disturbance = NULL")
        db.execute(
            "UPDATE results SET eager_samples_ms = [5.0, 10.0, 10.0] "
            "WHERE model_id = 'timm/noisy' AND run_id = ?",
            [RUN_B],
        )
    con, _ = load(tmp_path / "no-runs", path)
    changes = dict(compare.compare_frames(con, "a", "b")[["model_id", "change"]].values)
    assert changes["timm/noisy"] == compare.DISTURBED
