"""zoo-run end to end on CPU: real timm models, real worker processes, real DuckDB."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from runner.cli.run import main
from runner.matrix.results import CROWDED
from runner.plan import Plan, PlanOptions, estimate_lines, parallel_share, plan_cells, skip_recorded
from runner.store.db import Store
from tests.results import rows
from zoo.catalog import select

FIXTURES = Path(__file__).parent / "fixtures"
MISBEHAVING = FIXTURES / "misbehaving.py"
TOY = FIXTURES / "toy_models.py"


def test_timm_matrix_is_recorded_and_resumed(tmp_path, capsys):
    db = tmp_path / "zoo.duckdb"
    args = ["--models", "test_resnet,test_vit", "--backends", "eager,aot_eager"]
    args += ["--device", "cpu", "--db", str(db), "--label", "ci-smoke"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "zoo-run summary" in out
    assert "2/2" in out  # each config passed on both models
    # What the run used: its cores, and the host's timing lock (one worker: no bound said).
    assert re.search(r"\d+ cores \d+% busy.* · lock of the host held \d+% \(.*timing \d+%", out)

    results = rows(db)
    assert [(r["model_id"], r["backend"]) for r in results] == [
        ("timm/test_resnet", "aot_eager"),
        ("timm/test_resnet", "eager"),
        ("timm/test_vit", "aot_eager"),
        ("timm/test_vit", "eager"),
    ]
    for r in results:
        assert r["status"] == "pass", r["error_message"]
        assert r["device"] == "cpu" and r["precision"] == "fp32" and r["batch_size"] == 2
        assert r["mode"] == "none" and r["dynamic"] == "false" and r["step"] == "infer"
        assert r["family"] in ("resnet", "vision_transformer")
        assert r["graph_break_count"] == 0 and r["graph_count"] >= 1
        assert r["eager_ms"] > 0 and r["compiled_ms"] > 0
        assert r["speedup"] == pytest.approx(r["eager_ms"] / r["compiled_ms"])
        assert len(r["eager_samples_ms"]) >= 5
        assert r["accuracy_pass"] is True and r["accuracy_ref_dtype"] == "fp64"
        assert r["input_shapes"] == "[[2, 3, 160, 160]]"  # timm test_* models take 160 px

    (run,) = rows(db, "SELECT * FROM runs")
    assert run["status"] == "finished" and run["label"] == "ci-smoke"
    assert run["cells_planned"] == 4 and run["cells_recorded"] == 4
    # One environment row per fingerprint: the torch stack's (these cells') and XLA's.
    env = rows(db, "SELECT * FROM environments ORDER BY fingerprint")
    assert [e["fingerprint"] for e in env] == ["torch", "xla"]
    assert env[0]["env_id"] == results[0]["env_id"] == run["env_id"] != env[1]["env_id"]
    assert env[0]["torch"].startswith("2.") and env[0]["gpu"] == "absent"

    # The same command again: every cell is recorded, nothing runs.
    assert main(args) == 0
    assert "nothing to run" in capsys.readouterr().out
    assert len(rows(db)) == 4
    # --force reruns one model's cells into a new run.
    assert main([*args[:1], "test_vit", *args[2:], "--force"]) == 0
    assert len(rows(db)) == 6
    # Two runs: the one that found nothing to do recorded no run.
    assert len(rows(db, "SELECT * FROM runs")) == 2


@pytest.mark.slow
def test_retry_disturbed_reruns_the_cells_whose_timing_was_disturbed(tmp_path, capsys):
    """A resumed sweep skips recorded cells; --retry-disturbed reruns those whose latest
    row says something ran beside their timing (the row's disturbance is set here: a
    real one cannot be produced on demand)."""
    db = tmp_path / "zoo.duckdb"
    args = ["--module", f"{TOY}:TinyMLP", "--models", "test_resnet", "--backends", "eager"]
    args += ["--device", "cpu", "--db", str(db)]
    assert main(args) == 0
    disturbed = rows(db, "SELECT * FROM results WHERE model_id = 'timm/test_resnet'")[0]
    with Store(db).connection() as con:
        con.execute(
            "UPDATE results SET timing_disturbance = 1.5 WHERE result_id = ?",
            [disturbed["result_id"]],
        )
        con.execute(
            "UPDATE results SET timing_disturbance = 1.05 WHERE result_id <> ?",
            [disturbed["result_id"]],
        )
    capsys.readouterr()
    assert main(args) == 0
    assert "nothing to run" in capsys.readouterr().out
    assert main([*args, "--retry-disturbed"]) == 0
    assert "rerunning 1 recorded cell(s) whose timing was disturbed" in capsys.readouterr().err
    after = rows(db, "SELECT model_id FROM results ORDER BY recorded_at")
    assert [r["model_id"] for r in after][-1] == "timm/test_resnet" and len(after) == 3


@pytest.mark.slow
def test_passes_timed_in_one_autocast_region_are_measured_again(tmp_path, capsys):
    """Rows recorded before each call entered autocast itself say `autocast bf16`: a
    resumed sweep measures such a pass again (its speedup and memory do not compare with
    rows timed per call), not a failure of that label, nor a row timed per call."""
    db = tmp_path / "zoo.duckdb"
    args = ["--module", f"{TOY}:TinyMLP", "--models", "test_resnet", "--backends", "eager"]
    args += ["--precision", "bf16", "--device", "cpu", "--db", str(db)]
    assert main(args) == 0
    first = rows(db, "SELECT model_id, status, precision_treatment FROM results")
    assert {(r["status"], r["precision_treatment"]) for r in first} == {
        ("pass", "autocast bf16 per call")
    }
    with Store(db).connection() as con:
        con.execute(
            "UPDATE results SET precision_treatment = 'autocast bf16', status = CASE "
            "WHEN model_id = 'timm/test_resnet' THEN 'pass' ELSE 'fail_accuracy' END"
        )
    capsys.readouterr()
    assert main(args) == 0
    assert "measuring 1 recorded pass again: timed inside one autocast region" in (
        capsys.readouterr().err
    )
    after = rows(db, "SELECT model_id, precision_treatment FROM results ORDER BY recorded_at")
    assert len(after) == 3 and after[-1] == {
        "model_id": "timm/test_resnet",
        "precision_treatment": "autocast bf16 per call",
    }
    assert main(args) == 0
    assert "nothing to run" in capsys.readouterr().out


@pytest.mark.slow
def test_launch_bound_passes_are_measured_again_first(tmp_path, capsys):
    """Of the passes timed inside one autocast region, those whose eager side was
    launch-bound moved most when measured again: a resumed run measures them first in
    their column, and says so."""
    db = tmp_path / "zoo.duckdb"
    args = ["--module", f"{TOY}:TinyMLP", "--models", "test_resnet", "--backends", "eager"]
    args += ["--precision", "bf16", "--device", "cpu", "--db", str(db)]
    assert main(args) == 0
    first = [r["model_id"] for r in rows(db, "SELECT model_id FROM results ORDER BY recorded_at")]
    assert len(first) == 2
    with Store(db).connection() as con:
        con.execute("UPDATE results SET precision_treatment = 'autocast bf16', status = 'pass'")
        # The model measured second was launch-bound: 4x its GPU time.
        con.execute(
            "UPDATE results SET eager_gpu_ms = eager_ms / 4, eager_samples_ms = NULL "
            "WHERE model_id = ?",
            [first[1]],
        )
    capsys.readouterr()
    assert main(args) == 0
    assert (
        "measuring 2 recorded passes again: timed inside one autocast region"
        in (err := capsys.readouterr().err)
        and "the 1 launch-bound first in each column" in err
    )
    again = rows(db, "SELECT model_id FROM results ORDER BY recorded_at")[2:]
    assert [r["model_id"] for r in again] == [first[1], first[0]]


@pytest.mark.inductor
def test_one_inductor_cell(tmp_path):
    db = tmp_path / "zoo.duckdb"
    assert main(["--models", "test_resnet", "--device", "cpu", "--db", str(db)]) == 0
    (r,) = rows(db)
    assert r["backend"] == "inductor" and r["mode"] == "default"
    assert r["status"] == "pass", r["error_message"]
    assert r["compile_s"] > 0.5  # inductor really generated and compiled code
    assert r["graph_break_count"] == 0 and r["accuracy_pass"]


def test_a_shorter_timing_window_stops_where_its_window_ends_and_says_so(tmp_path):
    """--timing-s: the same eager cell on the CPU timed in the protocol's 1 s window and
    in a 0.05 s one. How many pairs either takes depends on how loaded the host is (on
    a crowded CI machine a pair took up to 0.7 s, and both stopped at the minimum of 5),
    but not when the short one stops: a pair after the 5th starts only while less than
    0.05 s has passed, so the pairs before its last took less than that, and there are
    at most 10 (its cap: 200 for 1 s, scaled). Its row says it was timed so; the
    protocol's row says nothing of it."""
    protocol, short = tmp_path / "protocol.duckdb", tmp_path / "short.duckdb"
    args = ["--models", "test_resnet", "--backends", "eager", "--device", "cpu"]
    assert main([*args, "--db", str(protocol)]) == 0
    assert main([*args, "--timing-s", "0.05", "--db", str(short)]) == 0
    (full,) = rows(protocol)
    (brief,) = rows(short)
    assert full["status"] == brief["status"] == "pass"
    eager, compiled = brief["eager_samples_ms"], brief["compiled_samples_ms"]
    assert 5 <= len(eager) == len(compiled) <= 10
    assert len(eager) == 5 or sum(eager[:-1]) + sum(compiled[:-1]) < 50.0
    assert "timing-s" not in (full["notes"] or "")
    assert "timed in a 0.05 s window (zoo-run --timing-s), not the protocol's 1 s" in brief["notes"]
    assert brief["cell_key"] == full["cell_key"]


