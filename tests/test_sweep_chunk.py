"""benchmarks/sweep_chunk.py: a chunk of a sweep resumed from the shipped runs, on CPU
with tiny models and the eager backend: what is shipped is skipped, and only the new run
is exported."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from runner.cli.export import main as export
from runner.cli.run import main as run
from tests.scripts import run_benchmark

ROOT = Path(__file__).resolve().parent.parent
CHUNK = ROOT / "benchmarks" / "sweep_chunk.py"
EAGER_CPU = ["--backends", "eager", "--device", "cpu"]


def _chunk(*args: str) -> subprocess.CompletedProcess:
    return run_benchmark("sweep_chunk.py", *args, timeout=600)


def test_a_chunk_skips_what_is_shipped_and_exports_only_its_run(tmp_path):
    shipped = tmp_path / "runs"
    first = tmp_path / "first.duckdb"
    assert run(["--models", "test_resnet", *EAGER_CPU, "--db", str(first)]) == 0
    assert export(["--db", str(first), "--out", str(shipped)]) == 0
    (before,) = [path.name for path in shipped.iterdir()]

    new = tmp_path / "new"
    db = tmp_path / "chunk.duckdb"
    models = ["--models", "test_resnet,test_vit", *EAGER_CPU, "--label", "chunk"]
    done = _chunk(
        "--runs-dir",
        str(shipped),
        "--db",
        str(db),
        "--out",
        str(new),
        "--seconds",
        "300",
        "--",
        *models,
    )
    assert done.returncode == 0, done.stderr
    assert "skipping 1 cell already recorded" in done.stderr
    (exported,) = list(new.iterdir())
    assert exported.name != before
    cells = duckdb.sql(
        f"SELECT model_id, status FROM read_parquet('{exported / 'results.parquet'}')"
    ).fetchall()
    assert cells == [("timm/test_vit", "pass")]
    assert f"exported 1 new run(s) to {new}" in done.stdout

    # Shipped (moved beside the others), the same chunk again: nothing left to run,
    # nothing new to export.
    exported.rename(shipped / exported.name)
    again = _chunk("--runs-dir", str(shipped), "--db", str(db), "--seconds", "300", "--", *models)
    assert again.returncode == 0, again.stderr
    assert "nothing to run" in again.stdout
    assert "exported 0 new run(s)" in again.stdout


def test_a_chunk_runs_its_zoo_runs_one_after_another(tmp_path):
    """Cells to measure again first (--force), then the sweep: the second starts
    because the first ran out of cells, and both runs are exported."""
    shipped = tmp_path / "runs"
    first = tmp_path / "first.duckdb"
    assert run(["--models", "test_resnet", *EAGER_CPU, "--db", str(first)]) == 0
    assert export(["--db", str(first), "--out", str(shipped)]) == 0
    new = tmp_path / "new"
    done = _chunk(
        "--runs-dir", str(shipped), "--db", str(tmp_path / "chunk.duckdb"), "--out", str(new),
        "--seconds", "400", "--",
        "--models", "test_resnet", *EAGER_CPU, "--force", "--label", "again",
        "--then", "--models", "test_resnet,test_vit", *EAGER_CPU, "--label", "sweep",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    cells = duckdb.sql(
        f"SELECT label, model_id FROM read_parquet('{new}/*/results.parquet') "
        f"JOIN read_parquet('{new}/*/runs.parquet') USING (run_id) ORDER BY label"
    ).fetchall()
    assert cells == [("again", "timm/test_resnet"), ("sweep", "timm/test_vit")]
    assert "exported 2 new run(s)" in done.stdout


def test_bad_input_is_refused_before_anything_runs(tmp_path):
    db = tmp_path / "chunk.duckdb"
    for args, message in (
        (["--seconds", "30", "--", "--models", "test_resnet"], "--seconds must be"),
        (["--seconds", "inf", "--", "--models", "test_resnet"], "--seconds must be"),
        (["--seconds", "300"], "give zoo-run's arguments after --"),
        (["--seconds", "300", "--", "--models", "x", "--then"], "separated by --then"),
        (["--seconds", "300", "--", "--models", "x", "--db", "y"], "--db is this script's"),
        (
            ["--runs-dir", str(tmp_path / "nope"), "--seconds", "300", "--", "--models", "x"],
            "no such folder",
        ),
    ):
        done = _chunk("--db", str(db), *args)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)
    assert not db.exists()


def test_the_chunk_end_stops_zoo_run_even_when_started_in_the_background():
    """A job script's `sweep_chunk.py ... &` runs with SIGINT ignored, which a child
    inherits: the chunk's end must still reach zoo-run as SIGINT (so that it records
    what it can), not fall through to SIGKILL 20 s later."""
    script = f"""
import importlib.util, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `cmd &` in a non-interactive shell
spec = importlib.util.spec_from_file_location("sweep_chunk", {str(CHUNK)!r})
chunk = importlib.util.module_from_spec(spec)
spec.loader.exec_module(chunk)
started = time.monotonic()
status = chunk._run_until([sys.executable, "-c", "import time; time.sleep(120)"], 1.0)
print(status, time.monotonic() - started)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    status, seconds = done.stdout.split()
    # Python dies of an uncaught KeyboardInterrupt by SIGINT itself.
    assert int(status) == -signal.SIGINT and float(seconds) < 15


