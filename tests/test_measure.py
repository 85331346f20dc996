"""measure_cell on CPU with small test-only modules (eager and aot_eager backends).

The graph-break numbers asserted here were read off torch 2.11; each is also checked
against ``torch._dynamo.explain`` run on the same module, which the design requires.
"""

from __future__ import annotations

import inspect
import json
import os
import statistics
import subprocess
import sys
import time

import pytest
import torch
from torch import nn

from runner.backends.torch_compile import summarize_reason
from runner.cell import measure_cell
from runner.matrix.cells import Cell, CellConfig
from runner.measure.accuracy import compare_outputs
from runner.measure.isolation import cold_compile_caches, tf32_disabled
from runner.measure.timing import HELD_WARMUPS, WARMUPS, HostCanary
from runner.plan import PlanOptions, plan_cells
from tests.results import make_result
from zoo.catalog import select
from zoo.spec import ModelSpec

# -- modules -------------------------------------------------------------------------


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class PrintInMiddle(nn.Module):
    def forward(self, x):
        x = x + 1
        print("hello from forward")  # break
        return x * 2


class ExplicitBreak(nn.Module):
    def forward(self, x):
        x = x + 1
        torch._dynamo.graph_break()  # break
        return x * 2


class DataDependentIf(nn.Module):
    def forward(self, x):
        x = x + 1
        if x.sum() > 0:  # break
            return x * 2
        return x - 1


class Item(nn.Module):
    def forward(self, x):
        x = x + 1
        scale = x.sum().item()  # break
        return x * scale


class ToList(nn.Module):
    def forward(self, x):
        x = x + 1
        values = x[0].tolist()  # break
        return x * len(values)


class UnsupportedBuiltin(nn.Module):
    def forward(self, x):
        x = x + 1
        id(x)  # break
        return x * 2


class TwoBreaks(nn.Module):
    def forward(self, x):
        x = x + 1
        print("first")  # break
        x = x * 2
        torch._dynamo.graph_break()
        return x - 1


class BreakingBlock(nn.Module):
    def forward(self, x):
        x = torch.relu(x)
        torch._dynamo.graph_break()  # break
        return x + 1


class BreakInSubmodule(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = BreakingBlock()

    def forward(self, x):
        return self.block(x * 3) * 2


class PrintFirst(nn.Module):
    def forward(self, x):
        print("nothing traced yet")
        return x * 2


class BreakInLoop(nn.Module):
    def forward(self, x):
        for i in range(2):
            x = x + 1
            print(i)
        return x


class FailsWhenCompiled(nn.Module):
    """Takes a path only under torch.compile, where a view is wrong for the input."""

    def forward(self, x):
        if torch.compiler.is_compiling():
            x = x.view(3, -1, 7)
        return x + 1


class AddFirst(nn.Module):
    def forward(self, x, y):
        return x + y


class RejectsBatchTwo(nn.Module):
    def forward(self, x):
        if x.shape[0] == 2:
            raise ValueError("batch 2 is not supported")
        return x + 1


class FailsInEager(nn.Module):
    def forward(self, x):
        return x @ torch.ones(3, 3)


# -- helpers -------------------------------------------------------------------------


def make_cell(
    backend="eager",
    dynamic="false",
    precision="fp32",
    batch_size=4,
    seq_len=None,
    mode="none",
    step="infer",
):
    spec = ModelSpec(id="custom/test:Name", suite="custom", name="Name", family="test", task="test")
    config = CellConfig(backend=backend, mode=mode, dynamic=dynamic, precision=precision, step=step)
    return Cell(
        spec=spec,
        config=config,
        size="full",
        batch_size=batch_size,
        seq_len=seq_len,
        device="cpu",
        env_id="test",
    )


def features(batch_size, device, seq_len):
    generator = torch.Generator().manual_seed(batch_size)
    return (torch.randn(batch_size, 8, generator=generator).to(device),)


def measure(module, **cell_options):
    return measure_cell(make_cell(**cell_options), model=module, inputs_fn=features)


def explain(module):
    with torch.no_grad():
        return torch._dynamo.explain(module)(*features(4, "cpu", None))


def break_line(cls) -> str:
    lines, first = inspect.getsourcelines(cls.forward)
    offset = next(i for i, line in enumerate(lines) if "# break" in line)
    return f"test_measure.py:{first + offset} in forward"


# -- graph breaks --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "graphs", "breaks", "events"),
    [
        (Mlp, 1, 0, 0),
        (PrintInMiddle, 2, 1, 1),
        (ExplicitBreak, 2, 1, 1),
        (DataDependentIf, 2, 1, 1),
        (Item, 2, 1, 1),
        (ToList, 2, 1, 1),
        (UnsupportedBuiltin, 2, 1, 1),
        (TwoBreaks, 3, 2, 2),
        # a break inside a called module splits the caller and the callee: 4 graphs, 3
        # splits, and explain reports the one break twice (from each side)
        (BreakInSubmodule, 4, 3, 2),
        # nothing before the print: the break splits no graph, and explain reports none
        (PrintFirst, 1, 0, 0),
    ],
)
def test_graph_break_counts_equal_explain(cls, graphs, breaks, events):
    """What each number means (README, "What is recorded"): graph_break_count is the
    graph splits explain reports, graph_break_events the break events it reports (the
    sum of the reason table's counts), unique_break_count the distinct reasons."""
    result = measure(cls())
    assert result.status == "pass", result.error_message
    explained = explain(cls())
    assert result.graph_count == graphs
    assert result.graph_break_count == breaks == explained.graph_break_count
    assert result.graph_break_events == events == len(explained.break_reasons)
    assert sum(b.count for b in result.graph_breaks) == events
    assert result.unique_break_count == len({b.reason for b in result.graph_breaks})
    assert "graph-break event" not in (result.notes or "")