def test_dry_run_prints_plan_and_drops_without_touching_the_db(tmp_path, capsys):
    db = tmp_path / "zoo.duckdb"
    args = ["--models", "test_resnet,test_vit", "--backends", "inductor,cudagraphs,eager"]
    args += ["--modes", "default,reduce-overhead", "--precision", "fp32,fp16"]
    args += ["--device", "cpu", "--dry-run", "--db", str(db)]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "backend cudagraphs needs CUDA" in captured.err
    assert "reduce-overhead" in captured.err and "fp16" in captured.err
    # inductor/default and eager (mode none), fp32 only, on two models
    assert "4 cells to run on cpu, about 2 min with 1 worker(s)" in captured.out
    assert "timm/test_vit · eager dyn=false fp32 infer" in captured.out
    assert not db.exists()


def test_the_estimate_shares_the_cells_among_workers_up_to_the_gpus_lock():
    """Measured on one H200 (docs/PERFORMANCE.md): 8 workers 6.67x the serial rate, 16
    workers 7.41x, the timing lock always held."""
    assert parallel_share(1, 1) == 1.0
    assert parallel_share(8, 1) == pytest.approx(6.64)
    assert parallel_share(16, 1) == pytest.approx(7.4)  # the lock's ceiling
    assert parallel_share(16, 2) == pytest.approx(13.28)  # two GPUs, two locks
    assert parallel_share(2, 0) == pytest.approx(1.66)  # the CPU: no lock bounds it
    specs = select(["test_resnet", "test_vit"])
    options = PlanOptions(
        backends=("inductor",),
        modes=("default",),
        dynamic=("false",),
        precisions=("bf16",),
        steps=("infer",),
        device="cuda",
    )
    plan = plan_cells(specs, options, "env")
    serial = plan.estimate_s()
    assert serial == pytest.approx(90.0)  # two inductor cells on a GPU, ~45 s each
    # More workers than cells: two side by side.
    assert plan.estimate_s(workers=8, gpus=1) == pytest.approx(serial / 1.66)
    # What --dry-run prints: the length, and the figures it rests on for the device.
    length, basis = estimate_lines(plan, "cuda", 8, 1)
    assert length == "2 cells to run on cuda, under a minute with 8 worker(s)"
    assert "~45 s per inductor cell on a GPU, ~330 s for max-autotune" in basis
    assert "about 0.83 of that rate, up to 7.4x a GPU" in basis
    one = Plan(cells=plan.cells[:1] * 3)
    assert estimate_lines(one, "cuda", 1, 1) == [
        "3 cells to run on cuda, about 2 min with 1 worker(s)",
        "(a rough estimate: one after another ~45 s per inductor cell on a GPU, ~330 s for "
        "max-autotune)",
    ]
    cpu = plan_cells(specs, replace(options, device="cpu"), "env")
    length, basis = estimate_lines(cpu, "cpu", 2, 0)
    assert "~40 s per inductor cell on a CPU, ~10 s per eager or aot_eager cell" in basis
    assert "not measured on a CPU" in basis and "GPU, as measured" not in basis


