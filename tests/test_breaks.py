"""Why it broke: graph-break types and registry ids, recompile reasons, and the triage
ladder placing failures at their stage (torch 2.11 on CPU)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import torch

from dashboard.data import load
from runner import triage
from runner.cli.run import main as zoo_run
from runner.matrix import break_types
from runner.matrix.cells import Cell, CellConfig
from runner.matrix.results import GraphBreak
from runner.store.merge import merge
from tests.dashboard_data import record_run
from tests.results import make_result, rows
from tests.test_measure import Mlp, features, make_cell, measure

BREAKING = Path(__file__).parent / "fixtures" / "breaking.py"
ITEM = "Unsupported Tensor.item() call with capture_scalar_outputs=False"
PRINT = "Failed to trace builtin operator"


def passing_cell(tmp_path: Path, fixture: str, *args: str) -> tuple[Path, dict]:
    """One eager cell on CPU of a class of breaking.py, recorded: its database and row,
    which passed."""
    db = tmp_path / "zoo.duckdb"
    module = ["--module", f"{BREAKING}:{fixture}", "--backends", "eager", "--device", "cpu"]
    assert zoo_run([*module, *args, "--db", str(db)]) == 0
    (row,) = rows(db)
    assert row["status"] == "pass", row["error_message"]
    return db, row


def test_the_article_model_breaks_with_two_registered_types(tmp_path):
    """Under torch 2.11 dynamo traces the assert on a tensor and the loop over np.arange;
    the .item() into a dict and the print break the graph (explain agrees)."""
    db, row = passing_cell(tmp_path, "ArticleModel")
    assert (row["graph_break_count"], row["graph_break_events"]) == (2, 2)
    assert json.loads(row["break_types"]) == [PRINT, ITEM]
    breaks = rows(db, "SELECT * FROM graph_breaks ORDER BY idx")
    assert [b["break_type"] for b in breaks] == [ITEM, PRINT]
    known = break_types.registry()
    assert [b["registry_id"] for b in breaks] == [known[ITEM][0], known[PRINT][0]]
    assert all(b["registry_id"].startswith("GB") for b in breaks)
    assert json.loads(breaks[0]["hints"]) == known[ITEM][1]
    assert sum(b["count"] for b in breaks) == row["graph_break_events"]


def test_a_frame_dynamo_gives_up_on_gets_its_reason(tmp_path):
    """HF's LayerDrop (BART and Whisper train cells): a data-dependent branch inside a
    loop makes dynamo run forward eagerly and compile its layers as frames of their own.
    explain counts the split but lists no reason; the break row names the branch."""
    db, row = passing_cell(tmp_path, "LayerDrop")
    assert (row["graph_count"], row["graph_break_count"]) == (2, 1)
    (brk,) = rows(db, "SELECT * FROM graph_breaks")
    assert brk["break_type"] == "Data-dependent branching"
    assert brk["registry_id"] == break_types.registry()["Data-dependent branching"][0]
    source = BREAKING.read_text().splitlines()
    line = int(brk["user_frame"].rsplit(":", 1)[1])
    assert brk["user_frame"].endswith(f"breaking.py:{line}")
    assert "torch.rand([]) < self.layerdrop" in source[line - 1]
    assert row["graph_break_events"] == brk["count"] == 1
    assert json.loads(row["break_types"]) == ["Data-dependent branching"]
    assert "gave up on 1 frame(s)" in row["notes"]


def test_a_message_the_registry_does_not_know_is_unregistered():
    assert break_types.classify("Something new\n  Explanation: ...") == (
        "Something new",
        break_types.UNREGISTERED,
        None,
    )
    linked = (
        "A new kind\n For more details: https://example/compile-graph-break-site/gb/gb9999.html"
    )
    assert break_types.classify(linked)[1] == "GB9999"


def test_one_line_and_untyped_breaks_get_their_registered_types(tmp_path):
    one_line = "Data dependent operator: Operator `aten._local_scalar_dense.default` has a ..."
    registered = break_types.registry()["Data dependent operator"][0]
    assert break_types.classify(one_line)[:2] == ("Data dependent operator", registered)
    # The longest registered type wins where one type starts another.
    exact = "Reconstruction failure: source.reconstruct not implemented"
    assert break_types.classify(exact)[0] == exact
    # Rows recorded before that are re-classified when runs merge (and when the
    # dashboard loads them), their cells too.
    old = GraphBreak("data-dependent op", "model.py:3", 2, one_line, break_types.UNREGISTERED)
    branching = break_types.registry()["Data-dependent branching"][0]
    new = GraphBreak("if on a tensor", "model.py:9", 1, "Data-dependent branching", branching)
    # Before schema 4 a break had no type: its reason is the message's first line.
    item = "Unsupported Tensor.item() call with capture_scalar_outputs=False"
    untyped = GraphBreak(item, "model.py:5", 3)
    result = make_result(
        graph_breaks=[old, untyped, new],
        break_types=json.dumps(sorted([one_line, "Data-dependent branching"])),
    )
    # A second cell, changed in the same pass, gets its own types, not the first's.
    other = make_result("key-2", graph_breaks=[GraphBreak(item, "other.py:1", 1)])
    record_run(tmp_path / "old.duckdb", "old", [result, other])
    for _ in range(2):  # idempotent: a second merge finds nothing to change
        merge([tmp_path / "old.duckdb"], tmp_path / "merged.duckdb")
    with duckdb.connect(str(tmp_path / "merged.duckdb"), read_only=True) as con:
        breaks = con.execute(
            "SELECT break_type, registry_id FROM graph_breaks WHERE cell_key = 'key-1' "
            "ORDER BY user_frame"
        ).fetchall()
        types = dict(con.execute("SELECT cell_key, break_types FROM results").fetchall())
    assert breaks == [
        ("Data dependent operator", registered),
        (item, break_types.registry()[item][0]),
        ("Data-dependent branching", branching),
    ]
    assert json.loads(types["key-1"]) == [
        "Data dependent operator",
        "Data-dependent branching",
        item,
    ]
    assert json.loads(types["key-2"]) == [item]
    shown, _ = load(tmp_path / "no-runs", tmp_path / "old.duckdb")
    assert shown.execute(
        "SELECT break_type FROM graph_breaks WHERE cell_key = 'key-1' ORDER BY user_frame"
    ).fetchall() == [(kind,) for kind, _ in breaks]


def test_a_data_dependent_jumps_split_reason_is_filed_under_its_break_type(tmp_path):
    """explain may list a data-dependent jump's split as ``generic_jump <type>``, dynamo's
    own reason, not the break it raised: it is filed under "Data-dependent branching",
    when recorded and when shipped rows of before are merged."""
    branching = "Data-dependent branching"
    registered = break_types.registry()[branching][0]
    assert break_types.classify("generic_jump TensorVariable()")[:2] == (branching, registered)
    # The installed torch still names the split so, after raising that type for it.
    convert = Path(torch._dynamo.__file__).with_name("symbolic_convert.py").read_text()
    body = convert.split("def generic_jump(", 1)[1].split("\ndef ", 1)[0]
    assert f'gb_type="{branching}"' in body and 'f"generic_jump {' in body
    old = GraphBreak("generic_jump TensorVariable()", "encodec.py:150", 6,
                     "generic_jump TensorVariable()", break_types.UNREGISTERED)  # fmt: skip
    result = make_result(graph_breaks=[old], break_types='["generic_jump TensorVariable()"]')
    record_run(tmp_path / "old.duckdb", "old", [result])
    merge([tmp_path / "old.duckdb"], tmp_path / "merged.duckdb")
    with duckdb.connect(str(tmp_path / "merged.duckdb"), read_only=True) as con:
        assert con.execute("SELECT break_type, registry_id FROM graph_breaks").fetchall() == [
            (branching, registered)
        ]
        assert json.loads(con.execute("SELECT break_types FROM results").fetchone()[0]) == [
            branching
        ]


def test_recompile_reasons_name_the_guard_that_failed():
    result = measure(Mlp(), backend="eager", dynamic="auto", batch_size=8)
    assert result.status == "pass" and result.probe_recompiles == 1
    (reason,) = json.loads(result.recompile_reasons)
    assert "size mismatch at index 0" in reason and "expected 8, actual 4" in reason


def test_a_recompile_caused_by_the_first_call_counts_as_compiling(tmp_path):
    """The first call sets an attribute dynamo guards on (a train cell: each side steps
    its own copy of the model): the second call compiles again, before the warm-up, and
    that compile is in compile_s, its guard recorded."""
    _, row = passing_cell(tmp_path, "SetsAttributeOnFirstCall", "--step", "train")
    assert row["recompile_count"] == 1
    (reason,) = json.loads(row["recompile_reasons"])
    assert "problem_type" in reason
    assert "the second call compiled again" in row["notes"]
    assert row["compile_s"] > 0


def test_a_failing_backend_is_placed_above_the_rungs_that_pass(monkeypatch):
    """dynamo's own testing backend that swaps relu for something wrong: the three
    ladder rungs pass, the cell's backend is the one that fails."""
    from runner import cell as cell_module

    original = cell_module.measure_cell

    def with_module(cell, **options):
        return original(cell, model=Mlp(), inputs_fn=features, **options)

    monkeypatch.setattr(triage, "measure_cell", with_module)
    cell = make_cell(backend="relu_accuracy_error_TESTING_ONLY")
    verdict = triage.ladder(cell)
    assert verdict.triage_rung == "fails in relu_accuracy_error_TESTING_ONLY"
    assert verdict.triage_detail == "fail_accuracy"
    assert [c.backend for c in triage.rungs(cell)] == [
        "eager",
        "aot_eager",
        "aot_eager_decomp_partition",
        "relu_accuracy_error_TESTING_ONLY",
    ]