@pytest.mark.parametrize(
    ("cls", "reason"),
    [
        (PrintInMiddle, "Failed to trace builtin operator: Dynamo does not know how to trace"),
        (ExplicitBreak, "Call to `torch._dynamo.graph_break()`: User-inserted graph break."),
        (DataDependentIf, "generic_jump TensorVariable()"),
        (Item, "Unsupported Tensor.item() call with capture_scalar_outputs=False"),
        (ToList, "Tensor.tolist() with non-integer tensor"),
        (UnsupportedBuiltin, "Unsupported call_id() without source"),
    ],
)
def test_each_break_has_a_one_line_reason_and_its_user_frame(cls, reason):
    result = measure(cls())
    [graph_break] = result.graph_breaks
    assert graph_break.reason.startswith(reason)
    assert "\n" not in graph_break.reason
    assert "Hint" not in graph_break.reason
    assert graph_break.user_frame.endswith(break_line(cls))
    assert graph_break.count == 1
    assert result.unique_break_count == 1


def test_distinct_breaks_are_listed_and_breaks_in_a_callee_point_at_it():
    result = measure(TwoBreaks())
    assert result.unique_break_count == 2
    assert [b.count for b in result.graph_breaks] == [1, 1]

    result = measure(BreakInSubmodule())
    # explain reports the break once from the caller's graph and once from the callee's
    [graph_break] = result.graph_breaks
    assert graph_break.count == 2
    assert graph_break.user_frame.endswith(break_line(BreakingBlock))


def test_a_frame_dynamo_skips_captures_no_graph():
    result = measure(BreakInLoop())
    assert result.status == "pass"
    assert result.graph_count == 0
    assert result.graph_break_count is None
    assert "dynamo captured no graph" in result.notes


def test_summarize_reason_keeps_type_and_explanation():
    reason = (
        "Failed to trace builtin operator\n  Explanation: Dynamo does not know print\n"
        "  Hint: Avoid print.\n\n  Developer debug context: builtin print\n"
    )
    assert summarize_reason(reason) == (
        "Failed to trace builtin operator: Dynamo does not know print"
    )


# -- passing cells -------------------------------------------------------------------


class SlowOutsideCompile(Mlp):
    """Slower in eager than anything compiled: dynamo traces past the sleep."""

    def forward(self, x):
        if not torch.compiler.is_compiling():
            time.sleep(1.0)
        return super().forward(x)


def test_compile_time_is_never_below_zero():
    """compile_s is the first compiled call less one eager call: where the eager call
    is the longer (little to compile, a busy host), it is 0, not negative."""
    result = measure(SlowOutsideCompile())
    assert result.status == "pass", result.error_message
    assert result.compile_s == 0.0
    assert result.eager_ms > 900 and result.compiled_ms < 100