def test_a_named_config_set_plans_its_columns_per_model(tmp_path, capsys):
    db = tmp_path / "zoo.duckdb"
    args = ["--models", "test_resnet,test_vit", "--configs", "@core", "--device", "cpu"]
    assert main([*args, "--dry-run", "--db", str(db)]) == 0
    captured = capsys.readouterr()
    # 16 columns, two of them CUDA graphs (reduce-overhead, the cudagraphs backend):
    # dropped on the CPU with the registry's reasons.
    assert "backend cudagraphs needs CUDA" in captured.err
    assert "mode reduce-overhead uses CUDA graphs" in captured.err
    assert "28 cells to run on cpu" in captured.out
    lines = [line for line in captured.out.splitlines() if line.startswith("timm/")]
    # Column by column: the two models of a column side by side.
    assert [line.split(" · ")[0] for line in lines[:4]] == [
        "timm/test_resnet",
        "timm/test_vit",
        "timm/test_resnet",
        "timm/test_vit",
    ]
    assert lines[0].split(" · ")[1] == "inductor/default dyn=false bf16 infer"
    planned = [line for line in lines if line.startswith("timm/test_vit")]
    assert len(planned) == 14
    for column in (
        "inductor/max-autotune-no-cudagraphs dyn=false bf16 infer",
        "inductor/default dyn=auto bf16 infer",
        "inductor/default dyn=false fp32 infer",
        "aot_eager dyn=false bf16 infer",
        "xla_export dyn=false bf16 infer",
        "export/strict dyn=false bf16 infer",
        "aot_inductor/default dyn=false bf16 infer",
        "inductor/default dyn=false bf16 train",
    ):
        assert f"timm/test_vit · {column} · batch 2" in planned
    assert not db.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--models", "resnt50"], "closest"),
        (["--models", "test_resnet", "--backends", "inductor,tvmx"], "valid: inductor"),
        (["--models", "test_resnet", "--modes", "fast"], "modes: default, reduce-overhead"),
        (["--models", "test_resnet", "--dynamic", "maybe"], "valid: false, true, auto"),
        (["--models", "test_resnet", "--precision", "fp8"], "valid: fp32, bf16, fp16"),
        (["--models", "test_resnet", "--step", "trian"], "unknown step 'trian'"),
        (["--models", "test_resnet", "--step", "train+model+all"], "unknown step"),
        (["--models", "test_resnet", "--device", "tpu"], "valid: cuda, cpu"),
        (["--models", "test_resnet", "--device", "cuda"], "no CUDA device"),
        (["--models", "test_resnet", "--shard", "3/2"], "K must be between 1 and N, as in 1/2"),
        (["--models", "test_resnet", "--shard", "1/0"], "must be 1 or more; write e.g. 2/4"),
        (["--models", "test_resnet", "--shard", "0/0"], "must be 1 or more; write e.g. 2/4"),
        (["--models", ""], "--models '' names no pattern"),
        (["--models", ","], "--models ',' names no pattern"),
        (["--models", " , ", "--models", ""], "'*' for every model"),
        (["--backends", "eager"], "say which models to run: --models PATTERNS"),
        (["--models", "test_resnet", "--shard", "half"], "is not K/N"),
        (["--models", "test_resnet", "--batch-size", "0"], "must be a finite number, positive"),
        (["--models", "test_resnet", "--timeout", "nan"], "must be a finite number, positive"),
        (["--models", "test_resnet", "--timeout", "inf"], "must be a finite number, positive"),
        (["--models", "test_resnet", "--timeout", "soon"], "is not a number"),
        (["--models", "test_resnet", "--timing-s", "0"], "must be a finite number, positive"),
        (["--models", "test_resnet", "--timing-s", "inf"], "must be a finite number, positive"),
        (["--models", "test_resnet", "--compile-threads", "0"], "'auto' or a whole number"),
        (["--models", "test_resnet", "--compile-threads", "many"], "'auto' or a whole number"),
        (["--models", "test_resnet", "--compile-threads", "2.5"], "'auto' or a whole number"),
        (["--module", "nowhere.py:Model"], "nowhere.py"),
        (["--models", "test_resnet", "--configs", "@all"], "known config sets: @headline, @core"),
        (["--models", "test_resnet", "--configs", "@core", "--dynamic", "true"], "drop --dynamic"),
        (
            [
                "--models",
                "test_resnet",
                "--configs",
                "core",
                "--backends",
                "eager",
                "--step",
                "train",
            ],
            "drop --backends, --step",
        ),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(args, message, tmp_path, capsys):
    db = tmp_path / "zoo.duckdb"
    with pytest.raises(SystemExit) as exited:
        code = main([*args, "--db", str(db)])
        raise SystemExit(code)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
    assert not db.exists()


