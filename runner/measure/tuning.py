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

A run may go further and pool its tuning across models (``zoo-run --tuning-pool``, which
sets ``ZOO_TUNING_POOL=1`` for its workers). Inductor's keys need no help to be shared:
a GEMM or convolution's timings are keyed by its op, input sizes, strides and dtypes and
the matmul precision, and a Triton kernel's config by the hash of its source. So every
max-autotune cell of the run (of one environment and device) starts with what the run's
earlier cells tuned, whichever model they measured, and adds what it tuned itself. The
overlap is large in a zoo: counted on the meta device for ``@core``
(``benchmarks/tuning_overlap.py``), 39% of the GEMM and convolution keys one model after
another tunes were tuned before by another. Such a cell's compile time then depends on
which cells ran before it, so the pool is off unless asked for, and a pooled cell's
notes say what it found and how many shapes it benchmarked itself (``TUNING_REUSED``).
Its speedup holds: a kernel chosen from another cell's timings of the same shapes on the
same GPU is the kernel it would have chosen.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from runner.matrix.axes import AUTOTUNE_MODES, MODE_OPTION, base_mode, mode_options
from runner.matrix.cells import Cell, CellConfig
from runner.matrix.results import TUNING_REUSED
from runner.measure.host import SCRATCH_DIR_ENV

COLD_TUNING_ENV = "ZOO_COLD_TUNING"
POOL_ENV = "ZOO_TUNING_POOL"
# The backends whose modes tune through Inductor's caches, and share between modes.
SHARING_BACKENDS = ("inductor",)
_FOLDER = "tuning"
_DONOR = "donor.json"
_GEMM_CACHE = "cache"
_BEST_CONFIG = ".best_config"
_POOL = "pool"


def enabled(environ: dict[str, str] | os._Environ = os.environ) -> bool:
    return environ.get(COLD_TUNING_ENV) != "1"


def pooling(environ: dict[str, str] | os._Environ = os.environ) -> bool:
    """Whether this run pools its tuning across models (``--tuning-pool``)."""
    return environ.get(POOL_ENV) == "1" and enabled(environ)


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
    files = [root / _GEMM_CACHE, *_configs(root)]
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


@dataclass(frozen=True)
class PoolStart:
    """What a cell found in the run's tuning pool before it compiled: the GEMM and
    convolution shapes with timings, the Triton kernel configs, and every shape its
    cache held then (what it tunes itself is what it adds to those)."""

    shapes: int
    configs: int
    keys: frozenset[tuple[str, ...]]

    @property
    def held(self) -> bool:
        return bool(self.shapes or self.configs)


def _pool(cell: Cell) -> Path | None:
    """The run's pool for ``cell``'s environment and device, or None where the run does
    not pool or the cell does not autotune."""
    if not tunes(cell.config) or not pooling():
        return None
    text = json.dumps({"env_id": cell.env_id, "device": cell.device}, sort_keys=True)
    return _store(f"{_POOL}/{hashlib.sha256(text.encode()).hexdigest()[:24]}")


