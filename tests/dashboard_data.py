"""A tiny results fixture for the dashboard tests: one run shipped as parquet, one in the
user's database, with a pass, a compile error with a traceback, a graph break and an
accuracy failure."""

from __future__ import annotations

import json
import re
from pathlib import Path

from dashboard.text import WORD_JOINER
from runner.matrix.cells import cell_key
from runner.matrix.results import CellResult, GraphBreak
from runner.store.db import Store
from runner.store.export import export_runs
from runner.store.schema import RunRecord

ENV = {
    "env_id": "env-test",
    "python": "3.11.7",
    "torch": "2.11.0",
    "triton": "3.6.0",
    "cuda": "13.0",
    "gpu": "NVIDIA H200",
    "timm": "1.0.29",
    "transformers": "absent",
    "jax": "absent",
    "jaxlib": "absent",
    "torchax": "absent",
    "torch_xla": "absent",
    "driver": "580",
    "cudnn": "91900",
    "gpu_count": 1,
    "gpu_memory_gb": 140.4,
    "cpu": "x86_64",
    "cpu_count": 16,
    "host": "test",
    "platform": "Linux",
    "captured_at": "2026-01-01T00:00:00+00:00",
}
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "runner/measure.py", line 120, in compile_phase\n'
    "    compiled(*inputs)\n"
    "torch._inductor.exc.InductorError: LoweringException: boom in aten.fancy_op"
)
SIGNATURE = "InductorError: LoweringException: boom in aten.fancy_op <N>"