def test_the_ladder_starts_below_the_failing_backend():
    aot = make_cell(backend="aot_eager")
    assert [c.backend for c in triage.rungs(aot)] == ["eager", "aot_eager"]
    inductor = make_cell(backend="inductor", mode="max-autotune")
    configs = triage.rungs(inductor)
    assert [(c.backend, c.mode) for c in configs] == [
        ("eager", "none"),
        ("aot_eager", "none"),
        ("aot_eager_decomp_partition", "none"),
        ("inductor", "max-autotune"),
    ]


def test_only_compiler_failures_of_torch_compile_cells_are_triaged():
    cell = make_cell(backend="inductor", mode="default")
    for status, wanted in (
        ("compile_error", True),
        ("fail_accuracy", True),
        ("crash", True),
        ("pass", False),
        ("eager_error", False),
        ("oom", False),
        ("unsupported", False),
    ):
        assert triage.wants_triage(cell, make_result(status=status)) is wanted, status
    xla = Cell(cell.spec, CellConfig("xla", "none", "false", "fp32"), "full", 4, None, "cpu", "e")
    assert not triage.wants_triage(xla, make_result(status="compile_error"))
    export = Cell(
        cell.spec, CellConfig("export", "strict", "false", "fp32"), "full", 4, None, "cpu", "e"
    )
    assert not triage.wants_triage(export, make_result(status="compile_error"))