def _read(path: Path) -> tuple[dict, dict]:
    """One of Inductor's GEMM timing files: its ``system`` part and its ``cache`` part
    (op -> input key -> matmul precision -> choice -> seconds); empty where unreadable."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}, {}
    if not isinstance(data, dict):
        return {}, {}
    system, cache = data.get("system"), data.get("cache")
    return (system if isinstance(system, dict) else {}), (cache if isinstance(cache, dict) else {})


def _timings(path: Path) -> dict:
    return _read(path)[1]


def _merge(into: dict, more: dict) -> None:
    """``more`` added to ``into`` at every depth; where both hold a value, ``into``'s
    stays (the first timing of a choice is the pool's)."""
    for key, value in more.items():
        held = into.get(key)
        if isinstance(held, dict) and isinstance(value, dict):
            _merge(held, value)
        elif key not in into:
            into[key] = value


def _merge_timings(target: Path, source_system: dict, timings: dict) -> None:
    """Add ``timings`` (a timing file's ``cache`` part, read by ``_read``) to the file
    ``target`` (what it holds stays), atomically."""
    system, merged = _read(target)
    _merge(merged, timings)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.{os.getpid()}")
    staging.write_text(json.dumps({"system": system or source_system, "cache": merged}))
    os.replace(staging, target)


def _keys_of(name: str, cache: dict) -> set[tuple[str, ...]]:
    """The GEMM and convolution shapes (op, input key, matmul precision) of the timing
    file ``name``, whose ``cache`` part is ``cache``."""
    found = set()
    for op, inputs in cache.items():
        for key, precisions in inputs.items() if isinstance(inputs, dict) else ():
            if isinstance(precisions, dict):
                found.update((name, op, key, precision) for precision in precisions)
    return found


def _timing_files(folder: Path) -> list[Path]:
    """The timing files of a ``cache`` folder; not a file being written (their staging
    names start with a dot, Inductor's and ours)."""
    if not folder.is_dir():
        return []
    return [path for path in folder.iterdir() if not path.name.startswith(".")]


def _keys(root: Path) -> set[tuple[str, ...]]:
    """Every GEMM and convolution shape the cache folder ``root`` holds timings of."""
    folder = root / _GEMM_CACHE
    found = set()
    for path in _timing_files(folder):
        found |= _keys_of(path.name, _timings(path))
    return found


def _configs(root: Path) -> Iterator[Path]:
    return root.rglob(f"*{_BEST_CONFIG}")


def _link(source: Path, target: Path) -> None:
    """``target`` as a hard link of ``source`` (Inductor replaces, never rewrites, these
    files), or a copy across file systems; an existing ``target`` stays."""
    if target.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except FileExistsError:
        pass
    except OSError:
        shutil.copy2(source, target)


def adopt_pool(cell: Cell, cache_dir: str) -> PoolStart | None:
    """Put what the run's earlier cells tuned into ``cache_dir``; None where the run
    does not pool."""
    pool = _pool(cell)
    if pool is None:
        return None
    root = Path(cache_dir)
    shapes = configs = 0
    try:
        folder = pool / _GEMM_CACHE
        for path in _timing_files(folder):
            system, timings = _read(path)
            shapes += len(_keys_of(path.name, timings))
            _merge_timings(root / _GEMM_CACHE / path.name, system, timings)
        for path in _configs(pool):
            _link(path, root / path.relative_to(pool))
            configs += 1
    except OSError:
        # Whatever arrived only saves tuning; the cell tunes the rest itself.
        pass
    return PoolStart(shapes, configs, frozenset(_keys(root)))


def add_to_pool(cell: Cell, cache_dir: str) -> int:
    """Add what the cell tuned in ``cache_dir`` to the run's pool, one cell at a time;
    the number of GEMM and convolution shapes the pool did not hold yet."""
    pool = _pool(cell)
    if pool is None:
        return 0
    root = Path(cache_dir)
    try:
        pool.mkdir(parents=True, exist_ok=True)
        with open(pool.parent / f"{pool.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            held = _keys(pool)
            for path in _timing_files(root / _GEMM_CACHE):
                _merge_timings(pool / _GEMM_CACHE / path.name, *_read(path))
            for path in _configs(root):
                _link(path, pool / path.relative_to(root))
            # The pool now holds the cell's shapes as well: those it lacked are new.
            return len(_keys(root) - held)
    except OSError:
        # A full disk: later cells tune what this one would have given them.
        return 0


def tuned_here(cache_dir: str, start: PoolStart) -> int:
    """The GEMM and convolution shapes the cell benchmarked itself."""
    return len(_keys(Path(cache_dir)) - start.keys)


POOL_SOURCE = "from this run's tuning pool (--tuning-pool)"
_POOL_COUNTS = re.compile(
    rf"{re.escape(POOL_SOURCE)}: it compiled with the timings of (\d+) GEMM/convolution "
    r"shape\(s\) and (\d+) Triton kernel config\(s\) .*?benchmarked (\d+) "
    r"GEMM/convolution shape\(s\) itself"
)


def pooled_note(start: PoolStart, tuned: int) -> str:
    return (
        f"{TUNING_REUSED} {POOL_SOURCE}: it compiled with the timings of {start.shapes} "
        f"GEMM/convolution shape(s) and {start.configs} Triton kernel config(s) that "
        "earlier cells of the run had tuned at hand, and benchmarked "
        f"{tuned} GEMM/convolution shape(s) itself; its compile time leaves out the "
        "tuning the pool spared"
    )


def reuse_kind(notes: str | None) -> str | None:
    """How a cell's notes say it reused tuning: "pool", "partner", or None (it tuned
    everything itself)."""
    if pool_counts(notes) is not None:
        return "pool"
    return "partner" if TUNING_REUSED in (notes or "") else None


def pool_counts(notes: str | None) -> tuple[int, int, int] | None:
    """From a cell's notes (``pooled_note``): the shapes and configs it had at hand from
    the pool and the shapes it benchmarked itself; None for a cell that found no pool."""
    found = _POOL_COUNTS.search(notes or "")
    return None if found is None else (int(found[1]), int(found[2]), int(found[3]))