@pytest.mark.parametrize(("backend", "precision"), [("eager", "fp32"), ("aot_eager", "bf16")])
def test_clean_module_passes_with_timings_and_accuracy(backend, precision):
    phases = []
    result = measure_cell(
        make_cell(backend=backend, precision=precision),
        model=Mlp(),
        inputs_fn=features,
        report_phase=phases.append,
    )
    assert result.status == "pass", result.error_message
    # compile again after the accuracy check: the second call, which compiles only
    # where the first one changed what dynamo guards on
    assert phases == [
        "build", "reference", "eager", "compile", "accuracy", "compile", "warm-up", "timing",
        "profile",
    ]  # fmt: skip
    assert (result.graph_count, result.graph_break_count, result.unique_break_count) == (1, 0, 0)
    assert result.graph_breaks == []
    assert result.recompile_count == 0
    assert result.compile_s > 0
    assert result.eager_ms_p25 <= result.eager_ms <= result.eager_ms_p75
    assert result.compiled_ms_p25 <= result.compiled_ms <= result.compiled_ms_p75
    assert len(result.eager_samples_ms) == len(result.compiled_samples_ms) >= 5
    assert result.speedup == pytest.approx(result.eager_ms / result.compiled_ms)
    # The launch canary: microseconds per tiny CPU operator call, not seconds or zero.
    assert 0.01 < result.host_launch_us < 10_000
    assert result.eager_peak_alloc_mb is None  # CPU
    assert result.accuracy_pass is True
    assert result.accuracy_ref_dtype == "fp64"
    assert result.max_abs_error is not None and result.rmse is not None
    assert result.eager_rmse is not None
    assert result.param_count == 8 * 16 + 16 + 16 * 4 + 4
    assert json.loads(result.input_shapes) == [[4, 8]]
    assert result.precision_treatment == (
        "fp32" if precision == "fp32" else "autocast bf16 per call"
    )
    assert result.started_at < result.finished_at and result.wall_s > 0
    if precision == "bf16":
        assert result.eager_rmse > 1e-4  # autocast really ran


class CastSpy(Mlp):
    """Records, at each eager call under autocast, whether fc1's weight was cast afresh
    for it, then changes that weight: a cast autocast kept from an earlier call of the
    same region is stale and gives another output than a fresh one."""

    def __init__(self):
        super().__init__()
        self.fresh = []

    def forward(self, x):
        y = self.fc1(x)
        if not torch.compiler.is_compiling() and torch.is_autocast_enabled(x.device.type):
            with torch.autocast(x.device.type, enabled=False):
                weight = self.fc1.weight.detach().to(y.dtype)
                fresh = nn.functional.linear(x.to(y.dtype), weight, self.fc1.bias.to(y.dtype))
            self.fresh.append(torch.equal(y, fresh))
            with torch.no_grad():
                self.fc1.weight.add_(1.0)
        return self.fc2(torch.relu(y))


def test_each_call_under_autocast_casts_its_weights_afresh():
    """torch.autocast keeps each weight's cast until its outermost region exits. A
    user's loop enters autocast per call, so every eager call pays its casts, and so
    must the cell's: one region around the timing loop ran eager without them, and let
    one side's casts serve the other side's profile and peak memory."""
    spy = CastSpy()
    result = measure(spy, backend="eager", precision="bf16")
    assert result.error_message is None and result.eager_ms is not None
    assert len(spy.fresh) >= 10
    stale = spy.fresh.count(False)
    assert stale == 0, f"{stale} of {len(spy.fresh)} eager calls used a cast an earlier one made"


class MaskedAsCanine(Mlp):
    """Builds an attention-style mask in float32 from its scores' smallest value, as
    transformers' Canine does: at float64 that value is -inf in float32, and 0 x -inf
    makes every score NaN; at float32 or below the mask is 0 and the output fine."""

    def forward(self, x):
        scores = super().forward(x)
        keep = torch.ones_like(scores, dtype=torch.float32)
        bias = (1.0 - keep) * torch.finfo(scores.dtype).min
        return torch.softmax(scores + bias.to(scores.dtype), dim=-1)