def test_a_dynamo_failure_is_triaged_to_dynamo_in_a_sweep(tmp_path):
    db = tmp_path / "zoo.duckdb"
    args = ["--module", f"{BREAKING}:OpWithoutFakeKernel", "--backends", "aot_eager"]
    assert zoo_run([*args, "--device", "cpu", "--triage", "ladder", "--db", str(db)]) == 0
    (row,) = rows(db)
    assert row["status"] == "compile_error"  # the cell's own status stays
    assert row["triage_rung"] == "fails in dynamo"
    assert "fake" in row["triage_detail"].lower()


def test_asking_for_triage_triages_the_failures_recorded_without_it(tmp_path, capsys):
    """A sweep's earlier failing cells get their verdict from the same command with
    --triage, by the ladder alone: the new row is the recorded measurement with the
    verdict. A cell with a verdict, and one that passed, are not run again."""
    db = tmp_path / "zoo.duckdb"
    failing = ["--module", f"{BREAKING}:OpWithoutFakeKernel", "--backends", "aot_eager"]
    base = ["--device", "cpu", "--db", str(db)]
    assert zoo_run([*failing, *base]) == 0
    (first,) = rows(db)
    assert first["triage_rung"] is None
    capsys.readouterr()
    assert zoo_run([*failing, *base, "--triage", "ladder"]) == 0
    err = capsys.readouterr().err
    assert "triaging 1 recorded failing cell(s) without a triage verdict first" in err
    latest = rows(db, "SELECT * FROM results ORDER BY recorded_at DESC")
    assert [row["triage_rung"] for row in latest] == ["fails in dynamo", None]
    triaged = latest[0]
    assert triaged["run_id"] != first["run_id"]
    # Not measured again: the row's measurement and times are the recorded ones.
    for column in ("status", "error_signature", "wall_s", "started_at", "finished_at"):
        assert triaged[column] == first[column], column
    assert triaged["notes"].endswith(
        f"measured in run {first['run_id']}; this row adds the triage verdict of a later run"
    )
    assert zoo_run([*failing, *base, "--triage", "ladder"]) == 0
    assert len(rows(db)) == 2  # triaged: skipped as recorded


