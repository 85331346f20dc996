"""Autotuning done once for a model's two max-autotune cells of a run.

``max-autotune`` and ``max-autotune-no-cudagraphs`` lower the same graph to the same
kernels and benchmark the same choices for them: they differ only in whether the
compiled program is replayed as CUDA graphs. Tuning is what those cells spend their
GPU on (run 5296f2eb: the GPU lock held 76% of a max-autotune chunk by Inductor's
benchmarks, 18 cells/hour on one H200), and since it needs the GPU alone it runs one
cell at a time. So the first of the two cells of a model to finish keeps what it tuned,
and the second is handed it: Inductor's own local autotuning caches, copied into the
second cell's fresh cache directory before it compiles:

- ``cache/<system hash>``: the timings of each GEMM and convolution choice
  (``torch._inductor.codecache.PersistentCache``); a hit skips the choices'
  precompiling and benchmarking;
- ``*.best_config``: the configs Triton's autotuner and coordinate descent chose for
  each generated kernel (``torch._inductor.runtime.autotune_cache``).

Nothing else goes along: the second cell still traces, lowers and compiles every
kernel itself, so its compile time is a cold compile without the tuning, and its notes
say so (``TUNING_REUSED``). Its kernels are then the ones the first chose, which makes
the two columns' difference the CUDA graphs' alone, rather than that and two tunings'
noise.

Both cells must match in everything that shapes the graph: model, size, build limit,
batch that ran, sequence length, dynamic, precision, step, device, environment, and a
mode's options (``max-autotune+freezing`` pairs with ``max-autotune-no-cudagraphs+freezing``).
What is kept lives in the run's scratch folder (``runner.measure.host.SCRATCH_DIR_ENV``):
a run's pairs share (on a Ray cluster, a node's), other runs start cold; the executor
starts a cell whose partner is under way only once the partner is done
(``runner.schedule.executor``). ``ZOO_COLD_TUNING=1`` turns it off: every
cell tunes for itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from runner.matrix.axes import AUTOTUNE_MODES, MODE_OPTION, base_mode, mode_options
from runner.matrix.cells import Cell, CellConfig
from runner.matrix.results import TUNING_REUSED
from runner.measure.host import SCRATCH_DIR_ENV

COLD_TUNING_ENV = "ZOO_COLD_TUNING"
# The backends whose modes tune through Inductor's caches, and share between modes.
SHARING_BACKENDS = ("inductor",)
_FOLDER = "tuning"
_DONOR = "donor.json"
_GEMM_CACHE = "cache"
_BEST_CONFIG = ".best_config"


def enabled(environ: dict[str, str] | os._Environ = os.environ) -> bool:
    return environ.get(COLD_TUNING_ENV) != "1"


def tunes(config: CellConfig) -> bool:
    """Whether cells of ``config`` autotune through Inductor's caches, and share."""
    return config.backend in SHARING_BACKENDS and base_mode(config.mode) in AUTOTUNE_MODES


def shared_column(config: CellConfig) -> CellConfig:
    """The column as its tuning sees it: the two max-autotune modes (with the same
    options) as one; any other column as itself."""
    if not tunes(config):
        return config
    return replace(config, mode=MODE_OPTION.join(["*", *mode_options(config.mode)]))


def share_key(cell: Cell) -> str | None:
    """What a cell's tuning may be shared under: equal for a model's two max-autotune
    cells of one shape and setting, None for a cell that does not autotune."""
    if not tunes(cell.config):
        return None
    fields = cell.key_fields()
    fields["mode"] = shared_column(cell.config).mode
    fields["build_limit"] = cell.spec.build_limit
    fields["run_batch_size"] = cell.run_batch_size
    text = json.dumps(fields, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def partner_under_way(under_way: list[Cell]) -> Callable[[Cell], bool] | None:
    """Whether a cell's partner (the same tuning, another mode) is among ``under_way``;
    None where no cell under way tunes (nothing waits)."""
    running = {(key, c.config.mode) for c in under_way if (key := share_key(c)) is not None}
    if not running:
        return None

    def waits(cell: Cell) -> bool:
        key = share_key(cell)
        return key is not None and any(k == key and m != cell.config.mode for k, m in running)

    return waits


def partners(cell: Cell, other: Cell) -> bool:
    """Whether ``other`` is ``cell``'s partner: the same tuning, another mode."""
    waits = partner_under_way([other])
    return waits is not None and waits(cell)


def _store(key: str) -> Path | None:
    scratch = os.environ.get(SCRATCH_DIR_ENV)
    if not scratch or not enabled() or not os.path.isdir(scratch):
        return None
    return Path(scratch) / _FOLDER / key


def adopt(cell: Cell, cache_dir: str) -> str | None:
    """Copy what the cell's partner tuned into ``cache_dir`` (Inductor's cache folder
    for this cell); the partner's mode, or None where no partner of this run kept any."""
    key = share_key(cell)
    kept = _store(key) if key else None
    if kept is None or not (kept / _DONOR).is_file():
        return None
    try:
        donor = json.loads((kept / _DONOR).read_text())
        if donor["mode"] == cell.config.mode:
            # The same cell measured again (--force, a retry): it tunes for itself.
            return None
        shutil.copytree(kept / "files", cache_dir, dirs_exist_ok=True)
    except (OSError, ValueError, KeyError):
        # Unreadable or half copied: whatever did arrive only saves tuning; it tunes
        # the rest itself, and its notes do not claim a reuse.
        return None
    return donor["mode"]


def keep(cell: Cell, cache_dir: str) -> bool:
    """Keep the cell's tuning from ``cache_dir`` for its partner; False where there is
    nothing to share or one was kept already."""
    key = share_key(cell)
    target = _store(key) if key else None
    if target is None or target.exists():
        return False
    root = Path(cache_dir)
    files = [root / _GEMM_CACHE, *root.rglob(f"*{_BEST_CONFIG}")]
    files = [path for path in files if path.exists()]
    if not files:
        return False
    staging = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f"{key}-", dir=target.parent))
        for path in files:
            destination = staging / "files" / path.relative_to(root)
            if path.is_dir():
                shutil.copytree(path, destination)
            else:
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, destination)
        (staging / _DONOR).write_text(json.dumps({"mode": cell.config.mode, "cell": cell.key}))
        # Atomic: a partner never sees half of it; of two keepers, the first wins.
        os.rename(staging, target)
    except OSError:
        # A full disk, a keeper that won: the partner tunes for itself.
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        return False
    return True


def reused_note(mode: str) -> str:
    return (
        f"{TUNING_REUSED} from this run's {mode} cell of the model (its kernel choices, "
        "not its binaries): the compile time leaves out autotuning; ZOO_COLD_TUNING=1 "
        "tunes each cell"
    )
