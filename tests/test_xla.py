"""XLA cells for real, on JAX's CPU backend: torchax + jax.jit, torch.export -> JAX, and
torch_xla's reason for not running. Tiny models keep the whole file near a minute.

Nothing here imports runner.xla or torchax: in this process torch.compile must keep
working for the other tests.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from runner.backends.registry import process_kind
from runner.backends.xla.support import routes, unavailable_reason
from runner.cli.run import main
from runner.matrix.axes import NO_MODE
from runner.matrix.cells import Cell, CellConfig
from runner.schedule.executor import Executor
from tests.results import rows
from zoo.catalog import select

FIXTURES = Path(__file__).parent / "fixtures"

# find_spec, not importorskip: importing torchax here would break torch.compile.
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torchax") is None, reason="the xla extra is not installed"
)


def test_xla_and_xla_export_cells_of_timm_and_hf_models(tmp_path):
    db = tmp_path / "zoo.duckdb"
    args = ["--models", "test_resnet,hf/BertForMaskedLM", "--backends", "xla,xla_export"]
    assert main([*args, "--device", "cpu", "--db", str(db)]) == 0

    results = rows(db)
    assert [(r["model_id"], r["backend"]) for r in results] == [
        ("hf/BertForMaskedLM", "xla"),
        ("hf/BertForMaskedLM", "xla_export"),
        ("timm/test_resnet", "xla"),
        ("timm/test_resnet", "xla_export"),
    ]
    for r in results:
        assert r["status"] == "pass", (r["error_message"], r["traceback_tail"])
        assert r["mode"] == "none" and r["precision"] == "fp32"
        assert r["precision_treatment"] == "fp32, jax matmul precision highest"
        # One XLA compile of the model function, timed by jax.monitoring.
        assert r["graph_count"] == 1 and r["recompile_count"] == 0
        assert r["graph_break_count"] == 0
        assert 0 < r["compile_s"] <= r["first_call_s"]
        assert re.search(r"XLA: 1 compile\(s\);.* compile [0-9.]+ s", r["notes"])
        assert r["eager_ms"] > 0 and r["compiled_ms"] > 0
        assert r["speedup"] == pytest.approx(r["eager_ms"] / r["compiled_ms"])
        assert r["accuracy_pass"] is True and r["accuracy_ref_dtype"] == "fp64"
        assert r["max_abs_error"] < 1e-4
        # JAX reports no memory on the CPU.
        assert r["compiled_peak_alloc_mb"] is None
    hf = results[0]
    assert hf["size"] == "tiny" and hf["seq_len"] == 16
    assert "int64 as int32" in hf["notes"]  # jax_enable_x64 is off
    assert "torch.export and conversion" in results[1]["notes"]
    for r in results:
        # Eager timed in a process without JAX (runner.eager_baseline), in blocks that
        # alternate with blocks of XLA calls: as many samples on each side.
        assert "eager timed in a process without JAX, in blocks" in r["notes"]
        assert len(r["eager_samples_ms"]) == len(r["compiled_samples_ms"]) >= 5
        assert r["host_launch_us"] > 0  # the launch canary, in the XLA process
        # The eager side profiled in its own process; the torch profiler does not see
        # XLA's CPU work, so the compiled side has no kernel count (and no GPU time).
        assert r["eager_kernels"] > 0 and r["compiled_kernels"] is None
        assert r["eager_gpu_ms"] is None and r["gpu_speedup"] is None
        assert "the torch profiler does not see XLA's CPU work" in r["notes"]

    # The XLA cells' environment: the XLA fingerprint, jax and torchax in it.
    (env,) = rows(db, "SELECT * FROM environments WHERE fingerprint = 'xla'")
    assert {r["env_id"] for r in results} == {env["env_id"]}
    described = json.loads(env["xla_routes"])
    assert described["xla"].startswith("available (torchax ")
    assert described["torch_xla"] == "unsupported: torch_xla not installed"
    assert env["torchax"] != "absent" and env["jax"] != "absent"


def _cell(model_id: str, backend: str, dynamic="false", precision="fp32", batch=2) -> Cell:
    (spec,) = select([model_id])
    return Cell(
        spec=spec,
        config=CellConfig(backend, NO_MODE, dynamic, precision),
        size=spec.size,
        batch_size=batch,
        seq_len=None,
        device="cpu",
        env_id="test",
    )


def test_bf16_cast_dynamic_probe_unsupported_torch_xla_and_separate_processes(tmp_path):
    cells = [
        _cell("timm/test_vit", "xla", dynamic="auto", precision="bf16", batch=4),
        _cell("timm/test_resnet", "torch_xla"),
        # A torch.compile cell after XLA cells: it must get a process of its own.
        _cell("timm/test_resnet", "aot_eager"),
    ]
    results = {}
    Executor(tmp_path, workers=1).run(cells, on_result=lambda r: results.update({r.backend: r}))

    bf16 = results["xla"]
    assert bf16.status == "pass", (bf16.error_message, bf16.traceback_tail)
    assert bf16.precision_treatment == "cast bf16 (model and inputs, eager too)"
    assert bf16.accuracy_pass and bf16.eager_rmse > 1e-4  # bf16 rounding, on both sides
    # jax.jit specializes on shapes: the halved batch is one more XLA compile.
    assert bf16.probe_shapes == "[[2, 3, 160, 160]]"
    assert bf16.probe_ok is True and bf16.probe_recompiles == 1

    torch_xla = results["torch_xla"]
    assert torch_xla.status == "unsupported"
    assert torch_xla.error_message == "torch_xla not installed"
    assert torch_xla.traceback_tail is None

    assert results["aot_eager"].status == "pass", results["aot_eager"].error_message
    # Each worker's log names the cells it ran: no process ran both kinds.
    kinds = []
    for log in sorted(tmp_path.glob("worker-*.log")):
        ran = re.findall(r"=== zoo-matrix worker: cell \w+ \S+ · (\w+)", log.read_text())
        kinds.append({"torch" if backend == "aot_eager" else "xla" for backend in ran})
    assert sorted(map(sorted, kinds)) == [["torch"], ["xla"]]


def test_route_reasons_come_from_metadata_alone():
    # Where the xla extra is installed, both torchax routes may run on the CPU.
    assert unavailable_reason("xla", "cpu") is None
    assert unavailable_reason("xla_export", "cpu") is None
    assert unavailable_reason("torch_xla", "cuda") == "torch_xla not installed"
    assert set(json.loads(routes("cpu"))) == {"xla", "xla_export", "torch_xla"}
    # Runs with XLA cells import neither jax nor torchax in the parent process.
    assert "torchax" not in sys.modules and "jax" not in sys.modules


def test_the_plan_keeps_each_process_kind_together():
    from runner.plan import PlanOptions, plan_cells

    options = PlanOptions(
        backends=("xla", "eager", "xla_export"),
        modes=("default",),
        dynamic=("false",),
        precisions=("fp32",),
        steps=("infer",),
        device="cpu",
    )
    cells = plan_cells(select(["test_resnet", "test_vit"]), options, "env").cells
    assert [process_kind(cell.config.backend) for cell in cells] == ["torch"] * 2 + ["xla"] * 4


def _xla_cell_of_misbehaving_model(tmp_path, name: str):
    (spec,) = select(None, [f"{FIXTURES / 'misbehaving.py'}:{name}"])
    cell = Cell(spec, CellConfig("xla", NO_MODE, "false", "fp32"), "full", None, None, "cpu", "t")
    results = []
    Executor(tmp_path, workers=1).run([cell], on_result=results.append)
    (result,) = results
    return result


def test_a_failing_eager_baseline_process_is_the_cells_eager_error(tmp_path):
    result = _xla_cell_of_misbehaving_model(tmp_path, "BuildsOnlyBesideJax")
    assert (result.status, result.error_phase) == ("eager_error", "eager baseline")
    assert "the eager baseline process ended" in result.error_message
    # The baseline process's own traceback is in the worker's log.
    (log,) = tmp_path.glob("worker-*.log")
    assert "BuildsOnlyBesideJax needs jax imported" in log.read_text()


def test_an_eager_baseline_dying_between_timed_blocks_is_the_cells_eager_error(tmp_path):
    result = _xla_cell_of_misbehaving_model(tmp_path, "DiesWhileTimedWithoutJax")
    assert (result.status, result.error_phase) == ("eager_error", "eager baseline")
    assert "the eager baseline process ended (exit 3)" in result.error_message


def test_the_eager_baseline_times_blocks_on_the_cores_it_is_sent(tmp_path):
    """The GO line names the lock holder's cores (the reserved timing cores under
    --timing-cpus); the baseline process moves all its threads there, then times the
    blocks of calls the cell asks for between its own."""
    import os
    import subprocess

    (spec,) = select(["timm/test_resnet"])
    cell = Cell(spec, CellConfig("xla", NO_MODE, "false", "fp32"), "full", 2, None, "cpu", "t")
    core = max(os.sched_getaffinity(0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "runner.backends.xla.eager_baseline"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )

    def say(line):
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
        return proc.stdout.readline().strip()

    try:
        assert say(json.dumps({"cell": cell.to_dict()})) == "ready"
        assert say(f"go {core}") == "warm"
        blocks = [json.loads(say("time 3"))["samples"] for _ in range(2)]
        reply = json.loads(say("done"))
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.wait()
    assert [len(block) for block in blocks] == [3, 3]
    assert all(ms > 0 for block in blocks for ms in block)
    assert reply["cpus"] == [core]
    assert reply["jax_imported"] is False