def test_a_model_that_fails_at_float64_is_judged_against_fp32():
    result = measure(MaskedAsCanine(), backend="aot_eager", precision="bf16")
    assert result.status == "pass", result.error_message
    assert result.accuracy_ref_dtype == "fp32"
    assert "fp64 reference not finite (16 values NaN or inf, fp32's 0): fp32 used" in result.notes
    assert result.rmse is not None and result.rmse == result.rmse  # not NaN
    # A model fine at float64 keeps its float64 reference, with no extra note.
    clean = measure(Mlp(), backend="aot_eager", precision="bf16")
    assert clean.accuracy_ref_dtype == "fp64" and "reference" not in (clean.notes or "")


def test_compile_happens_outside_the_timing_gate_and_timing_inside():
    """Compiling overlaps; timing holds the GPU; untimed GPU work (the reference, the
    eager outputs, most of the warm-up; the memory pass, on CUDA only) holds it shared,
    so that it never runs beside a neighbour's timing. The timed hold warms up with
    HELD_WARMUPS pairs only."""
    held = []
    phases = []
    eager_calls = {"warm-up": 0, "timing": 0}

    class CountedMlp(Mlp):
        def forward(self, x):
            if not torch.compiler.is_compiling() and phases and phases[-1][0] in eager_calls:
                eager_calls[phases[-1][0]] += 1
            return super().forward(x)

    class Gate:
        def __init__(self, kind="timing"):
            self.kind = kind

        def __enter__(self):
            held.append(self.kind)

        def __exit__(self, *exc):
            held.pop()

    result = measure_cell(
        make_cell(dynamic="auto"),
        model=CountedMlp(),
        inputs_fn=features,
        report_phase=lambda phase: phases.append((phase, held[-1] if held else None)),
        gate=Gate,
    )
    assert dict(phases) == {
        "build": None,
        "reference": "untimed",
        "eager": "untimed",
        "compile": None,
        "accuracy": None,
        "warm-up": "untimed",
        "timing": "timing",
        # one profiled call per side, inside the timed hold
        "profile": "timing",
        "probe": None,
    }
    assert eager_calls["warm-up"] >= WARMUPS
    assert eager_calls["timing"] == HELD_WARMUPS + len(result.eager_samples_ms)


def test_compile_caches_are_fresh_per_cell_and_removed(monkeypatch):
    def cache_dirs():
        return os.environ.get("TORCHINDUCTOR_CACHE_DIR"), os.environ.get("TRITON_CACHE_DIR")

    def dirs_seen_by_a_cell():
        seen = set()
        result = measure_cell(
            make_cell(),
            model=Mlp(),
            inputs_fn=features,
            report_phase=lambda _: seen.add(cache_dirs()),
        )
        assert result.status == "pass"
        return seen

    monkeypatch.delenv("ZOO_WARM_CACHE", raising=False)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/somewhere/else")
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    [(inductor_dir, triton_dir)] = dirs_seen_by_a_cell()
    assert inductor_dir != "/somewhere/else"
    assert triton_dir == os.path.join(inductor_dir, "triton")
    assert not os.path.exists(inductor_dir)
    assert cache_dirs() == ("/somewhere/else", None)
    assert dirs_seen_by_a_cell() != {(inductor_dir, triton_dir)}

    monkeypatch.setenv("ZOO_WARM_CACHE", "1")
    assert dirs_seen_by_a_cell() == {("/somewhere/else", None)}
    # Work that must compile for real gets fresh caches all the same, and so do its cells.
    with cold_compile_caches(always=True):
        (fresh,) = {cache_dirs()}
        assert fresh[0] != "/somewhere/else" and "ZOO_WARM_CACHE" not in os.environ
        [(inside, _)] = dirs_seen_by_a_cell()
        assert inside not in (fresh[0], "/somewhere/else")
    assert not os.path.exists(fresh[0]) and os.environ["ZOO_WARM_CACHE"] == "1"
    assert cache_dirs() == ("/somewhere/else", None)


