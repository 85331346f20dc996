"""The scheduled sweep workflow's zoo-* steps, run as written (bash, the workflow's
environment), on CPU with a tiny model and the headline column alone in place of the catalogue and
the core set's columns: two sweeps, each shard exported, shipped into data/runs, then the
publish job's comparison of the newer sweep with the older one. GitHub itself is not
reachable from here; this keeps the commands true to the CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SWEEP = ROOT / ".github" / "workflows" / "sweep.yml"


@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(SWEEP.read_text())


def _scripts(workflow: dict, job: str) -> list[str]:
    return [
        step["run"]
        for step in workflow["jobs"][job]["steps"]
        if "run" in step and "pip install" not in step["run"]
    ]


def _bash(script: str, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_every_shard_of_the_matrix_is_one_of_shards(workflow):
    shards = int(workflow["env"]["SHARDS"])
    assert workflow["jobs"]["sweep"]["strategy"]["matrix"]["shard"] == list(range(1, shards + 1))
    assert workflow["jobs"]["sweep"]["env"]["SHARD"] == "${{ matrix.shard }}"


@pytest.mark.inductor
def test_two_sweeps_export_ship_and_compare_as_the_workflow_says(workflow, tmp_path):
    env = {
        **os.environ,
        # The workflow's models and columns narrowed to what a CPU runs quickly: one
        # model, the headline column (one Inductor compile) in both steps.
        **{k: v for k, v in workflow["env"].items() if "${{" not in v},
        "MODELS": "test_resnet",
        "CORE_MODELS": "test_resnet",
        "CONFIGS": "@headline",
        # The first of two shards: half the cells, as one of the workflow's runners.
        "SHARDS": "2",
        "SHARD": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    assert workflow["env"]["CONFIGS"].endswith("'@core' }}")
    runs = tmp_path / "data" / "runs"
    for label in ("sweep-1", "sweep-2"):
        for script in _scripts(workflow, "sweep"):
            _bash(script, tmp_path, {**env, "LABEL": label})
        exported = list((tmp_path / "runs").iterdir())
        assert len(exported) == 1 and (exported[0] / "results.parquet").exists()
        # What download-artifact does: every shard's run folders into data/runs.
        runs.mkdir(parents=True, exist_ok=True)
        shutil.move(exported[0], runs / exported[0].name)
        (tmp_path / "sweep.duckdb").unlink()

    (publish,) = _scripts(workflow, "publish")
    out = _bash(publish, tmp_path, {**env, "LABEL": "sweep-2"})
    report = (tmp_path / "sweep-report.md").read_text()
    assert out == report
    assert "Against sweep-1" in report
    # Shard 1/2 of one cell: the cell, in both sweeps (the core step found it recorded).
    assert "1 cell(s) compared (only in A: 0, only in B: 0)" in report
