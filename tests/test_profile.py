"""GPU time per cell (runner.measure.profile): what a profiled call records on the CPU,
the busy-time and launch-bound rules, and comparing GPU-time speedups (zoo-compare)."""

from __future__ import annotations

import io

import pytest
import torch
from torch import nn

from dashboard import compare
from dashboard.data import load
from runner.cell import measure_cell
from runner.matrix.cells import Cell, CellConfig
from runner.matrix.labels import LAUNCH_BOUND_RATIO, is_launch_bound, launch_ratio
from runner.measure.profile import busy_ns, profile_call
from runner.store.db import Store
from runner.store.export import export_runs
from runner.store.schema import RunRecord
from tests.results import make_result
from zoo.spec import ModelSpec


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def cell(backend: str = "eager") -> Cell:
    spec = ModelSpec(id="test/mlp", suite="custom", name="mlp", family="test", task="test")
    return Cell(spec, CellConfig(backend, "none", "false", "fp32"), "full", 4, None, "cpu", "env")


def test_a_cpu_cell_counts_operators_and_leaves_gpu_fields_empty():
    result = measure_cell(
        cell(), model=Mlp(), inputs_fn=lambda batch, device, seq: (torch.randn(batch, 8),)
    )
    assert result.status == "pass", result.error_message
    # linear, relu, linear at the top level of the eager call
    assert result.eager_kernels == 3
    assert isinstance(result.compiled_kernels, int) and result.compiled_kernels >= 1
    # Empty, not zero: there is no GPU to be busy.
    assert result.eager_gpu_ms is None and result.compiled_gpu_ms is None
    assert result.gpu_speedup is None and result.eager_host_ms is None
    assert result.profile_s > 0
    assert result.timing_disturbance >= 1.0


def test_profile_call_counts_top_level_operators_on_cpu():
    model, x = Mlp(), torch.randn(2, 8)
    profile = profile_call(lambda: model(x), lambda: None, on_cuda=False)
    assert profile.kernels == 3 and profile.gpu_ms is None and profile.cost_s > 0


def test_busy_time_counts_overlapping_kernels_once():
    assert busy_ns([]) == 0
    assert busy_ns([(0, 10), (20, 25)]) == 15
    assert busy_ns([(0, 10), (5, 12), (11, 13), (30, 31)]) == 14
    assert busy_ns([(5, 6), (0, 10)]) == 10  # unsorted, one inside another


def test_the_launch_bound_rule():
    # regnety_032 on the H200 (the table): eager 10.98-18.36 ms wall, 9.27 GPU.
    assert launch_ratio(18.36, 9.27) == pytest.approx(1.98, abs=0.01)
    assert is_launch_bound(18.36, 9.27) is True
    assert is_launch_bound(9.5, 9.27) is False
    assert is_launch_bound(LAUNCH_BOUND_RATIO * 4.0, 4.0) is True
    assert is_launch_bound(5.0, None) is None and is_launch_bound(None, 3.0) is None


def _compare_db(tmp_path, a_values: dict, b_values: dict):
    store = Store.open(tmp_path / "zoo.duckdb")
    for run_id, values in (("run-a", a_values), ("run-b", b_values)):
        store.start_run(RunRecord(run_id=run_id, command="zoo-run", env_id="env-a"))
        store.write_results(run_id, [make_result("key-1", **values)])
    con, _ = load(tmp_path / "no-runs", tmp_path / "zoo.duckdb")
    return con


# regnety_032 in one process within twenty seconds: wall speedup 1.17x, then 1.97x; GPU
# time 1.12x both times (the table).
DRIFT_A = dict(eager_ms=10.98, compiled_ms=9.36, speedup=10.98 / 9.36, gpu_speedup=9.27 / 8.26)
DRIFT_B = dict(eager_ms=18.36, compiled_ms=9.32, speedup=18.36 / 9.32, gpu_speedup=9.24 / 8.25)
for values in (DRIFT_A, DRIFT_B):
    values.update(
        eager_ms_p25=values["eager_ms"] * 0.99,
        eager_ms_p75=values["eager_ms"] * 1.01,
        compiled_ms_p25=values["compiled_ms"] * 0.99,
        compiled_ms_p75=values["compiled_ms"] * 1.01,
    )


def test_gpu_time_comparison_does_not_fire_on_host_drift(tmp_path):
    con = _compare_db(tmp_path, DRIFT_A, DRIFT_B)
    (wall,) = compare.compare_frames(con, "run-a", "run-b")["change"]
    (gpu,) = compare.compare_frames(con, "run-a", "run-b", metric=compare.GPU)["change"]
    assert (wall, gpu) == (compare.FASTER, compare.SAME)
    out = io.StringIO()
    frame = compare.compare_frames(con, "run-a", "run-b", metric=compare.GPU)
    side_a, side_b = compare.resolve_side(con, "run-a"), compare.resolve_side(con, "run-b")
    compare.write_text(frame, side_a, side_b, (0, 0), out, metric=compare.GPU)
    assert "speedup: GPU-time speedup" in out.getvalue()


def test_gpu_time_gate_fires_on_a_real_regression(tmp_path, capsys):
    slower = {**DRIFT_B, "gpu_speedup": 0.9}
    store_dir = tmp_path
    _compare_db(store_dir, DRIFT_A, slower)
    (tmp_path / "no-runs").mkdir()
    db, runs = str(tmp_path / "zoo.duckdb"), str(tmp_path / "no-runs")
    args = ["run-a", "run-b", "--db", db, "--runs-dir", runs, "--fail-on-regression"]
    assert compare.main([*args, "--speedup", "gpu"]) == 1
    # By wall time the same cells read faster: the gate passes.
    assert compare.main(args) == 0
    assert "GPU-time speedup" in capsys.readouterr().out


def test_the_dashboard_labels_launch_bound_cells(tmp_path):
    from dashboard import charts, queries

    store = Store.open(tmp_path / "zoo.duckdb")
    store.start_run(RunRecord(run_id="run-a", command="zoo-run", env_id="env-a"))
    store.write_results(
        "run-a",
        [
            make_result(
                "key-1", model_id="timm/a", eager_ms=18.36, eager_gpu_ms=9.27, gpu_speedup=1.12
            ),
            make_result(
                "key-2", model_id="timm/b", eager_ms=9.5, eager_gpu_ms=9.27, gpu_speedup=1.3
            ),
            make_result("key-3", model_id="timm/c", eager_ms=9.5),
            # A median slowed by a disturbed host; its fastest call is near GPU time.
            make_result(
                "key-4",
                model_id="timm/d",
                eager_ms=18.36,
                eager_samples_ms=[9.5, 18.0, 18.36, 19.0],
                eager_gpu_ms=9.27,
            ),
        ],
    )
    export_runs(tmp_path / "zoo.duckdb", tmp_path / "runs")
    con, _ = load(tmp_path / "runs", None)
    for statement in queries.PREPARE:
        con.execute(statement)
    bound = dict(con.execute("SELECT model_id, bound FROM latest_cells").fetchall())
    assert bound == {
        "timm/a": "launch-bound",
        "timm/b": "gpu-bound",
        "timm/c": None,
        "timm/d": "gpu-bound",
    }
    cells = con.execute("SELECT * FROM latest_cells").df()
    page = charts.matrix_html(cells, sorted(cells["config"].unique()), ["timm/a", "timm/b"])
    assert page.count('class="launch-bound"') == 1
    assert "GPU-time speedup 1.12x" in page and "⚠ launch-bound" in page
