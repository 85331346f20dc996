"""The steps a cell can measure, importable without torch.

A step is what one call is: its grad mode, the model's mode, the program one call runs
and which of its outputs are compared. Adding one is a module (a ``runner.steps.base.Step``)
and an entry here; backends list the steps they support (``runner.backends.registry``).
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.matrix.plugins import resolve

INFER = "infer"


@dataclass(frozen=True)
class StepEntry:
    name: str
    summary: str
    # "module:Class" of its ``runner.steps.base.Step``, imported only in workers.
    implementation: str


STEPS: dict[str, StepEntry] = {
    INFER: StepEntry(
        INFER,
        "inference: the model in eval mode under no_grad, one forward call",
        "runner.steps.infer:Infer",
    ),
}
# Steps the design names that are not built yet: asking for one says so.
PLANNED = {"train": "the train step (forward, loss, backward, optimizer) is not built yet"}


def names() -> tuple[str, ...]:
    return tuple(STEPS)


def get(name: str) -> StepEntry:
    try:
        return STEPS[name]
    except KeyError:
        raise ValueError(f"unknown step {name!r}; known: {', '.join(STEPS)}") from None


def load(name: str):
    """An instance of the step's implementation (imports torch)."""
    return resolve(get(name).implementation)()