def test_a_file_that_is_not_a_database_is_left_untouched(tmp_path, capsys):
    db = tmp_path / "zoo.duckdb"
    db.write_text("my notes, not a database\n")
    before = db.read_bytes()
    assert main(["--models", "test_resnet", "--backends", "eager", "--db", str(db)]) == 2
    assert "zoo-run: error:" in capsys.readouterr().err
    assert db.read_bytes() == before


def test_a_database_that_cannot_be_written_is_a_usage_error(tmp_path, capsys):
    """As root, chmod 444 stops nothing: the file is made immutable (chattr +i) where
    that is allowed, read-only by mode otherwise."""
    db = tmp_path / "zoo.duckdb"
    Store.open(db)
    before = db.read_bytes()
    immutable = subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode == 0
    if not immutable:
        if os.geteuid() == 0:
            pytest.skip("root, and chattr +i is not allowed here: no way to deny a write")
        db.chmod(0o444)
    try:
        args = ["--models", "test_resnet", "--backends", "eager", "--device", "cpu"]
        assert main([*args, "--db", str(db)]) == 2
        err = capsys.readouterr().err
        assert f"zoo-run: error: cannot write to the database {db}" in err
        assert "pass a different database path (--db)" in err
        # A dry run only reads: it plans against what is recorded.
        assert main([*args, "--db", str(db), "--dry-run"]) == 0
        assert "1 cell to run on cpu" in capsys.readouterr().out
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(db)], check=True)
    assert db.read_bytes() == before