def test_tf32_is_off_inside_and_restored_after():
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        with tf32_disabled(on_cuda=True):
            assert not torch.backends.cuda.matmul.allow_tf32
            assert not torch.backends.cudnn.allow_tf32
        assert torch.backends.cuda.matmul.allow_tf32
        assert torch.backends.cudnn.allow_tf32 == saved[1]
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


# -- failing cells -------------------------------------------------------------------


def test_module_that_fails_only_when_compiled_is_a_compile_error():
    result = measure(FailsWhenCompiled())
    assert result.status == "compile_error"
    assert result.error_phase == "dynamo trace"
    assert result.error_type == "TorchRuntimeError"
    assert result.error_signature == (
        "TorchRuntimeError: RuntimeError when making fake tensor call: Dynamo failed to run FX "
        "node with fake tensors: got RuntimeError(\"shape '<shape>' is invalid for input of size "
        '<N>")'
    )
    assert "File " in result.traceback_tail
    assert result.accuracy_pass is None and result.eager_ms is None


def test_backend_failure_is_a_compile_error_with_a_normalized_signature():
    result = measure(Mlp(), backend="relu_compile_error_TESTING_ONLY")
    assert (result.status, result.error_phase) == ("compile_error", "compile")
    assert result.error_signature == (
        "BackendCompilerFailed: ReluCompileError in relu_compile_error_TESTING_ONLY (debugging.py)"
    )


def test_failure_of_compiled_code_is_a_runtime_compile_error():
    result = measure(Mlp(), backend="relu_runtime_error_TESTING_ONLY")
    assert (result.status, result.error_phase) == ("compile_error", "runtime")
    assert result.error_signature == "AssertionError: ReluRuntimeError"


def test_wrong_compiled_output_fails_accuracy_and_keeps_timing():
    result = measure(Mlp(), backend="relu_accuracy_error_TESTING_ONLY")
    assert result.status == "fail_accuracy"
    assert result.accuracy_pass is False
    assert result.rmse > 2 * result.eager_rmse
    assert result.speedup is not None
    assert "accuracy: output 0" in result.notes


def test_module_that_fails_in_eager_is_an_eager_error():
    result = measure(FailsInEager())
    assert (result.status, result.error_phase) == ("eager_error", "reference")
    assert result.error_type == "RuntimeError"
    assert result.error_signature == (
        "RuntimeError: mat1 and mat2 shapes cannot be multiplied (<shape> and <shape>)"
    )


def test_build_and_input_failures_are_build_errors(monkeypatch):
    def build(spec):
        raise ImportError("no module named 'not_installed'")

    monkeypatch.setattr(ModelSpec, "build", build)
    result = measure_cell(make_cell(), inputs_fn=features)
    assert (result.status, result.error_phase) == ("build_error", "build")
    assert result.error_signature == "ImportError: no module named 'not_installed'"

    def no_inputs(batch_size, device, seq_len):
        raise ValueError("this model takes no batch")

    result = measure_cell(make_cell(), model=Mlp(), inputs_fn=no_inputs)
    assert (result.status, result.error_phase) == ("build_error", "inputs")
    assert result.param_count == 212


# -- dynamic shapes ------------------------------------------------------------------


def test_probe_with_dynamic_auto_recompiles_once():
    result = measure(Mlp(), dynamic="auto")
    assert result.status == "pass"
    assert json.loads(result.probe_shapes) == [[2, 8]]
    assert result.probe_ok is True
    assert result.probe_recompiles == 1
    assert result.recompile_count == 1


def test_probe_with_dynamic_true_does_not_recompile():
    result = measure(Mlp(), dynamic="true")
    assert result.probe_ok is True
    assert result.probe_recompiles == 0
    assert result.recompile_count == 0


def test_probe_without_batch_size_halves_leading_dims():
    def model_defined(batch_size, device, seq_len):
        return (torch.randn(8, 8), torch.tensor([3.0]))

    cell = make_cell(dynamic="auto", batch_size=None)
    result = measure_cell(cell, model=AddFirst(), inputs_fn=model_defined)
    assert result.status == "pass", result.error_message
    assert json.loads(result.probe_shapes) == [[4, 8], [1]]
    assert result.probe_ok is True


def test_probe_is_skipped_when_no_shape_can_change():
    result = measure(Mlp(), dynamic="auto", batch_size=2)
    assert result.probe_ok is None and result.probe_shapes is None
    assert "shape probe skipped" in result.notes
    assert measure(Mlp(), dynamic="false").probe_ok is None


