"""benchmarks/sweep_chunk.py: a chunk of a sweep resumed from the shipped runs, on CPU
with tiny models and the eager backend: what is shipped is skipped, and only the new run
is exported."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import duckdb

from runner.cli.export import main as export
from runner.cli.run import main as run

ROOT = Path(__file__).resolve().parent.parent
CHUNK = ROOT / "benchmarks" / "sweep_chunk.py"
EAGER_CPU = ["--backends", "eager", "--device", "cpu"]


def _chunk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(CHUNK), *args], capture_output=True, text=True, timeout=600
    )


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
    assert "skipping 1 cells already recorded" in done.stderr
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


def test_bad_input_is_refused_before_anything_runs(tmp_path):
    db = tmp_path / "chunk.duckdb"
    for args, message in (
        (["--seconds", "30", "--", "--models", "test_resnet"], "--seconds must be"),
        (["--seconds", "inf", "--", "--models", "test_resnet"], "--seconds must be"),
        (["--seconds", "300"], "give zoo-run's arguments after --"),
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
