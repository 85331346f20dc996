"""Faults injected into real sweeps on the CPU: zoo-run killed, interrupted or
terminated mid-sweep and resumed; models that crash, hang, run out of memory or fail in
one sweep; two writers and a reader on one database. After each: no recorded cell
lost, none twice, no worker left, the runs' rows saying what happened."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from dashboard.data import load
from runner.cli.run import main
from tests.reliability.zoo_run import (
    MISBEHAVING,
    TOY,
    processes_under,
    run,
    run_folders,
    start,
)
from tests.results import rows

# A timm model that passes in a few seconds, then one that takes 6 s to build: killed
# while the second builds, the sweep has one cell recorded and one in flight.
SWEEP = ["--models", "test_resnet", "--module", f"{MISBEHAVING}:SlowToBuild"]
SWEEP += ["--backends", "eager", "--device", "cpu"]
FIRST = "timm/test_resnet"
SECOND = "custom/misbehaving:SlowToBuild"


def wait_until(condition, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signum", "exit_code", "status"),
    [
        (signal.SIGKILL, -signal.SIGKILL, "abandoned"),
        (signal.SIGTERM, 143, "interrupted"),
        (signal.SIGINT, 130, "interrupted"),
    ],
    ids=["SIGKILL", "SIGTERM", "SIGINT"],
)
def test_a_signal_mid_sweep_loses_nothing_and_the_resume_finishes(
    tmp_path, signum, exit_code, status
):
    db, tmp = tmp_path / "zoo.duckdb", tmp_path / "tmp"
    args = [*SWEEP, "--db", str(db)]
    first = start(tmp, *args)
    first.wait_for(f"{FIRST} eager")
    (folder,) = run_folders(tmp)
    time.sleep(2)  # the second cell is building
    first.process.send_signal(signum)
    assert first.finish(60) == exit_code, first.output()
    if signum != signal.SIGKILL:
        assert f"interrupted by {signal.Signals(signum).name}" in first.output()
        assert "zoo-run summary" in first.output()
    assert [r["model_id"] for r in rows(db)] == [FIRST]
    # The workers die with zoo-run, however it ended.
    assert wait_until(lambda: not processes_under(folder)), processes_under(folder)
    (killed,) = rows(db, "SELECT * FROM runs")
    if signum == signal.SIGKILL:
        # Nothing could record its end: it says running until the next run looks.
        assert killed["status"] == "running" and folder.exists()
    else:
        assert killed["status"] == "interrupted" and killed["cells_recorded"] == 1
        assert not folder.exists()

    code, out = run(tmp, *args)
    assert code == 0, out
    assert "skipping 1 cell already recorded" in out
    results = rows(db, "SELECT * FROM results ORDER BY recorded_at")
    assert [(r["model_id"], r["status"]) for r in results] == [(FIRST, "pass"), (SECOND, "pass")]
    killed, resumed = rows(db, "SELECT * FROM runs ORDER BY started_at")
    assert (killed["status"], killed["cells_recorded"]) == (status, 1)
    assert (resumed["status"], resumed["cells_recorded"]) == ("finished", 1)
    if signum == signal.SIGKILL:
        assert f"run {killed['run_id']} ended without finishing" in out
        assert f"removed {folder}" in out
    assert run_folders(tmp) == []


@pytest.mark.slow
def test_a_crash_a_hang_an_oom_and_failures_in_one_sweep_each_become_a_row(tmp_path, capsys):
    db = tmp_path / "zoo.duckdb"
    modules = [
        "SegfaultWhenCompiled",
        "HangWhenCompiled",
        "OutOfMemoryAlways",
        "RaisesMarkupInEager",
        "NonTensorInputs",
    ]
    args = [arg for name in modules for arg in ("--module", f"{MISBEHAVING}:{name}")]
    args += ["--module", f"{TOY}:TinyMLP", "--backends", "eager", "--device", "cpu"]
    # Batch 1: an out-of-memory cell has no smaller batch to retry at.
    args += ["--batch-size", "1", "--timeout", "15", "--db", str(db)]
    assert main(args) == 0
    out = capsys.readouterr()
    by_model = {r["model_id"].split(":")[1]: r for r in rows(db)}
    assert {name: row["status"] for name, row in by_model.items()} == {
        "SegfaultWhenCompiled": "crash",
        "HangWhenCompiled": "timeout",
        "OutOfMemoryAlways": "oom",
        "RaisesMarkupInEager": "eager_error",
        "NonTensorInputs": "build_error",
        "TinyMLP": "pass",
    }
    crash = by_model["SegfaultWhenCompiled"]
    assert crash["error_type"] == "SIGSEGV" and crash["error_phase"] == "compile"
    assert "Segmentation fault" in crash["traceback_tail"]
    assert "misbehaving.py" in crash["traceback_tail"]  # the user frame is in the dump
    assert crash["stderr_tail"]
    hang = by_model["HangWhenCompiled"]
    assert hang["error_phase"] == "compile" and 15 <= hang["wall_s"] < 60
    assert "sleep" in hang["traceback_tail"] or "misbehaving.py" in hang["traceback_tail"]
    # Markup in a message is its text: recorded and printed as it is.
    markup = by_model["RaisesMarkupInEager"]
    assert markup["error_message"] == "chat template must end with [/INST] [bold]x[/bold]"
    assert "must end with [/INST] [bold]x[/bold]" in out.err
    inputs = by_model["NonTensorInputs"]
    assert inputs["error_phase"] == "inputs" and inputs["error_type"] == "TypeError"
    assert "not tensors: #0 str 'not a tensor', #1 int 42" in inputs["error_message"]
    (sweep,) = rows(db, "SELECT * FROM runs")
    assert (sweep["status"], sweep["cells_recorded"]) == ("finished", 6)
    assert "1 eager_error, 1 build_error, 1 oom, 1 timeout, 1 crash" in out.out

    # Resume skips every recorded cell; --retry-failed reruns crash, timeout and oom.
    assert main(args) == 0
    assert len(rows(db)) == 6
    retry = ["--module", f"{MISBEHAVING}:SegfaultWhenCompiled", "--backends", "eager"]
    retry += ["--batch-size", "1", "--timeout", "15"]  # the same cell as above
    assert main([*retry, "--device", "cpu", "--db", str(db), "--retry-failed"]) == 0
    assert len(rows(db)) == 7
    # Crashed in compile twice running: --retry-failed leaves it, --force reruns it.
    capsys.readouterr()
    assert main([*retry, "--device", "cpu", "--db", str(db), "--retry-failed"]) == 0
    assert "not rerunning 1 recorded crash(es) (--retry-failed)" in capsys.readouterr().err
    assert len(rows(db)) == 7
    assert main([*retry, "--device", "cpu", "--db", str(db), "--force"]) == 0
    assert [r["status"] for r in rows(db)].count("crash") == 3


def test_two_writers_and_a_reader_on_one_database(tmp_path):
    """Two sweeps write one database while the dashboard's loader reads it: each sweep
    records its cells once, neither marks the other (alive) abandoned, and every read
    sees a consistent, growing database or is told the file is busy."""
    db, tmp = tmp_path / "zoo.duckdb", tmp_path / "tmp"
    no_runs = tmp_path / "no-runs"
    no_runs.mkdir()
    slow = start(tmp, *SWEEP, "--db", str(db), "--label", "slow")
    slow.wait_for("database")  # its run is recorded
    quick = start(tmp, "--module", f"{TOY}:TinyMLP", "--backends", "eager", "--device", "cpu",
                  "--db", str(db), "--label", "quick")  # fmt: skip
    seen, problems = [], []
    while slow.process.poll() is None or quick.process.poll() is None:
        con, sources = load(no_runs, db, lock_timeout_s=2)
        problems += sources.problems
        if sources.db_loaded:
            statuses = dict(con.execute("SELECT label, status FROM runs").fetchall())
            (cells,) = con.execute("SELECT count(*) FROM results").fetchone()
            seen.append((cells, statuses))
        con.close()
        time.sleep(0.3)
    assert quick.finish() == 0 and slow.finish() == 0, quick.output() + slow.output()
    assert "abandoned" not in quick.output() + slow.output()
    assert all("a sweep is writing" in problem for problem in problems), problems
    assert len(seen) >= 3
    counts = [cells for cells, _ in seen]
    assert counts == sorted(counts)
    assert {status for _, statuses in seen for status in statuses.values()} <= {
        "running",
        "finished",
    }
    results = rows(db)
    assert sorted(r["model_id"] for r in results) == sorted(
        [FIRST, "custom/misbehaving:SlowToBuild", "custom/toy_models:TinyMLP"]
    )
    runs = {r["label"]: r for r in rows(db, "SELECT * FROM runs")}
    assert {label: (r["status"], r["cells_recorded"]) for label, r in runs.items()} == {
        "slow": ("finished", 2),
        "quick": ("finished", 1),
    }
    assert run_folders(tmp) == []


def test_no_run_folder_outlives_its_run_and_a_live_runs_folder_stays(tmp_path):
    """The run folder removal itself: a dead owner's folder goes, a live one's and one
    with no owner stay (runner.schedule.workdir)."""
    import json
    import subprocess
    import sys

    from runner.matrix.process import start_token
    from runner.schedule.workdir import OWNER_FILE, remove_stale, run_workdir

    dead = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    token = start_token(dead.pid)
    dead.kill()
    dead.wait()
    with run_workdir("live-run", tmp_path) as live:
        stale = tmp_path / "zoo-run-stale"
        stale.mkdir()
        owner = {"run_id": "old", "host": json.loads((live / OWNER_FILE).read_text())["host"]}
        (stale / OWNER_FILE).write_text(
            json.dumps({**owner, "pid": dead.pid, "pid_started": token})
        )
        unowned = Path(tmp_path / "zoo-run-unowned")
        unowned.mkdir()
        assert remove_stale(tmp_path) == [stale]
        assert live.exists() and unowned.exists() and not stale.exists()
    assert not live.exists()


def test_a_ctrl_c_while_the_run_folder_is_removed_leaves_it_to_the_next_run(tmp_path):
    """A real SIGINT that lands while a run's folder is being removed (its work done)
    stops the removal and nothing else: no KeyboardInterrupt leaves the block, the
    folder is reported, its owner file stays, and once the owner is gone the next
    run's clean-up removes it."""
    import json
    import os
    import signal
    import subprocess
    import sys

    from runner.matrix.process import start_token
    from runner.schedule import workdir
    from runner.schedule.workdir import OWNER_FILE, remove_stale, run_workdir

    left = []
    real_rmtree = workdir.shutil.rmtree

    def interrupted_rmtree(path, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # Python's handler raises it here
        real_rmtree(path, **kwargs)

    # Python's own handler, as zoo-run has it (a pytest-xdist worker ignores SIGINT).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with run_workdir("run", tmp_path, on_left=left.append) as folder:
            (folder / "worker-1").mkdir()
            for index in range(50):
                (folder / "worker-1" / f"kernel-{index}.py").write_text("x")
            (folder / "worker-1.log").write_text("log")
            workdir.shutil.rmtree = interrupted_rmtree
    finally:
        workdir.shutil.rmtree = real_rmtree
        signal.signal(signal.SIGINT, previous)
    assert left == [folder]
    assert (folder / OWNER_FILE).exists() and (folder / "worker-1").exists()

    dead = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    token = start_token(dead.pid)
    dead.kill()
    dead.wait()
    owner = json.loads((folder / OWNER_FILE).read_text())
    (folder / OWNER_FILE).write_text(json.dumps({**owner, "pid": dead.pid, "pid_started": token}))
    assert remove_stale(tmp_path) == [folder]
    assert not folder.exists()

    with run_workdir("run", tmp_path, on_left=left.append) as folder:
        (folder / "worker-1").mkdir()
        (folder / "worker-1" / "kernel.py").write_text("x")
    assert not folder.exists() and len(left) == 1