def test_shards_partition_the_plan():
    from dataclasses import replace

    from runner.matrix import columns
    from runner.plan import PlanOptions, plan_cells, shard
    from zoo.catalog import select

    options = PlanOptions(
        backends=("inductor", "eager"),
        modes=("default",),
        dynamic=("false", "true"),
        precisions=("fp32",),
        steps=("infer",),
        device="cpu",
    )
    plan = plan_cells(select(["test_*"]), options, env_id="e")
    shares = [shard(plan, k, 4).cells for k in range(1, 5)]
    keys = [cell.key for share in shares for cell in share]
    assert sorted(keys) == sorted(cell.key for cell in plan.cells)
    assert len(set(keys)) == len(keys)
    assert max(map(len, shares)) - min(map(len, shares)) <= 1
    assert [c.key for c in shard(plan, 2, 4).cells] == [c.key for c in shares[1]]
    # Each share keeps the plan's order: a named set's share runs column by column,
    # XLA's cells together and the autotuning ones last, as the whole plan would.
    core = replace(options, device="cuda", columns=columns.columns("@core"))
    plan = plan_cells(select(["test_resnet", "test_vit", "test_convnext"]), core, env_id="e")
    rank = {cell.key: i for i, cell in enumerate(plan.cells)}
    for k in range(1, 4):
        share = [rank[cell.key] for cell in shard(plan, k, 3).cells]
        assert share == sorted(share) and len(share) == len(plan.cells) // 3


def test_a_cell_stopped_while_its_breaks_are_captured_keeps_its_measurement(tmp_path):
    """The graph-break capture comes last and can take as long as the compile: a cell
    that times out there is recorded as measured, its breaks missing and said so."""
    db = tmp_path / "zoo.duckdb"
    args = ["--module", f"{MISBEHAVING}:HangWhileBreaksAreCaptured", "--backends", "eager"]
    assert main([*args, "--device", "cpu", "--timeout", "45", "--db", str(db)]) == 0
    (row,) = rows(db)
    assert row["status"] == "pass" and row["speedup"] > 0 and row["compile_s"] is not None
    assert row["error_type"] is None and row["graph_break_count"] is None
    assert (
        "its graph breaks were not captured: the process ended as a timeout in phase "
        "'breaks', after everything else was measured (no result after 45 s"
    ) in row["notes"]
    assert row["wall_s"] >= 45
    assert not list(tmp_path.glob("**/*.partial"))