def test_probe_failure_is_recorded_without_failing_the_cell():
    result = measure(RejectsBatchTwo(), dynamic="auto")
    assert result.status == "pass"
    assert result.probe_ok is False
    assert "shape probe failed (runtime): ValueError: batch <N> is not supported" in result.notes


def test_probe_inputs_failure_skips_the_probe():
    calls = []

    def batch_four_only(batch_size, device, seq_len):
        calls.append(batch_size)
        if batch_size != 4:
            raise ValueError("only batch 4")
        return features(batch_size, device, seq_len)

    result = measure_cell(make_cell(dynamic="true"), model=Mlp(), inputs_fn=batch_four_only)
    assert result.status == "pass"
    assert calls == [4, 2]
    assert result.probe_ok is None
    assert "shape probe skipped, its inputs failed: ValueError: only batch <N>" in result.notes


# -- accuracy rule -------------------------------------------------------------------


def test_accuracy_rule_compares_rmse_against_eager_rmse():
    gold = torch.zeros(100, dtype=torch.float64)
    eager = torch.full((100,), 0.1)
    slightly_worse = torch.full((100,), 0.15)
    much_worse = torch.full((100,), 0.3)
    kwargs = {"tol": 1e-4, "multiplier": 2.0}
    assert compare_outputs([gold], [eager], [slightly_worse], **kwargs).passed
    failed = compare_outputs([gold], [eager], [much_worse], **kwargs)
    assert not failed.passed
    assert failed.rmse == pytest.approx(0.3) and failed.eager_rmse == pytest.approx(0.1)
    assert failed.max_abs_error == pytest.approx(0.2)


def test_accuracy_rule_accepts_shared_nans_and_requires_equal_integers():
    nan = float("nan")
    ref = torch.tensor([1.0, nan, 3.0])
    assert compare_outputs([ref.double()], [ref], [ref.clone()], tol=1e-4, multiplier=2).passed
    moved_nan = torch.tensor([nan, 2.0, 3.0])
    assert not compare_outputs([ref.double()], [ref], [moved_nan], tol=1e-4, multiplier=2).passed

    ints = torch.tensor([1, 2, 3])
    assert compare_outputs([ints], [ints], [ints.clone()], tol=1e-4, multiplier=2).passed
    assert not compare_outputs([ints], [ints], [ints + 1], tol=1e-4, multiplier=2).passed
    assert not compare_outputs([ints], [ints], [ints[:2]], tol=1e-4, multiplier=2).passed
    assert not compare_outputs([ints], [ints], [], tol=1e-4, multiplier=2).passed


def test_a_reference_of_another_size_leaves_eager_alone_to_judge():
    """Keypoint matchers output as many points as they find: the float64 copy may find
    another count. The rule then has no reference; close to eager passes, else fails
    saying why (it raised an IndexError from the accuracy phase before)."""
    gold = torch.zeros(7, dtype=torch.float64)
    eager = torch.linspace(0, 1, 8)
    kwargs = {"tol": 1e-2, "multiplier": 3.0}
    assert compare_outputs([gold], [eager], [eager + 1e-4], **kwargs).passed
    failed = compare_outputs([gold], [eager], [eager + 0.5], **kwargs)
    assert not failed.passed and failed.failed == [0]
    assert failed.failure == (
        "output 0: not close to eager, and the float64 reference has shape [7] against "
        "eager's [8] (a size that depends on the values), so the RMSE rule cannot judge it"
    )
    assert failed.max_abs_error == pytest.approx(0.5)


def test_model_outputs_of_any_structure_are_compared_tensor_by_tensor():
    class Structured(nn.Module):
        def forward(self, x):
            return {"logits": x * 2, "extra": (x.argmax(-1), [x.sum()])}

    result = measure(Structured())
    assert result.status == "pass"
    assert result.accuracy_pass is True


# -- inductor ------------------------------------------------------------------------


