"""Building: the recipe of a spec (class, config, input names), the model built from
it on its device, and its example inputs. Imports torch and transformers."""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import Any

import torch
import transformers

from zoo._hf.configs import default_config, runnable, tiny_config
from zoo._hf.depth import count_params, fit_depth, human_count
from zoo._hf.hub import offline
from zoo._hf.inputs import DEFAULT_BATCH_SIZE, DEFAULT_SEQ_LEN, InputMaker, input_names
from zoo._hf.settings import edited, get_setting
from zoo.spec import DEFAULT_MAX_PARAMS, ModelSpec
from zoo.tensors import flatten_tensors

SIZES = ("tiny", "full")
INIT_SEED = 0
# The largest tiny models are embedding tables (RemBERT's 250k x 1664 output embedding).
TINY_MAX_PARAMS = 2_000_000_000


@dataclass(frozen=True)
class Recipe:
    """What building and making inputs share: the class, its config, its inputs."""

    model_class: type
    config: Any
    input_names: tuple[str, ...]


class KeywordModel(torch.nn.Module):
    """A transformers model called with positional tensors, passed on by keyword, that
    returns the tensors of its output as a flat tuple."""

    def __init__(
        self,
        model: torch.nn.Module,
        input_names: tuple[str, ...],
        notes: tuple[str, ...] = (),
        positions: int | None = None,
    ) -> None:
        super().__init__()
        self.model = model
        self.input_names = input_names
        # Read by the runner into the cell's notes (a depth cut, for one).
        self.build_notes = notes
        self.positions = positions

    def input_notes(self, seq_len: int | None) -> list[str]:
        """What the runner notes of the inputs made for ``seq_len`` (``example_inputs``
        cuts a sequence longer than the position table to fit)."""
        asked = DEFAULT_SEQ_LEN if seq_len is None else seq_len
        run = sequence_length(seq_len, self.positions)
        if run == asked:
            return []
        return [
            f"sequence cut from {asked} to {run}, the model's text positions "
            "(max_position_embeddings); the cell's key keeps the length asked for"
        ]

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        output = self.model(**dict(zip(self.input_names, tensors, strict=True)))
        return tuple(flatten_tensors(output))


def sequence_length(seq_len: int | None, positions: int | None) -> int:
    """The sequence length inputs are made with: the one asked for (else the default),
    cut to the model's text positions where it has fewer. Token ids past its position
    table are no input it can take (CLIP's text tower has 77)."""
    seq = DEFAULT_SEQ_LEN if seq_len is None else seq_len
    return seq if positions is None else min(seq, positions)


def text_positions(recipe: Recipe) -> int | None:
    """How many text positions a model that takes token ids has
    (``max_position_embeddings``, its own or its text tower's), else None."""
    if "input_ids" not in recipe.input_names:
        return None
    limit = get_setting(recipe.config, "max_position_embeddings")
    return limit if isinstance(limit, int) and limit > 0 else None


def build(spec: ModelSpec) -> KeywordModel:
    recipe = recipe_for(spec)
    with _whose_failure(recipe.model_class):
        return _build(spec, recipe)


def _build(spec: ModelSpec, recipe: Recipe) -> KeywordModel:
    config, notes = recipe.config, []
    if spec.size == "full":
        config, note = fit_depth(recipe.model_class, config, spec.max_params or DEFAULT_MAX_PARAMS)
        if note:
            notes.append(note)
    else:
        params = count_params(recipe.model_class, config)
        if params > TINY_MAX_PARAMS:
            # A width the tiny settings do not know (Inkling's vision tower) left the
            # model huge: an error that says so beats a worker killed for memory.
            raise RuntimeError(
                f"the tiny config of {spec.name} still has {human_count(params)} parameters "
                f"(limit {human_count(TINY_MAX_PARAMS)}): a setting of this family is not shrunk"
            )
    device = torch.device(spec.device or "cpu")
    # Constructed on its device (weights initialized there, never on the host first),
    # from a fixed seed so that every run measures the same weights.
    forked = [device] if device.type == "cuda" else []
    with offline(), torch.random.fork_rng(devices=forked), device:
        torch.manual_seed(INIT_SEED)
        model = recipe.model_class(config)
    return KeywordModel(model, recipe.input_names, tuple(notes), text_positions(recipe))


@contextlib.contextmanager
def _whose_failure(model_class: type):
    """A failure to configure or construct ``model_class`` gets a note (the row's notes)
    saying whose it is: whether transformers' own default config builds the class
    (on the meta device, nothing allocated). If it does not, the library's default is
    broken, whatever the zoo does; if it does, the zoo's settings (tiny widths, the depth
    cut, settings a forward pass needs) broke it."""
    try:
        yield
    except Exception as failure:
        config_class = getattr(model_class, "config_class", None)
        # The device's failures (memory, a CUDA error) are not the config's.
        device_failures = (torch.OutOfMemoryError, MemoryError, torch.AcceleratorError)
        if config_class is None or isinstance(failure, device_failures):
            raise
        call = f"{model_class.__name__}({config_class.__name__}())"
        try:
            with offline(), torch.device("meta"):
                model_class(config_class())
        except Exception as plain:
            failure.add_note(
                f"transformers' own default config fails too: {call} raises "
                f"{type(plain).__name__}, so the default, not the zoo's settings, is at fault"
            )
        else:
            failure.add_note(
                f"{call} builds (on the meta device): the zoo's settings of its config broke it"
            )
        raise


@functools.cache
def recipe_for(spec: ModelSpec) -> Recipe:
    with offline():
        return _recipe(spec)


def _recipe(spec: ModelSpec) -> Recipe:
    try:
        model_class = getattr(transformers, spec.name)
    except (AttributeError, ImportError) as exc:
        raise RuntimeError(f"transformers cannot import {spec.name}: {exc}") from exc
    config_class = getattr(model_class, "config_class", None)
    if config_class is None:
        raise RuntimeError(f"{spec.name} names no config class to build it from")
    if spec.size not in SIZES:
        raise ValueError(f"unknown size {spec.size!r}; choose one of: {', '.join(SIZES)}")
    with _whose_failure(model_class):
        config = default_config(config_class)
        if spec.size == "tiny":
            config = tiny_config(config, model_class)
        config = edited(config, lambda d: runnable(d, spec.task))
    return Recipe(model_class, config, input_names(model_class, config, spec.task))


def example_inputs(
    spec: ModelSpec, batch_size: int | None, device: str, seq_len: int | None = None
) -> tuple[torch.Tensor, ...]:
    """The model's inputs, made from its config: token ids within the vocabulary, pixels
    at its image size, audio at its sampling settings. Seeded and the same on every
    device (drawn on the CPU, then moved)."""
    recipe = recipe_for(spec)
    batch = DEFAULT_BATCH_SIZE if batch_size is None else batch_size
    seq = sequence_length(seq_len, text_positions(recipe))
    maker = InputMaker(recipe.config, spec.task, recipe.input_names, batch, seq)
    return tuple(maker.make(name).to(device) for name in recipe.input_names)