def test_worker_leaves_no_process_behind_after_a_timeout(tmp_path):
    # The hang test above kills the worker's whole process group; check here that the
    # executor's kill reaches grandchildren too.
    from runner.schedule.executor import Worker

    worker = Worker("torch", tmp_path, "w", dict(os.environ))
    pid = worker.proc.pid
    worker.kill()
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)


def test_every_core_column_runs_on_cuda_and_changes_one_thing_from_the_headline():
    from runner.backends import registry as backends
    from runner.matrix import columns
    from runner.matrix.axes import NO_MODE

    core = columns.columns("@CORE")
    assert core[0] == columns.HEADLINE and len(set(core)) == len(core) == 16
    headline = columns.HEADLINE
    for column in core[1:]:
        entry = backends.get(column.backend)
        assert entry.accepts(column.mode) if entry.modes else column.mode == NO_MODE
        assert backends.cannot_run(column, "cuda") is None
        changed = {
            "compiler": (column.backend, column.mode) != (headline.backend, headline.mode),
            "dynamic": column.dynamic != headline.dynamic,
            "precision": column.precision != headline.precision,
            "step": column.step != headline.step,
        }
        assert sum(changed.values()) == 1, column


def test_retry_failed_reruns_a_timeout_only_when_given_more_time(tmp_path, capsys):
    """A cell that used all its time would most likely use it all again at the same
    limit: --retry-failed keeps its row then, and reruns it under a longer --timeout."""
    db = tmp_path / "zoo.duckdb"
    args = [
        "--module",
        f"{MISBEHAVING}:SlowToBuild",
        "--backends",
        "eager",
        "--device",
        "cpu",
        "--db",
        str(db),
    ]
    assert main([*args, "--timeout", "2"]) == 0
    assert [r["status"] for r in rows(db)] == ["timeout"]
    capsys.readouterr()

    assert main([*args, "--timeout", "2", "--retry-failed"]) == 0
    captured = capsys.readouterr()
    assert "not rerunning 1 recorded timeout(s) (--retry-failed)" in captured.err
    assert "nothing to run" in captured.out
    assert len(rows(db)) == 1

    assert main([*args, "--timeout", "120", "--retry-failed"]) == 0
    assert [r["status"] for r in rows(db)] == ["timeout", "pass"]


def test_retry_failed_plans_a_crowded_oom_as_a_crowded_retry(tmp_path):
    """A recorded out-of-memory row that says others held the memory is retried alone
    (the executor's crowded retry); one out of memory on its own is retried as usual.
    The note is set here: a device crowded by neighbours cannot be made on the CPU."""
    db = tmp_path / "zoo.duckdb"
    args = ["--module", f"{MISBEHAVING}:OutOfMemoryAlways", "--backends", "eager,aot_eager"]
    args += ["--device", "cpu", "--db", str(db), "--batch-size", "1"]
    assert main(args) == 0
    recorded = rows(db)
    assert [r["status"] for r in recorded] == ["oom", "oom"]
    crowded_key = recorded[0]["cell_key"]
    with Store(db).connection() as con:
        con.execute(
            "UPDATE results SET notes = ? WHERE cell_key = ?",
            [f"{CROWDED}: they held 131.3 of the device's 140.0 GiB", crowded_key],
        )
    assert Store(db).crowded([r["cell_key"] for r in recorded]) == {crowded_key}

    specs = select(None, [f"{MISBEHAVING}:OutOfMemoryAlways"])
    options = PlanOptions(
        ("eager", "aot_eager"), ("none",), ("false",), ("fp32",), ("infer",), "cpu"
    )
    plan = plan_cells(specs, options, "env")
    first, second = (cell.key for cell in plan.cells)
    statuses = {first: "oom", second: "oom"}
    retried = skip_recorded(plan, statuses, force=False, retry_failed=True, crowded={first})
    assert [cell.crowded_retries for cell in retried.cells] == [1, 0]
    kept = skip_recorded(plan, statuses, force=False, retry_failed=False, crowded={first})
    assert kept.cells == []


