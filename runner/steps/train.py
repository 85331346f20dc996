"""A training step: forward under the cell's precision, loss, backward, optimizer step.

One call of the program is one whole step, ``zero_grad(set_to_none=True)`` first,
outside anything compiled; the cell's autocast covers the forward and the loss, not
backward and the optimizer step. What a compiler compiles is the step's option: by default the
model and its loss as one region (the seed article's and PyTorch's harness's choice: the
loss fuses with the model's last layers), ``+model`` the model alone (timm's benchmark),
``+all`` the optimizer step too. Adam by default (the article's), ``+sgd`` for SGD.

Each side (the fp64 reference, eager, compiled) trains its own copy of the model from
the same weights, so the first step of each is compared: the loss, every gradient and
every updated parameter, each by the inference cells' RMSE rule. Randomness (dropout,
drop-path) is drawn from the same seed on every side, and Inductor draws it as eager does
(``fallback_random``), so eager and compiled take the same masks.

The loss: timm models cross-entropy on seeded random labels; HuggingFace heads that take
labels their own loss (causal and masked LM: the input ids; seq2seq: the decoder ids;
classification: seeded random labels; CTC: seeded random short label sequences); other
models the mean of their first output, as PyTorch's harness reduces it.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from typing import Any

import torch

from runner.measure.tensors import flatten_tensors
from runner.steps.base import Step, eager_draws
from runner.steps.registry import TRAIN, options

LEARNING_RATE = 1e-4
LABEL_SEED = 0
# Label sequence length of CTC heads, against the inputs' sequence.
CTC_LABEL_FRACTION = 4
# HF tasks whose head computes its own loss from the input ids.
_IDS_AS_LABELS = ("causal-lm", "masked-lm")
_DECODER_IDS_AS_LABELS = ("seq2seq-lm", "speech-seq2seq")
_CLASSIFICATION = (
    "sequence-classification",
    "image-classification",
    "audio-classification",
)

LOSS_CROSS_ENTROPY = "cross-entropy on seeded random labels"
LOSS_OWN = "the model's own loss"
LOSS_MEAN = "mean of the first output"


class Train(Step):
    name = TRAIN

    def __init__(self, cell) -> None:
        super().__init__(cell)
        chosen = options(cell.config.step)
        self.compiles = next((o for o in chosen if o in ("model", "all")), "loss")
        self.optimizer = "sgd" if "sgd" in chosen else "adam"
        self.names: list[str] = []

    def prepare(self, model: torch.nn.Module) -> None:
        model.train()

    def grad_mode(self) -> contextlib.AbstractContextManager[Any]:
        return _training_state()

    def program(self, model: torch.nn.Module) -> TrainStep:
        step = TrainStep(
            Loss.for_cell(self.cell, copy.deepcopy(model)), self.optimizer, self.compiles
        )
        self.names = step.names
        return step

    def outputs(self, value: Any) -> list[torch.Tensor]:
        return flatten_tensors(value)

    def output_names(self, count: int) -> list[str]:
        return self.names[:count] + [f"output {i}" for i in range(len(self.names), count)]

    def notes(self, model: torch.nn.Module) -> list[str]:
        what = {
            "loss": "the model and its loss compiled as one region",
            "model": "the model compiled, its loss eager",
            "all": "the model, its loss and the optimizer step compiled",
        }[self.compiles]
        return [
            f"train step: {what}; loss: {Loss.kind_for(self.cell, model)}; {self.optimizer} "
            f"(lr {LEARNING_RATE:g}), zero_grad outside; backward and the optimizer step "
            "outside autocast; Inductor draws random numbers as eager does (fallback_random)"
        ]


@contextlib.contextmanager
def _training_state() -> Iterator[None]:
    """Gradients on, and Inductor's random numbers drawn as eager draws them, so that a
    dropout mask is the same on both sides of the accuracy check."""
    with torch.enable_grad(), eager_draws():
        yield


class Loss(torch.nn.Module):
    """The model and its loss: the region compiled by default. ``targets(inputs)`` are
    made eagerly, before the region runs, and passed to it as tensors; ``compute`` takes
    the model part (``part()``) as an argument, so that ``+model`` can pass a compiled
    one and keep the loss eager."""

    kind = LOSS_MEAN

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model
        self._targets: dict[tuple, tuple[torch.Tensor, ...]] = {}

    @classmethod
    def for_cell(cls, cell, model: torch.nn.Module) -> Loss:
        if cell.spec.suite == "timm" and _num_classes(model):
            return CrossEntropy(model)
        if _is_hf(model) and cell.spec.task in OwnLoss.TASKS:
            return OwnLoss(model, cell.spec.task)
        return MeanOfFirst(model)

    @classmethod
    def kind_for(cls, cell, model: torch.nn.Module) -> str:
        if cell.spec.suite == "timm" and _num_classes(model):
            return CrossEntropy.kind
        if _is_hf(model) and cell.spec.task in OwnLoss.TASKS:
            return f"{OwnLoss.kind} ({cell.spec.task} labels)"
        return MeanOfFirst.kind

    def part(self) -> torch.nn.Module:
        """What ``+model`` compiles: the model, without the loss."""
        return self.model

    def targets(self, inputs: tuple[Any, ...]) -> tuple[torch.Tensor, ...]:
        key = tuple(tuple(x.shape) for x in inputs if isinstance(x, torch.Tensor))
        if key not in self._targets:
            self._targets[key] = self.make_targets(inputs)
        return self._targets[key]

    def make_targets(self, inputs: tuple[Any, ...]) -> tuple[torch.Tensor, ...]:
        return ()

    def forward(self, *args: Any) -> torch.Tensor:
        return self.compute(self.part(), *args)

    def compute(self, model: Callable[..., Any], *args: Any) -> torch.Tensor:
        first = next(t for t in flatten_tensors(model(*args)) if t.is_floating_point())
        return first.float().mean()


class MeanOfFirst(Loss):
    pass


class CrossEntropy(Loss):
    kind = LOSS_CROSS_ENTROPY

    def make_targets(self, inputs: tuple[Any, ...]) -> tuple[torch.Tensor, ...]:
        batch = inputs[0].shape[0]
        generator = torch.Generator().manual_seed(LABEL_SEED)
        labels = torch.randint(_num_classes(self.model), (batch,), generator=generator)
        return (labels.to(inputs[0].device),)

    def compute(self, model: Callable[..., Any], *args: Any) -> torch.Tensor:
        *inputs, labels = args
        logits = flatten_tensors(model(*inputs))[0]
        return torch.nn.functional.cross_entropy(logits, labels)


class OwnLoss(Loss):
    """A HuggingFace head's own loss, called with ``labels`` beside the inputs (the
    zoo's keyword wrapper names them); the head computes it inside its forward, so for
    ``+model`` the compiled part is the head with its loss."""

    kind = LOSS_OWN
    TASKS = (*_IDS_AS_LABELS, *_DECODER_IDS_AS_LABELS, *_CLASSIFICATION, "ctc")

    def __init__(self, model: torch.nn.Module, task: str) -> None:
        super().__init__(model)
        self.task = task

    def part(self) -> torch.nn.Module:
        return self.model.model

    def make_targets(self, inputs: tuple[Any, ...]) -> tuple[torch.Tensor, ...]:
        named = dict(zip(self.model.input_names, inputs, strict=True))
        device = inputs[0].device
        generator = torch.Generator().manual_seed(LABEL_SEED)
        config = self.model.model.config
        if self.task in _IDS_AS_LABELS and "input_ids" in named:
            return (named["input_ids"].clone(),)
        if self.task in _DECODER_IDS_AS_LABELS:
            ids = named.get("decoder_input_ids", named.get("input_ids"))
            if ids is not None:
                return (ids.clone(),)
        batch = inputs[0].shape[0]
        if self.task in _CLASSIFICATION:
            count = max(2, int(getattr(config, "num_labels", 2) or 2))
            return (torch.randint(count, (batch,), generator=generator).to(device),)
        if self.task == "ctc":
            length = max(1, inputs[0].shape[-1] // (CTC_LABEL_FRACTION * 320))
            vocab = max(2, int(getattr(config, "vocab_size", 2) or 2))
            labels = torch.randint(1, vocab, (batch, length), generator=generator)
            return (labels.to(device),)
        raise ValueError(f"no labels for {self.task} from inputs {', '.join(named)}")

    def compute(self, model: Callable[..., Any], *args: Any) -> torch.Tensor:
        *inputs, labels = args
        named = dict(zip(self.model.input_names, inputs, strict=True))
        loss = getattr(model(**named, labels=labels), "loss", None)
        if loss is None:
            raise RuntimeError("the head took labels but returned no loss")
        return loss


class TrainStep:
    """One training step of one side's model copy; returns the loss and, after the
    optimizer step, every gradient and parameter (what is compared). A plain callable,
    not a module: its parts are what a compiler compiles (``compile_parts``)."""

    def __init__(self, loss: Loss, optimizer: str, compiles: str) -> None:
        self.loss = loss
        self.compiles = compiles
        named = [(n, p) for n, p in loss.model.named_parameters() if p.requires_grad]
        params = [p for _, p in named]
        if optimizer == "sgd":
            self.optimizer = torch.optim.SGD(params, lr=LEARNING_RATE, foreach=True)
        else:
            # capturable keeps the step count on the device, which a compiled optimizer
            # step needs (PyTorch's harness: Adam(capturable=True, foreach=True)).
            on_cuda = any(p.is_cuda for p in params)
            self.optimizer = torch.optim.Adam(
                params, lr=LEARNING_RATE, foreach=True, capturable=on_cuda
            )
        self.names = ["loss", *(f"grad {n}" for n, _ in named), *(f"param {n}" for n, _ in named)]
        self.params = params
        # What runs the loss and what updates: eager here, compiled by compile_parts.
        self.region: Callable[..., torch.Tensor] = loss
        self.update: Callable[[], Any] = self.optimizer.step

    def __call__(self, *inputs: Any) -> tuple[torch.Tensor, ...]:
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.region(*inputs, *self.loss.targets(inputs))
        # The cell calls the whole step under its precision's autocast; backward and the
        # optimizer step leave it, as torch.amp advises and PyTorch's harness does.
        with torch.autocast(loss.device.type, enabled=False):
            loss.backward()
            self.update()
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        return (loss.detach(), *grads, *self.params)

    # -- what a compiler compiles (runner.steps.base.compile_program) -----------------

    @property
    def part_count(self) -> int:
        return 2 if self.compiles == "all" else 1

    def compile_parts(self, compile_part: Callable[[Any], Any]) -> TrainStep:
        if self.compiles == "model":
            model = compile_part(self.loss.part())
            self.region = lambda *args: self.loss.compute(model, *args)
        else:
            self.region = compile_part(self.loss)
        if self.compiles == "all":
            self.update = compile_part(self.optimizer.step)
        return self

    def explain_target(self, inputs: tuple[Any, ...]) -> tuple[Callable[..., Any], tuple]:
        targets = self.loss.targets(inputs)
        if self.compiles == "model" and not isinstance(self.loss, OwnLoss):
            return self.loss.part(), inputs
        return self.loss, (*inputs, *targets)


def _num_classes(model: torch.nn.Module) -> int | None:
    count = getattr(model, "num_classes", None)
    return count if isinstance(count, int) and count > 0 else None


def _is_hf(model: torch.nn.Module) -> bool:
    """The zoo's keyword wrapper of a transformers model (zoo._hf.building)."""
    return hasattr(model, "input_names") and hasattr(getattr(model, "model", None), "config")