@pytest.mark.inductor
def test_inductor_compiles_into_the_fresh_cache_dir():
    cache_files = []

    def look_at_cache(phase):
        if phase == "accuracy":
            for _, _, files in os.walk(os.environ["TORCHINDUCTOR_CACHE_DIR"]):
                cache_files.extend(files)

    result = measure_cell(
        make_cell(backend="inductor", mode="default"),
        model=Mlp(),
        inputs_fn=features,
        report_phase=look_at_cache,
    )
    assert result.status == "pass", result.error_message
    assert result.graph_count == 1 and result.graph_break_count == 0
    assert result.compile_s > 0 and result.speedup is not None
    assert cache_files


class RandomMask(nn.Module):
    """Keeps a random half of its features, as ViTMAE masks its patches in eval mode
    (``torch.rand`` noise, argsorted)."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x):
        noise = torch.rand(x.shape, device=x.device)
        keep = noise.argsort(dim=1)[:, : x.shape[1] // 2]
        return self.linear(x).gather(1, keep)


@pytest.mark.inductor
def test_a_model_that_draws_random_numbers_compares_the_same_draw():
    """Inductor draws as eager does in inference too (fallback_random): a model that
    masks at random passes the accuracy check (hf/ViTMAEModel failed it on the H200 with
    Inductor's own generator, two draws compared)."""
    result = measure_cell(
        make_cell(backend="inductor", mode="default"), model=RandomMask(), inputs_fn=features
    )
    assert result.status == "pass", result.notes
    assert result.accuracy_pass is True and result.rmse < 1e-6


def test_graph_pools_are_read_from_the_allocator_snapshot():
    """The memory a CUDA graph replays into is its private pool's free blocks: counted
    per device, from private pools only (the default pool is (0, 0))."""
    from runner.measure.subject import graph_pool_bytes

    mb = 1 << 20
    segments = [
        {"device": 0, "segment_pool_id": (0, 0), "total_size": 500 * mb, "allocated_size": 0},
        {"device": 0, "segment_pool_id": (1, 0), "total_size": 40 * mb, "allocated_size": 10 * mb},
        {"device": 0, "segment_pool_id": (1, 0), "total_size": 20 * mb, "allocated_size": 20 * mb},
        {"device": 1, "segment_pool_id": (2, 0), "total_size": 99 * mb, "allocated_size": 0},
    ]
    assert graph_pool_bytes(segments, torch.device("cuda", 0)) == (60 * mb, 30 * mb)
    assert graph_pool_bytes(segments, torch.device("cuda", 1)) == (99 * mb, 99 * mb)
    assert graph_pool_bytes(segments[:1], torch.device("cuda", 0)) == (0, 0)


def test_the_registry_says_which_configs_replay_cuda_graphs():
    from runner.backends.registry import replays_cuda_graphs

    assert replays_cuda_graphs("inductor", "reduce-overhead")
    assert replays_cuda_graphs("inductor", "max-autotune+freezing")
    assert replays_cuda_graphs("cudagraphs", "none")
    assert not replays_cuda_graphs("inductor", "max-autotune-no-cudagraphs")
    assert not replays_cuda_graphs("inductor", "default")
    assert not replays_cuda_graphs("aot_inductor", "max-autotune")


def test_accuracy_compares_an_output_in_slices_with_the_same_verdict(monkeypatch):
    """Slices of CHUNK elements give what the whole tensor gives: the RMSE over every
    finite place, the largest difference anywhere, shared NaNs and infs agreeing."""
    from runner.measure import accuracy

    torch.manual_seed(0)
    gold = torch.randn(7, 13, dtype=torch.float64)
    eager = (gold + 1e-3 * torch.randn_like(gold)).float()
    compiled = (gold + 3e-3 * torch.randn_like(gold)).float()
    for t in (eager, compiled):  # agreeing non-finite places, in different slices
        t[0, 0], t[3, 5], t[6, 12] = float("nan"), float("inf"), float("-inf")
    finite = eager.isfinite()
    expected_rmse = (gold[finite] - compiled[finite].double()).pow(2).mean().sqrt().item()
    expected_eager = (gold[finite] - eager[finite].double()).pow(2).mean().sqrt().item()
    whole = compare_outputs([gold], [eager], [compiled], tol=1e-4, multiplier=2.0)
    monkeypatch.setattr(accuracy, "CHUNK", 10)
    sliced = compare_outputs([gold], [eager], [compiled], tol=1e-4, multiplier=2.0)
    for result in (whole, sliced):
        assert result.rmse == pytest.approx(expected_rmse, rel=1e-12)
        assert result.eager_rmse == pytest.approx(expected_eager, rel=1e-12)
        assert result.max_abs_error == pytest.approx((eager - compiled)[finite].abs().max().item())
        assert not result.passed  # 3x eager's error: past the 2x bound
    # A NaN the eager side does not have fails, in whichever slice it lies.
    assert compare_outputs([gold], [eager], [eager.clone()], tol=1e-4, multiplier=2.0).passed
    moved = eager.clone()
    moved[5, 5] = float("nan")
    assert not compare_outputs([gold], [eager], [moved], tol=1e-4, multiplier=2.0).passed


def test_comparing_a_large_output_costs_little_memory_beyond_it():
    """Workers comparing an LM head's logits over a large vocabulary were killed by the
    host's OOM killer: the comparison's temporaries are now a few slices, not several
    float64 copies of the output (measured in a fresh process, peak RSS: 1,606 MiB for
    this 256 MiB output before, about 40 MiB after)."""
    script = """
import resource, torch
from runner.measure.accuracy import compare_outputs
n = 1 << 25  # 32 M elements: 256 MiB in float64, 128 MiB in float32
gold = torch.randn(n, dtype=torch.float64)
eager = gold.float()
compiled = eager + 1e-4
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
assert compare_outputs([gold], [eager], [compiled], tol=1e-2, multiplier=3.0).passed
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    grown_mib = int(done.stdout.strip())
    assert grown_mib < 128, f"the comparison grew the process by {grown_mib} MiB"  # 1/2 copy


def test_the_launch_canary_is_read_through_the_timed_calls_and_its_median_kept():
    """Read before the 1st, 11th and 21st of 25 timed pairs and once after them: four
    readings, each microseconds per tiny call, their median on the row."""
    canary = HostCanary(torch.device("cpu"))
    for _ in range(25):
        canary.tick()
    result = make_result()
    canary.record(result)
    assert len(canary.readings) == 4
    assert all(0.01 < reading < 10_000 for reading in canary.readings)
    assert result.host_launch_us == pytest.approx(statistics.median(canary.readings), abs=1e-3)


def test_a_timing_window_scales_its_cap_on_pairs_with_it():
    """The protocol's plans, and a window asked for: a quarter of the CUDA window caps
    the pairs at a quarter of 200, never below the minimum; the protocol's own window
    is the protocol's plan and says nothing."""
    from runner.measure.timing import TIMING_PLANS, TimingPlan, plan_for, window_note

    assert plan_for("cuda") == plan_for("cuda", 2.0) == TIMING_PLANS["cuda"]
    assert plan_for("cuda", 0.5) == TimingPlan(10, 50, 0.5)
    assert plan_for("cuda", 0.01) == TimingPlan(10, 10, 0.01)
    assert plan_for("cpu", 4.0) == TimingPlan(5, 800, 4.0)
    assert window_note("cuda", None) is None and window_note("cpu", 1.0) is None
    assert window_note("cuda", 0.5) == (
        "timed in a 0.5 s window (zoo-run --timing-s), not the protocol's 2 s"
    )


def test_a_catalogue_model_draws_the_same_weights_whatever_ran_before_it():
    """Workers are reused across cells, so the global generator arrives at a cell's
    build in whatever state the cells before it left. A timm model draws its random
    weights from it: unseeded, the same cell got other weights in another run (the H200
    rows of coat_mini: fail_accuracy in 2 of 5, eager's own error differing between
    runs and the same in the two that failed)."""
    options = PlanOptions(
        backends=("eager",),
        modes=("default",),
        dynamic=("false",),
        precisions=("fp32",),
        steps=("infer",),
        device="cpu",
    )
    (cell,) = plan_cells(select(["test_vit"]), options, env_id="test").cells
    first = measure_cell(cell)
    torch.rand(1000)  # what another cell in this worker drew
    second = measure_cell(cell)
    assert first.status == second.status == "pass", (first.error_message, second.error_message)
    assert first.eager_rmse is not None and first.eager_rmse > 0
    assert second.eager_rmse == first.eager_rmse