def test_an_oom_building_the_model_is_neither_halved_nor_retried(tmp_path, capsys):
    """Out of memory while the model is built, with nobody crowding it: the batch takes
    no part, so the cell is not retried at a smaller one, and --retry-failed leaves its
    row to --force (InklingModel was tried at 16, 8, 4, 2 and 1 in each of three H200
    chunks)."""
    db = tmp_path / "zoo.duckdb"
    args = ["--module", f"{MISBEHAVING}:OutOfMemoryBuilding", "--backends", "eager"]
    args += ["--device", "cpu", "--db", str(db), "--batch-size", "8"]
    assert main(args) == 0
    [row] = rows(db)
    assert (row["status"], row["error_phase"], row["batch_size_run"]) == ("oom", "build", None)
    assert "an attempt at batch" not in (row["notes"] or "")
    assert Store(db).out_of_memory_building([row["cell_key"]]) == {row["cell_key"]}
    capsys.readouterr()

    assert main([*args, "--retry-failed"]) == 0
    captured = capsys.readouterr()
    assert "not rerunning 1 recorded oom(s) (--retry-failed)" in captured.err
    assert "nothing to run" in captured.out
    assert len(rows(db)) == 1
    assert main([*args, "--force"]) == 0
    assert len(rows(db)) == 2
    # A crowded one is still a crowded retry's to judge.
    with Store(db).connection() as con:
        con.execute("UPDATE results SET notes = ?", [f"{CROWDED}: they held 131.3 of 140.0 GiB"])
    assert Store(db).out_of_memory_building([row["cell_key"]]) == set()


def test_a_timeout_that_outlasted_a_time_limited_run_is_rerun_only_without_one(tmp_path, capsys):
    """A `timeout` row stopped at the end of a time-limited run it could not end within
    (the executor's OUTLASTED_RUN) is not rerun by `--retry-failed` in another such run,
    which could not measure it either, and is by one without a time limit, whatever it
    ran: its own --timeout was never reached."""
    from runner.matrix.results import OUTLASTED_RUN

    db = tmp_path / "zoo.duckdb"
    args = ["--module", f"{FIXTURES / 'toy_models.py'}:TinyMLP", "--backends", "eager"]
    args += ["--device", "cpu", "--db", str(db)]
    assert main(args) == 0
    [row] = rows(db)
    with Store(db).connection() as con:
        con.execute(
            "UPDATE results SET status = 'timeout', error_type = ?, wall_s = 480",
            [OUTLASTED_RUN],
        )
    assert Store(db).outlasted_time_limit([row["cell_key"]]) == {row["cell_key"]}
    capsys.readouterr()
    assert main([*args, "--retry-failed", "--time-limit", "600"]) == 0
    captured = capsys.readouterr()
    assert "not rerunning 1 recorded timeout(s) (--retry-failed): each outlasted" in captured.err
    assert "nothing to run" in captured.out
    assert len(rows(db)) == 1
    assert main([*args, "--retry-failed"]) == 0
    assert [r["status"] for r in rows(db)] == ["timeout", "pass"]


def test_sigusr1_wraps_the_run_up_and_the_same_command_resumes(tmp_path):
    """A batch job's warning before its end (SIGUSR1): no new cell starts, one still
    under way at the wrap-up's end is stopped, the run ends as finished with a line that
    says so, and the same command later runs only the cells left."""
    db = tmp_path / "zoo.duckdb"
    args = [
        "--module",
        f"{TOY}:TinyMLP",
        "--backends",
        "eager",
        "--dynamic",
        "false,true",
        "--precision",
        "fp32,bf16",
        "--device",
        "cpu",
        "--workers",
        "1",
        "--db",
        str(db),
    ]
    command = [sys.executable, "-m", "runner.cli.run", *args, "--wrap-up", "0.01"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    zoo_run = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    lines = []
    try:
        for line in zoo_run.stdout:
            lines.append(line)
            if line.startswith("[1/4]"):
                zoo_run.send_signal(signal.SIGUSR1)
                break
        output = "".join(lines) + zoo_run.stdout.read()
        assert zoo_run.wait(timeout=300) == 0, output
    finally:
        zoo_run.kill()
    recorded = rows(db)
    assert 1 <= len(recorded) < 4, output
    assert (
        f"wrapped up on SIGUSR1 (--wrap-up 0.01 s): {4 - len(recorded)} cells not recorded"
        in output
    )
    assert main(args) == 0
    assert len(rows(db)) == 4
