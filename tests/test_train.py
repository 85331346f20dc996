"""The training column on CPU: --step train through eager, aot_eager (and one inductor
cell), its loss per suite, accuracy on what a step changes, and what cannot train."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from runner.cli.run import main as zoo_run
from runner.plan import PlanOptions, configs
from tests.results import rows
from tests.test_measure import Mlp, measure


class WrongGradWhenCompiled(Mlp):
    """The same forward value either way, but compiled, fc1's weight gets twice its
    gradient: a planted backward bug."""

    def forward(self, x):
        weight = self.fc1.weight
        if torch.compiler.is_compiling():
            weight = weight.detach() + (weight - weight.detach()) * 2
        hidden = torch.relu(nn.functional.linear(x, weight, self.fc1.bias))
        return self.fc2(hidden)


class WithDropout(Mlp):
    def __init__(self):
        super().__init__()
        self.dropout = nn.Dropout(0.5)

    def forward(self, x):
        return self.fc2(self.dropout(torch.relu(self.fc1(x))))


def train(module, **options):
    return measure(module, step="train", **options)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_train_cell_times_whole_steps_and_checks_what_they_change(backend):
    result = train(Mlp(), backend=backend)
    assert result.status == "pass", (result.error_message, result.notes)
    assert result.step == "train" and result.accuracy_pass is True
    assert result.accuracy_failed is None
    assert (result.graph_count, result.graph_break_count) == (1, 0)
    assert result.compile_s > 0 and result.speedup > 0
    assert "train step: the model and its loss compiled as one region" in result.notes
    # A custom model: no classes, no labels: the harness's reduction of its output.
    assert "loss: mean of the first output" in result.notes
    assert "adam" in result.notes


def test_a_wrong_gradient_fails_accuracy_naming_the_tensors():
    result = train(WrongGradWhenCompiled(), backend="aot_eager")
    assert result.status == "fail_accuracy"
    failed = result.accuracy_failed.split(", ")
    assert "grad fc1.weight" in failed and "loss" not in failed
    assert all(not name.startswith("grad fc2") for name in failed)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_dropout_draws_the_same_masks_on_both_sides(backend):
    result = train(WithDropout(), backend=backend)
    assert result.status == "pass", (result.accuracy_failed, result.notes)


def test_what_is_compiled_rides_on_the_step_name():
    region = train(Mlp(), backend="aot_eager")
    # Mlp's loss is its mean: +model compiles the model, the mean stays eager.
    only = measure(Mlp(), backend="aot_eager", step="train+model")
    everything = measure(Mlp(), backend="aot_eager", step="train+all+sgd")
    assert only.status == everything.status == region.status == "pass"
    assert "the model compiled, its loss eager" in only.notes
    assert "the optimizer step compiled" in everything.notes and "sgd" in everything.notes
    # The compiled optimizer step is a part of its own, not a graph break.
    assert everything.graph_break_count == 0 and everything.graph_count >= 2
    assert len({only.cell_key, everything.cell_key, region.cell_key}) == 3


def test_backends_that_cannot_train_are_dropped_at_plan_time():
    options = PlanOptions(
        backends=("eager", "xla", "xla_export", "export"),
        modes=None,
        dynamic=("false",),
        precisions=("fp32",),
        steps=("infer", "train"),
        device="cpu",
    )
    kept, dropped = configs(options)
    assert sorted((c.backend, c.step) for c in kept if c.step == "train") == [("eager", "train")]
    assert "dropped 1 config: backend xla does not run step train" in dropped
    assert "dropped 1 config: backend export does not run step train" in dropped


@pytest.mark.slow
def test_hf_heads_train_with_their_own_loss(tmp_path):
    db = tmp_path / "zoo.duckdb"
    models = "hf/GPT2LMHeadModel,hf/BertForMaskedLM,hf/T5ForConditionalGeneration,hf/ViTForImageClassification"
    args = ["--models", models, "--backends", "eager", "--step", "train", "--device", "cpu"]
    assert zoo_run([*args, "--db", str(db)]) == 0
    results = {r["model_id"]: r for r in rows(db)}
    assert len(results) == 4
    for model, task in (
        ("hf/GPT2LMHeadModel", "causal-lm"),
        ("hf/BertForMaskedLM", "masked-lm"),
        ("hf/T5ForConditionalGeneration", "seq2seq-lm"),
        ("hf/ViTForImageClassification", "image-classification"),
    ):
        row = results[model]
        assert row["status"] == "pass", (model, row["error_message"], row["accuracy_failed"])
        assert f"loss: the model's own loss ({task} labels)" in row["notes"]


@pytest.mark.slow
def test_a_timm_train_cell_uses_cross_entropy_and_the_cli_options(tmp_path, capsys):
    db = tmp_path / "zoo.duckdb"
    args = ["--models", "test_resnet", "--backends", "eager", "--device", "cpu", "--db", str(db)]
    assert zoo_run([*args, "--step", "infer,train", "--train-compile", "model"]) == 0
    steps = sorted(r["step"] for r in rows(db))
    assert steps == ["infer", "train+model"]
    (trained,) = [r for r in rows(db) if r["step"] != "infer"]
    assert "loss: cross-entropy on seeded random labels" in trained["notes"]
    assert "train+model" in capsys.readouterr().out
    # Two choices of one kind cannot both hold.
    assert zoo_run([*args, "--step", "train+model", "--train-compile", "all"]) == 2
    assert "train+model+all" in capsys.readouterr().err


@pytest.mark.inductor
def test_an_inductor_train_cell():
    result = train(WithDropout(), backend="inductor", mode="default")
    assert result.status == "pass", (result.error_message, result.accuracy_failed)
    assert result.graph_break_count == 0 and result.compile_s > 0


def test_backward_and_the_optimizer_step_run_outside_autocast():
    """The cell calls a train step under its precision's autocast: the forward and the
    loss run under it, backward and the optimizer step do not (torch.amp's advice, what
    PyTorch's harness does)."""
    from runner.steps.train import MeanOfFirst, TrainStep

    seen: dict[str, bool] = {}

    class Probe(Mlp):
        def forward(self, x):
            seen["forward"] = torch.is_autocast_enabled("cpu")
            return super().forward(x)

    def noting(phase):
        def hook(*_):
            seen[phase] = torch.is_autocast_enabled("cpu")

        return hook

    model = Probe()
    model.fc1.weight.register_hook(noting("backward"))
    step = TrainStep(MeanOfFirst(model), "adam", "loss")
    step.optimizer.register_step_pre_hook(noting("optimizer"))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, *_ = step(torch.randn(4, 8))
    assert seen == {"forward": True, "backward": False, "optimizer": False}
    assert loss.dtype == torch.float32  # the mean of a bf16 output, in fp32
