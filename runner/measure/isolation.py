"""What a cell changes in its process, and puts back: compile caches, dynamo state,
TF32, seeds, device memory. Worker processes are reused across cells, so everything
global a cell touches is restored before the next one."""

from __future__ import annotations

import contextlib
import gc
import os
import random
import shutil
import sys
import tempfile
from collections.abc import Iterator

import torch
from torch._dynamo.utils import clear_compilation_metrics, counters

from runner.measure.failure import signature
from runner.measure.host import SCRATCH_DIR_ENV

SEED = 0
INDUCTOR_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
TRITON_CACHE_ENV = "TRITON_CACHE_DIR"
WARM_CACHE_ENV = "ZOO_WARM_CACHE"


@contextlib.contextmanager
def cold_compile_caches(*, always: bool = False) -> Iterator[str | None]:
    """Fresh Inductor and Triton cache directories for the cell (unless warm caches are
    asked for), so that compile time is a cold compile; removed afterwards. ``always``:
    fresh even when warm caches are asked for, and for every cell measured inside (work
    that must compile for real, such as the minifier's armed compile: a cache hit skips
    the compile it hooks into). Yields the fresh Inductor cache directory (None with
    warm caches)."""
    if os.environ.get(WARM_CACHE_ENV) == "1" and not always:
        yield None
        return
    saved = {name: os.environ.get(name) for name in (INDUCTOR_CACHE_ENV, TRITON_CACHE_ENV)} | (
        {WARM_CACHE_ENV: os.environ.pop(WARM_CACHE_ENV, None)} if always else {}
    )
    scratch = os.environ.get(SCRATCH_DIR_ENV)
    directory = tempfile.mkdtemp(
        prefix="zoo-inductor-", dir=scratch if scratch and os.path.isdir(scratch) else None
    )
    os.environ[INDUCTOR_CACHE_ENV] = directory
    os.environ[TRITON_CACHE_ENV] = os.path.join(directory, "triton")
    _clear_inductor_memory_caches()
    try:
        yield directory
    finally:
        _clear_inductor_memory_caches()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(directory, ignore_errors=True)


def _clear_inductor_memory_caches() -> None:
    import torch._inductor.utils as inductor_utils

    # ``clear_caches`` since torch 2.8; the older name is kept as an alias.
    clear = getattr(inductor_utils, "clear_caches", None) or inductor_utils.clear_inductor_caches
    clear()


@contextlib.contextmanager
def restored_process_state(notes: list[str]) -> Iterator[None]:
    """Fresh dynamo state and counters for the cell; on the way out, the state the
    next cell in this process expects (a failed cleanup is noted, never raised)."""
    default_dtype = torch.get_default_dtype()
    torch._dynamo.reset()
    counters.clear()
    # Per-cell compilation metrics (recompile reasons).
    clear_compilation_metrics()
    try:
        yield
    finally:
        torch.set_default_dtype(default_dtype)
        try:
            torch._dynamo.reset()
            counters.clear()
            free_device_memory()
        except Exception as exc:
            notes.append(f"cleanup after the cell failed: {signature(exc)}")


@contextlib.contextmanager
def tf32_disabled(on_cuda: bool) -> Iterator[None]:
    """Full fp32 matmuls and convolutions on CUDA for the block."""
    if not on_cuda:
        yield
        return
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def free_device_memory() -> None:
    gc.collect()
    release_cached_memory()


def release_cached_memory() -> None:
    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def seed_everything(seed: int = SEED) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    # numpy only matters if the model imported it.
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed)
