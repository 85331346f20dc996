"""The subject of a cell: its model and inputs on its device, at its precision.

Two precision treatments exist: ``autocast`` (the model stays fp32 and runs under
``torch.autocast``; torch.compile's cells) and ``cast`` (model and inputs cast to the
precision, eager side too; XLA's cells, as autocast does not cross into JAX). fp32
cells on CUDA run with TF32 off either way: full fp32 matmuls.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from runner.matrix.cells import Cell
from runner.measure.isolation import release_cached_memory, seed_everything, tf32_disabled
from runner.measure.tensors import MB, cast_floats

REDUCED_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
AUTOCAST: Literal["autocast"] = "autocast"
CAST: Literal["cast"] = "cast"
Treatment = Literal["autocast", "cast"]

InputsFn = Callable[[int | None, str, int | None], tuple[torch.Tensor, ...]]


@dataclass
class Subject:
    """A built model and its inputs for one cell."""

    cell: Cell
    model: torch.nn.Module
    treatment: Treatment = AUTOCAST
    # What the build changed from the model's defaults (an hf depth cut): notes.
    build_notes: tuple[str, ...] = ()
    make_inputs: InputsFn | None = None
    inputs: tuple[Any, ...] = ()
    cast_applied: bool = field(default=False, init=False)

    @classmethod
    def build(
        cls,
        cell: Cell,
        *,
        model: torch.nn.Module | None = None,
        treatment: Treatment = AUTOCAST,
    ) -> Subject:
        """The cell's model on its device (``model`` replaces ``cell.spec.build()``);
        its inputs come with ``load_inputs``, a phase of their own.

        Built from a seeded generator: a worker runs many cells, and a model that draws
        its random weights from the global generator (timm's) would otherwise get other
        weights after other cells, so a cell's accuracy would depend on its neighbours."""
        if model is None:
            seed_everything()
            model = cell.spec.build()
        notes = tuple(getattr(model, "build_notes", ()))
        return cls(cell, model.to(torch.device(cell.device)), treatment, notes)

    def load_inputs(self, inputs_fn: InputsFn | None = None) -> None:
        """The cell's inputs (``inputs_fn`` replaces ``cell.spec.example_inputs``)."""
        self.make_inputs = inputs_fn or self.cell.spec.example_inputs
        cell = self.cell
        self.inputs = tuple(self.make_inputs(cell.run_batch_size, cell.device, cell.seq_len))

    def input_notes(self) -> list[str]:
        """What the model says of the inputs made for the cell (a sequence cut to its
        position table), from its ``input_notes(seq_len)`` where it has one."""
        notes = getattr(self.model, "input_notes", None)
        return list(notes(self.cell.seq_len)) if callable(notes) else []

    @property
    def device(self) -> torch.device:
        return torch.device(self.cell.device)

    @property
    def on_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def precision(self) -> str:
        return self.cell.config.precision

    @property
    def reduced_dtype(self) -> torch.dtype | None:
        """The dtype of a bf16/fp16 cell; None for fp32."""
        return REDUCED_DTYPES.get(self.precision)

    def param_count(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def inputs_for(self, batch_size: int | None, seq_len: int | None) -> tuple[Any, ...]:
        """Inputs of another shape, made the way the cell's were (and cast like them)."""
        assert self.make_inputs is not None, "load_inputs first"
        return self.cast_inputs(tuple(self.make_inputs(batch_size, self.cell.device, seq_len)))

    # -- precision ---------------------------------------------------------------------

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """Around every call of the model: autocast to the cell's precision, where that
        is the treatment."""
        dtype = self.reduced_dtype
        if self.treatment == AUTOCAST and dtype is not None:
            return torch.autocast(self.device.type, dtype=dtype)
        return contextlib.nullcontext()

    def fp32_treatment(self) -> contextlib.AbstractContextManager[Any]:
        """fp32 cells run with TF32 off on CUDA: full fp32 matmuls."""
        if self.precision == "fp32":
            return tf32_disabled(self.on_cuda)
        return contextlib.nullcontext()

    def cast(self) -> None:
        """Model and inputs cast to the cell's precision, where that is the treatment
        (after the fp32 model's reference is taken)."""
        dtype = self.reduced_dtype
        if self.treatment != CAST or dtype is None or self.cast_applied:
            return
        self.model = self.model.to(dtype)
        self.inputs = cast_floats(self.inputs, dtype)
        self.cast_applied = True

    def cast_inputs(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return cast_floats(inputs, self.reduced_dtype) if self.cast_applied else inputs

    def treatment_label(self) -> str:
        """What the row's ``precision_treatment`` says. Rows recorded before each call
        entered autocast itself (``runner.backends.base.Sides``) say ``autocast bf16``:
        their eager calls after the first reused autocast's weight casts."""
        if self.reduced_dtype is not None:
            if self.treatment == CAST:
                return f"cast {self.precision} (model and inputs, eager too)"
            return f"autocast {self.precision} per call"
        return "fp32, tf32 off" if self.on_cuda else "fp32"

    # -- the device ----------------------------------------------------------------------

    def sync(self) -> None:
        if self.on_cuda:
            torch.cuda.synchronize(self.device)

    def peak_memory_mb(self, fn: Callable[[], Any]) -> Peak:
        """The peak of one call of ``fn``, in MB (CUDA only), with what CUDA graph pools
        hold at its end (see ``Peak``)."""
        release_cached_memory()  # garbage is collected before the hold that calls this
        torch.cuda.reset_peak_memory_stats(self.device)
        fn()
        self.sync()
        pool_reserved, pool_idle = graph_pool_bytes(
            torch.cuda.memory_snapshot(include_traces=False), self.device
        )
        return Peak(
            torch.cuda.max_memory_allocated(self.device) / MB,
            torch.cuda.max_memory_reserved(self.device) / MB,
            pool_reserved / MB,
            pool_idle / MB,
        )


# The caching allocator's default pool; CUDA graphs allocate in private pools of their own.
DEFAULT_POOL = (0, 0)


@dataclass(frozen=True)
class Peak:
    """One call's peak memory, in MB. A CUDA graph replays into memory of its private
    pool that the allocator counts as free (the graph's activations, reserved for it
    since capture), so ``allocated`` misses what a replay uses: ``pool_idle`` is the
    pools' memory not allocated at the call's end (those activations, and what warm-up
    or other graphs of the pool left there: all of it held for the compiled model),
    ``pool_reserved`` all the pools' segments (in ``reserved`` of every call while the
    graphs live, the eager side's too)."""

    allocated: float
    reserved: float
    pool_reserved: float = 0.0
    pool_idle: float = 0.0


def graph_pool_bytes(segments: list[dict[str, Any]], device: torch.device) -> tuple[int, int]:
    """(reserved, reserved but unallocated) bytes of the private pools on ``device``, from
    ``torch.cuda.memory_snapshot()``'s segments."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    reserved = idle = 0
    for segment in segments:
        if segment.get("device", index) != index:
            continue
        if tuple(segment.get("segment_pool_id", DEFAULT_POOL)) == DEFAULT_POOL:
            continue
        reserved += segment["total_size"]
        idle += segment["total_size"] - segment["allocated_size"]
    return reserved, idle