def test_a_recorded_failure_the_ladder_cannot_place_is_not_said_to_be_triaged(tmp_path, capsys):
    """An export cell's failure gets no triage verdict (the ladder is torch.compile's):
    asking for triage leaves its row be, and says nothing of rerunning it (each core
    chunk on the H200 said "rerunning 2 recorded failing cell(s) ... to triage them" of
    two XLA rows it then skipped)."""
    db = tmp_path / "zoo.duckdb"
    failing = ["--module", f"{BREAKING}:OpWithoutFakeKernel", "--backends", "export"]
    base = ["--device", "cpu", "--db", str(db)]
    assert zoo_run([*failing, *base]) == 0
    (first,) = rows(db)
    assert first["status"] == "compile_error" and first["triage_rung"] is None
    capsys.readouterr()
    assert zoo_run([*failing, *base, "--triage", "ladder"]) == 0
    out, err = capsys.readouterr()
    assert "triage" not in err and "nothing to run" in out
    assert len(rows(db)) == 1


def test_a_recorded_cells_triage_job_longer_than_the_run_is_not_planned(tmp_path, capsys):
    """A triage job of a recorded cell likely to take longer than the whole run is given
    is not planned, and writes nothing: the recorded row stands for a run given more
    time, no copy of it marked interrupted, and the run is not one that left cells
    unrecorded (a chunked sweep's next step would wait on it for ever)."""
    db = tmp_path / "zoo.duckdb"
    failing = ["--module", f"{BREAKING}:OpWithoutFakeKernel", "--backends", "aot_eager"]
    base = ["--device", "cpu", "--db", str(db)]
    assert zoo_run([*failing, *base]) == 0
    (first,) = rows(db)
    # Four rungs of the recorded cell's wall time: past a limit of one second.
    assert first["wall_s"] > 0.25
    capsys.readouterr()
    assert zoo_run([*failing, *base, "--triage", "ladder", "--time-limit", "1"]) == 0
    assert len(rows(db)) == 1
    out, err = capsys.readouterr()
    assert "not triaging 1 recorded failing cell(s) whose ladder would likely take" in err
    assert "past --time-limit 1 s" in err and "without a triage verdict first" not in err
    assert "cells not recorded" not in out
    # Given the time, the same command triages it.
    assert zoo_run([*failing, *base, "--triage", "ladder", "--time-limit", "600"]) == 0
    assert [
        row["triage_rung"] for row in rows(db, "SELECT * FROM results ORDER BY recorded_at")
    ] == [
        None,
        "fails in dynamo",
    ]


def test_a_triage_job_past_the_time_limit_is_left_for_the_next_run(tmp_path):
    db = tmp_path / "zoo.duckdb"
    args = ["--module", f"{BREAKING}:OpWithoutFakeKernel", "--backends", "aot_eager"]
    args += ["--device", "cpu", "--triage", "ladder", "--db", str(db)]
    # The cell starts at once and takes longer than the limit; its triage job would not.
    assert zoo_run([*args, "--time-limit", "2"]) == 0
    (row,) = rows(db)
    assert (row["status"], row["triage_rung"]) == ("compile_error", "triage interrupted")


@pytest.mark.inductor
def test_an_inductor_only_failure_is_triaged_to_inductor_and_bisected(tmp_path):
    """Inductor's own testing switch makes its CPU relu wrong: the ladder's three rungs
    pass, Inductor fails, and its compiler bisector names the relu lowering."""
    db = tmp_path / "zoo.duckdb"
    args = ["--module", f"{BREAKING}:InductorReluBug", "--backends", "inductor"]
    assert zoo_run([*args, "--device", "cpu", "--triage", "bisect", "--db", str(db)]) == 0
    (row,) = rows(db)
    assert row["status"] == "fail_accuracy"
    assert (row["triage_rung"], row["triage_detail"]) == ("fails in inductor", "fail_accuracy")
    assert row["triage_bisect"].startswith("inductor/lowerings")
    assert ": relu" in row["triage_bisect"]


