"""The steps a cell can measure, importable without torch.

A step is what one call is: its grad mode, the model's mode, the program one call runs
and which of its outputs are compared. Adding one is a module (a ``runner.steps.base.Step``)
and an entry here; backends list the steps they support (``runner.backends.registry``).
A step's name may carry options, ``train+model+sgd`` (as modes do): the name is the cell's,
so the options key it.
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.matrix.plugins import resolve

INFER = "infer"
TRAIN = "train"
OPTION = "+"


@dataclass(frozen=True)
class StepEntry:
    name: str
    summary: str
    # "module:Class" of its ``runner.steps.base.Step``, imported only in workers.
    implementation: str
    # Options its name may carry, at most one of each group (``train+model+sgd``).
    option_groups: tuple[tuple[str, ...], ...] = ()

    def accepts(self, name: str) -> bool:
        base, *options = name.split(OPTION)
        if base != self.name or len(set(options)) != len(options):
            return False
        groups = [next((g for g in self.option_groups if o in g), None) for o in options]
        return None not in groups and len(set(map(id, groups))) == len(groups)


# What of a training step a compiler compiles: the model and its loss as one region
# (default), the model only (as timm's benchmark does), or the optimizer step too.
TRAIN_COMPILE = ("model", "all")
OPTIMIZERS = ("sgd",)  # Adam when none is named

STEPS: dict[str, StepEntry] = {
    INFER: StepEntry(
        INFER,
        "inference: the model in eval mode under no_grad, one forward call",
        "runner.steps.infer:Infer",
    ),
    TRAIN: StepEntry(
        TRAIN,
        "a training step: forward under the cell's precision, loss, backward, optimizer step",
        "runner.steps.train:Train",
        option_groups=(TRAIN_COMPILE, OPTIMIZERS),
    ),
}
# Steps the design names that are not built yet: asking for one says so.
PLANNED: dict[str, str] = {}


def names() -> tuple[str, ...]:
    return tuple(STEPS)


def base(name: str) -> str:
    """A step's name without its options: ``train+model`` -> ``train``."""
    return name.split(OPTION)[0]


def options(name: str) -> tuple[str, ...]:
    return tuple(name.split(OPTION)[1:])


def get(name: str) -> StepEntry:
    """The entry of a step name (options allowed); ValueError for one no step accepts."""
    entry = STEPS.get(base(name))
    if entry is None or not entry.accepts(name):
        raise ValueError(f"unknown step {name!r}; {describe()}")
    return entry


def describe() -> str:
    return "steps: " + "; ".join(
        entry.name + "".join(f" [+{'|+'.join(group)}]" for group in entry.option_groups)
        for entry in STEPS.values()
    )


def load(cell):
    """An instance of the implementation of the cell's step (imports torch)."""
    return resolve(get(cell.config.step).implementation)(cell)