@pytest.mark.slow
def test_a_resident_chunk_outlives_its_first_call_and_wraps_up_on_the_last(tmp_path):
    """benchmarks/resident.sh on the CPU: the first call returns while the chunk runs on
    (what it recorded so far exported under $OUT), the last call's SIGUSR1 reaches
    zoo-run through the chunk, which wraps up, and the run comes back exported."""
    env = {
        **os.environ,
        "RESIDENT_DIR": str(tmp_path / "resident"),
        "PYTHONPATH": str(ROOT),
        # The script's python3 is the tests' (activated or not): it has duckdb, so it
        # never reaches for the GPU machine's wheels a checkout may keep in .whl/.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    script = ["bash", str(ROOT / "benchmarks" / "resident.sh")]
    models = "test_resnet,test_vit,test_convnext,test_efficientnet,test_byobnet"
    first = tmp_path / "first"
    started = subprocess.run(
        [*script, "start", "50", "400", "--", "--models", models, *EAGER_CPU,
         "--workers", "1", "--wrap-up", "1", "--label", "resident"],
        cwd=ROOT, env={**env, "OUT": str(first)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    assert "started the chunk" in started.stdout
    assert {path.name for path in first.iterdir()} >= {"runs.tgz", "logs.tgz", "ps.txt"}
    # The signal is for a zoo-run under way: ignored while it starts (its handler not
    # yet set), as a chunk's last call sends it minutes into the run.
    log_path = tmp_path / "resident" / "resident.log"
    deadline = time.monotonic() + 120
    while "[1/5]" not in log_path.read_text() and time.monotonic() < deadline:
        time.sleep(0.5)
    last = tmp_path / "last"
    ended = subprocess.run(
        [*script, "end", "185"], cwd=ROOT, env={**env, "OUT": str(last)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert ended.returncode == 0, ended.stderr
    assert "SIGUSR1 to the chunk" in ended.stdout
    log = log_path.read_text()
    assert "wrapped up on SIGUSR1 (--wrap-up 1 s)" in log, log
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    subprocess.run(["tar", "xzf", str(last / "runs.tgz"), "-C", str(unpacked)], check=True)
    (run_folder,) = [path for path in unpacked.iterdir() if path.is_dir()]
    ((label, cells),) = duckdb.sql(
        f"SELECT label, cells_recorded FROM read_parquet('{run_folder}/runs.parquet')"
    ).fetchall()
    assert label == "resident" and 1 <= cells < 5
    # Fetched here, benchmarks/land_chunk.sh lands the run and the chunk's log once.
    here = tmp_path / "checkout"
    (here / "runs").mkdir(parents=True)
    land = ["bash", str(ROOT / "benchmarks" / "land_chunk.sh"), str(last), "headline"]
    land_env = {**env, "RUNS_DIR": "runs", "LOGS_DIR": "logs", "SHIPPED_DOCS": "0"}
    landed = subprocess.run(land, cwd=here, env=land_env, capture_output=True, text=True)
    assert landed.returncode == 0, landed.stderr
    assert (here / "runs" / run_folder.name / "results.parquet").is_file()
    (kept,) = (here / "logs").iterdir()
    assert kept.name == f"headline-{run_folder.name[:8]}.log"
    assert "wrapped up on SIGUSR1" in kept.read_text()
    again = subprocess.run(land, cwd=here, env=land_env, capture_output=True, text=True)
    assert "is there already: left as it is" in again.stdout
    assert "no new run to land" in again.stdout
    missing = subprocess.run(
        [*land[:2], str(tmp_path / "nowhere"), "headline"], cwd=here, env=land_env,
        capture_output=True, text=True,
    )  # fmt: skip
    assert missing.returncode == 2 and "has no runs.tgz" in missing.stderr


@pytest.mark.parametrize(
    ("card", "land", "models", "label"),
    [
        ("NVIDIA H200", "headline", "@headline", "zoo-headline"),
        ("NVIDIA H100 80GB HBM3", "core-h100", "@core", "zoo-core-h100"),
    ],
)
def test_a_zoo_chunk_runs_the_sweep_of_the_card_it_was_lent(card, land, models, label):
    """benchmarks/zoo_chunk.sh: an H200 runs the headline column, an H100 its own sweep
    of the core set; it names the landing and starts resident.sh with zoo-run arguments
    that zoo-run's own parser takes."""
    from runner.cli.run import build_parser
    from runner.matrix import columns

    done = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "zoo_chunk.sh"), "585", "1450"],
        env={**os.environ, "GPU_NAME": card, "DRY_RUN": "1"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    first, start = done.stdout.splitlines()
    assert first == f"LAND {land} ({card})"
    command, zoo_run = start.split(" -- ")
    assert command == "resident.sh start 585 1450"
    args = build_parser().parse_args(zoo_run.split())
    assert (args.models, args.configs[0], args.label) == ([models], models, label)
    assert args.configs[1] == columns.columns(models)
    assert (args.workers, args.timing_cpus, args.triage) == (14, 2, "ladder")


def test_a_zoo_chunk_starts_nothing_on_another_card():
    done = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "zoo_chunk.sh"), "585", "1450"],
        env={**os.environ, "GPU_NAME": "NVIDIA A100-SXM4-80GB"},
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 3 and done.stdout == ""
    assert "no sweep runs on this card (NVIDIA A100-SXM4-80GB): give it back" in done.stderr