@pytest.mark.inductor
@pytest.mark.slow
def test_the_minifier_leaves_a_repro_that_fails_as_the_cell_did(tmp_path, monkeypatch):
    """Inductor's wrong CPU relu again, in a graph of a relu and an add: the minifier
    shrinks the cell's graph to the relu and keeps a script that, run on its own, fails
    the accuracy check. With warm compile caches asked for: the cell's own compile fills
    the cache, and the minifier's armed compile must not be served from it."""
    db = tmp_path / "zoo.duckdb"
    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setenv("ZOO_WARM_CACHE", "1")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "warm"))
    args = ["--module", f"{BREAKING}:InductorReluBugAlone", "--backends", "inductor"]
    assert zoo_run([*args, "--device", "cpu", "--triage", "minify", "--db", str(db)]) == 0
    assert list(here.iterdir()) == []  # nothing written where the user stands
    (row,) = rows(db)
    assert row["status"] == "fail_accuracy" and row["triage_rung"] == "fails in inductor"
    assert row["triage_minify"].startswith("minified to "), row["triage_minify"]
    assert row["triage_minify"].endswith("the repro fails as the cell did")
    repro = tmp_path / "repro.py"
    repro.write_text(row["triage_repro"])
    assert "aten.relu" in row["triage_repro"] and "save_dir=None" in row["triage_repro"]
    ran = subprocess.run(
        [sys.executable, str(repro)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert ran.returncode != 0 and "AccuracyError" in ran.stderr


def test_a_dynamo_failure_is_not_minified():
    cell = make_cell(backend="eager")
    assert triage.minify(cell, triage.no_gate, accuracy=False) == (
        "not minified: the failure is dynamo's own, before any graph exists",
        None,
    )


def test_a_triage_job_may_run_its_rungs_and_its_tool(tmp_path):
    cell = make_cell(backend="inductor")
    assert triage.job_timeout(cell, "ladder") == cell.timeout_s * 4
    assert triage.job_timeout(cell, "bisect") == cell.timeout_s * 4 + triage.BISECT_BUDGET_S
    assert triage.job_timeout(cell, "minify") > cell.timeout_s * 4 + triage.MINIFY_BUDGET_S


def test_a_triage_job_that_died_minifying_keeps_its_rung():
    original, job = make_result(status="fail_accuracy"), make_result(status="crash")
    job.error_phase, job.error_type = "triage minify inductor", "SIGSEGV"
    triage.merge(original, job)
    assert original.status == "fail_accuracy" and original.triage_rung == "fails in inductor"
    assert original.triage_minify == "the minifier's process ended (crash: SIGSEGV)"


def test_trace_keeps_the_failing_rungs_structured_trace(tmp_path, capsys):
    db, traces = tmp_path / "zoo.duckdb", tmp_path / "traces"
    args = ["--module", f"{BREAKING}:OpWithoutFakeKernel", "--backends", "aot_eager"]
    args += ["--device", "cpu", "--db", str(db)]
    assert zoo_run([*args, "--triage", "ladder", "--trace", str(traces)]) == 0
    (row,) = rows(db)
    assert row["triage_rung"] == "fails in dynamo"
    (log,) = (traces / row["cell_key"]).glob("*.log")
    assert row["triage_trace"].startswith(f"trace {log}")
    # TORCH_TRACE's format: one JSON record per event, dynamo's start among them.
    assert '"dynamo_start"' in log.read_text()
    if shutil.which("tlparse") is None:
        assert "tlparse is not installed" in row["triage_trace"]
    else:
        assert row["triage_trace"].endswith("index.html")


def test_trace_needs_triage_and_a_folder_it_can_write(tmp_path, capsys):
    args = ["--module", f"{BREAKING}:OpWithoutFakeKernel", "--device", "cpu"]
    args += ["--db", str(tmp_path / "zoo.duckdb")]
    assert zoo_run([*args, "--trace", str(tmp_path / "t")]) == 2
    assert "--trace needs --triage" in capsys.readouterr().err
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert zoo_run([*args, "--triage", "ladder", "--trace", str(blocker / "t")]) == 2
    assert "cannot write there" in capsys.readouterr().err
    assert not (tmp_path / "zoo.duckdb").exists()