def shown(markdown: str) -> str:
    """What a reader sees of Markdown the dashboard escaped (``dashboard.text.plain``)."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown).replace(WORD_JOINER, "")


def cell(
    model: str, family: str, backend: str, status: str, precision: str = "bf16", **values
) -> CellResult:
    mode = "default" if backend == "inductor" else "none"
    key = {
        "model_id": f"timm/{model}",
        "size": "full",
        "backend": backend,
        "mode": mode,
        "dynamic": "false",
        "precision": precision,
        "step": "infer",
        "batch_size": 64,
        "seq_len": None,
        "device": "cuda",
        "env_id": ENV["env_id"],
    }
    return CellResult(
        cell_key=cell_key(key),
        suite="timm",
        family=family,
        task="image-classification",
        status=status,
        input_shapes="[[64, 3, 224, 224]]",
        **key,
        **values,
    )


def timed(speedup: float, compile_s: float) -> dict:
    eager = 10.0
    compiled = eager / speedup
    return {
        "speedup": speedup,
        "compile_s": compile_s,
        "first_call_s": compile_s + 0.25,
        "eager_ms": eager,
        "eager_ms_p25": eager * 0.98,
        "eager_ms_p75": eager * 1.02,
        "compiled_ms": compiled,
        "compiled_ms_p25": compiled * 0.98,
        "compiled_ms_p75": compiled * 1.02,
        "eager_samples_ms": [eager * 0.98, eager, eager * 1.02],
        "compiled_samples_ms": [compiled * 0.98, compiled, compiled * 1.02],
        "memory_ratio": 0.8,
        "eager_peak_alloc_mb": 500.0,
        "compiled_peak_alloc_mb": 400.0,
        "accuracy_pass": True,
        "graph_count": 1,
        "graph_break_count": 0,
        "recompile_count": 0,
    }


def build(root: Path) -> tuple[Path, Path]:
    """``root/runs`` (parquet: run "nightly") and ``root/zoo.duckdb`` (run "rerun")."""
    shipped = Store.open(root / "shipped.duckdb")
    shipped.record_environment(ENV)
    nightly = RunRecord(label="nightly", command="zoo-run --models 'timm/*'", status="finished")
    shipped.start_run(nightly)
    shipped.write_results(
        nightly.run_id,
        [
            cell(
                "resnet18",
                "resnet",
                "inductor",
                "compile_error",
                error_type="RuntimeError",
                error_signature="RuntimeError: old failure",
                error_message="old failure",
                error_phase="inductor codegen",
                traceback_tail="old traceback",
            ),
            cell("resnet18", "resnet", "aot_eager", "pass", **timed(1.02, 2.0)),
        ],
    )
    export_runs(root / "shipped.duckdb", root / "runs")
    (root / "shipped.duckdb").unlink()

    user = Store.open(root / "zoo.duckdb")
    user.record_environment(ENV)
    rerun = RunRecord(label="rerun", command="zoo-run --models resnet18", status="finished")
    user.start_run(rerun)
    breaks = dict(timed(1.1, 4.0), graph_count=3, graph_break_count=2, unique_break_count=2)
    # Its eager calls were disturbed: the median (10 ms) far above the fastest sample.
    breaks["eager_samples_ms"] = [6.0, 9.8, 10.0, 10.2, 10.4]
    # Its peaks outside the memory pass (the accuracy reference's; into and through its
    # compile, schema 10).
    breaks.update(reference_peak_reserved_mb=900.0, resident_mb=180.0)
    breaks.update(compile_peak_reserved_mb=640.0)
    user.write_results(
        rerun.run_id,
        [
            cell(
                "resnet18", "resnet", "inductor", "pass", param_count=11_700_000, **timed(1.5, 12.0)
            ),
            cell(
                "vit_tiny_patch16_224",
                "vision_transformer",
                "inductor",
                "compile_error",
                error_type="InductorError",
                error_phase="inductor codegen",
                error_signature=SIGNATURE,
                error_message="LoweringException: boom in aten.fancy_op",
                traceback_tail=TRACEBACK,
                compile_s=3.0,
            ),
            cell(
                "vit_tiny_patch16_224",
                "vision_transformer",
                "aot_eager",
                "pass",
                graph_breaks=[
                    GraphBreak(
                        "Failed to trace builtin operator: Dynamo does not know how to trace",
                        "timm/models/vision_transformer.py:42",
                        1,
                        "Failed to trace builtin operator",
                        "GB0085",
                        '["Avoid calling builtin `print` in the compiled region."]',
                    ),
                    GraphBreak("data-dependent branch", "timm/layers/attention.py:7", 2),
                ],
                **breaks,
            ),
            cell(
                "convnext_atto",
                "convnext",
                "inductor",
                "fail_accuracy",
                **dict(timed(1.8, 9.0), accuracy_pass=False, rmse=0.5, eager_rmse=0.01),
            ),
        ],
    )
    user.finish_run(rerun.run_id, "finished", 4)
    return root / "runs", root / "zoo.duckdb"


ZOO_LABEL = "zoo"
XLA_REASON = "torch_xla not installed"


def build_zoo(root: Path) -> tuple[Path, Path]:
    """``build`` and one more run ("zoo") in the user's database: torch_xla cells that
    are unsupported here, a model slower compiled than eager (with more memory), and an
    fp32 inductor column to set against bf16 (resnet18 and vit pass in both, convnext
    fails in fp32)."""
    runs_dir, db_path = build(root)
    user = Store.open(db_path)
    zoo = RunRecord(label=ZOO_LABEL, command="zoo-run --models 'timm/*'", status="finished")
    user.start_run(zoo)
    slow = dict(timed(0.26, 30.0), memory_ratio=2.85, graph_break_count=5, graph_count=6)
    user.write_results(
        zoo.run_id,
        [
            cell("resnet18", "resnet", "torch_xla", "unsupported", error_message=XLA_REASON),
            cell("vit_tiny_patch16_224", "vision_transformer", "torch_xla", "unsupported",
                 error_message=XLA_REASON),
            cell("convnext_atto", "convnext", "aot_eager", "pass", **slow),
            cell("resnet18", "resnet", "inductor", "pass", "fp32", **timed(1.2, 11.0)),
            cell("vit_tiny_patch16_224", "vision_transformer", "inductor", "pass", "fp32",
                 **dict(timed(2.0, 8.0), memory_ratio=0.5)),
            cell("convnext_atto", "convnext", "inductor", "compile_error", "fp32",
                 error_type="RuntimeError", error_message="fp32 only"),
        ],
    )  # fmt: skip
    user.finish_run(zoo.run_id, "finished", 6)
    return runs_dir, db_path


def hostile(host: str, where: str) -> str:
    """Markdown, HTML and directives, each of which would fetch, link or restyle."""
    return (
        f"![x](http://{host}/{where}.png) [**Session expired**](http://{host}/{where}) "
        f"<img src=http://{host}/{where}-tag.png> :red[{where} red] :material/home: $x^2$ "
        f"www.{where}.example <b>bold</b>"
    )


def hostile_search(host: str) -> str:
    """A hostile ``q`` that fits the search box (100 characters)."""
    return f"![x](http://{host}/q.png) [**Session expired**](http://{host}/q)"


def build_hostile(root: Path, host: str) -> tuple[Path, Path]:
    """One shipped run and one in the database, whose every text field is hostile."""
    evil = f"evil[**{host}**](http://{host}/model)"
    store = Store.open(root / "shipped.duckdb")
    store.record_environment(ENV)
    shipped = RunRecord(label=hostile(host, "label"), command="zoo-run", status="finished")
    store.start_run(shipped)
    store.write_results(
        shipped.run_id,
        [
            cell(evil, hostile(host, "family"), "inductor", "compile_error",
                 error_type="RuntimeError", error_phase="inductor codegen",
                 error_signature=hostile(host, "signature"),
                 error_message=hostile(host, "message"), traceback_tail=hostile(host, "tb"),
                 notes=hostile(host, "notes"), probe_shapes=hostile(host, "shapes")),
            cell(evil, hostile(host, "family"), "aot_eager", "pass", **timed(1.2, 2.0),
                 notes=hostile(host, "notes"),
                 graph_breaks=[GraphBreak(hostile(host, "reason"), hostile(host, "frame"), 1,
                                          hostile(host, "type"), hostile(host, "id"),
                                          json.dumps([hostile(host, "hint")]))]),
        ],
    )  # fmt: skip
    export_runs(root / "shipped.duckdb", root / "runs")
    (root / "shipped.duckdb").unlink()
    record_run(root / "zoo.duckdb", "plain", [cell("resnet18", "resnet", "inductor", "pass")])
    return root / "runs", root / "zoo.duckdb"


def record_run(db_path: Path, label: str, cells: list[CellResult]) -> Store:
    """A finished run of ``cells``, labelled ``label``, in the database at ``db_path``."""
    store = Store.open(db_path)
    store.record_environment(ENV)
    run = RunRecord(label=label, command="zoo-run", status="finished")
    store.start_run(run)
    store.write_results(run.run_id, cells)
    return store


CAVEATS_LABEL = "caveats"
OTHER_ENV = dict(ENV, env_id="env-other-machine", torchax="0.0.13")


def build_caveats(root: Path) -> tuple[Path, Path]:
    """``build`` and a run ("caveats") of cells whose numbers carry a caveat: an export
    cell recorded under autocast (it ran in fp32), an XLA fp32 cell timed by the first
    sweep's protocol, an XLA cell whose eager baseline read slow, and resnet18's inductor
    cell again in another environment (newer, so it is the one shown)."""
    runs_dir, db_path = build(root)
    store = Store.open(db_path)
    store.record_environment(OTHER_ENV)
    run = RunRecord(label=CAVEATS_LABEL, command="zoo-run", status="finished")
    store.start_run(run)
    exported = cell(
        "resnet18",
        "resnet",
        "export",
        "pass",
        **timed(0.7, 2.0),
        precision_treatment="autocast bf16",
    )
    exported.mode, exported.cell_key = "non-strict", exported.cell_key + "-export"
    first_sweep = cell(
        "vit_tiny_patch16_224",
        "vision_transformer",
        "xla",
        "pass",
        "fp32",
        **timed(1.4, 20.0),
        precision_treatment="fp32, tf32 off",
        notes="eager timed in a process without JAX, then XLA here: not interleaved",
    )
    slow = dict(timed(2.5, 9.0), eager_samples_ms=[6.0, 9.9, 10.0, 10.1])
    baseline = cell(
        "convnext_atto",
        "convnext",
        "xla",
        "pass",
        **slow,
        precision_treatment="cast bf16 (model and inputs, eager too)",
    )
    elsewhere = cell("resnet18", "resnet", "inductor", "pass", **timed(1.2, 10.0))
    elsewhere.env_id, elsewhere.cell_key = OTHER_ENV["env_id"], elsewhere.cell_key + "-other"
    store.write_results(run.run_id, [exported, first_sweep, baseline, elsewhere])  # fmt: skip
    store.finish_run(run.run_id, "finished", 4)
    return runs_dir, db_path
