"""Inductor's probe of the host's vector instructions, done once per machine instead
of inside a cell's compile.

Before Inductor first builds C++ in a process (a CPU cell's kernels, the wrapper of a
cpp_wrapper or AOTInductor cell), it asks which SIMD instruction sets of those the CPU
advertises the host's compiler can build and load: one small program per candidate,
each built into the Inductor cache directory and loaded in a fresh Python process. On
2 cores that is ~45 s (ten Python processes importing torch), once per process, and
every cell's cache directory is a fresh one (``runner.measure.isolation``). Left alone,
the first such cell of every worker counted the probe as its compile time.

The answer belongs to the machine (its CPU, compiler and torch), so it is probed once,
before any cell's compile, kept in a file named by what it depends on, and handed to
Inductor (and to the processes a cell starts, such as the minifier's) through
``TORCHINDUCTOR_VEC_ISA_OK=1``: Inductor's own switch for "use what the CPU advertises,
without testing", set only when the probe found that every advertised set builds.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import tempfile
from pathlib import Path

import torch

VEC_ISA_OK_ENV = "TORCHINDUCTOR_VEC_ISA_OK"
_INDUCTOR_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"


def cache_dir() -> Path:
    """Where the answers are kept: the user's cache directory."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "zoo-matrix"


def advertised() -> list[str]:
    """Inductor's candidate sets the CPU advertises, best first (no build)."""
    from torch._inductor import cpu_vec_isa

    flags = set(cpu_vec_isa.x86_isa_checker())
    return [
        str(isa)
        for isa in cpu_vec_isa.supported_vec_isa_list
        if all(flag in flags for flag in str(isa).split())
    ]


def _compiler() -> str:
    from torch._inductor.cpp_builder import get_cpp_compiler

    name = get_cpp_compiler()
    path = shutil.which(name) or name
    try:
        stat = os.stat(os.path.realpath(path))
    except OSError:
        return path
    return f"{os.path.realpath(path)}:{stat.st_size}:{int(stat.st_mtime)}"


def answer_path(candidates: list[str]) -> Path:
    """The file of this machine's answer: named by the CPU's sets, the compiler and torch."""
    key = json.dumps([torch.__version__, platform.machine(), candidates, _compiler()])
    return cache_dir() / f"inductor-vec-isa-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def _probe() -> list[str]:
    """Inductor's probe itself, its builds in a directory of their own."""
    from torch._inductor import cpu_vec_isa

    saved = os.environ.get(_INDUCTOR_CACHE_ENV)
    directory = tempfile.mkdtemp(prefix="zoo-vec-isa-")
    os.environ[_INDUCTOR_CACHE_ENV] = directory
    try:
        return [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()]
    finally:
        if saved is None:
            os.environ.pop(_INDUCTOR_CACHE_ENV, None)
        else:
            os.environ[_INDUCTOR_CACHE_ENV] = saved
        shutil.rmtree(directory, ignore_errors=True)


def _read(path: Path) -> list[str] | None:
    try:
        found = json.loads(path.read_text()).get("builds")
    except (OSError, ValueError, AttributeError):
        return None
    return found if isinstance(found, list) else None


def _accept(candidates: list[str], builds: list[str]) -> bool:
    """Skip Inductor's probe in this process and its children when it found every
    advertised set builds; otherwise leave Inductor to probe as it does."""
    if not candidates or builds != candidates:
        return False
    from torch._inductor import config

    os.environ[VEC_ISA_OK_ENV] = "1"
    config.cpp.vec_isa_ok = True
    return True


def _x86() -> bool:
    return platform.machine() in ("x86_64", "AMD64")


def known() -> bool:
    """Use this machine's recorded answer, if there is one (reads a file, builds
    nothing); whether Inductor's probe is now skipped. A ``TORCHINDUCTOR_VEC_ISA_OK``
    already set (by the user, or by the process that started this one) stands."""
    if os.environ.get(VEC_ISA_OK_ENV) is not None or not _x86():
        return os.environ.get(VEC_ISA_OK_ENV) == "1"
    candidates = advertised()
    builds = _read(answer_path(candidates))
    return builds is not None and _accept(candidates, builds)


def ensure() -> bool:
    """This machine's answer, probed now if nobody recorded it yet (one process probes,
    the others wait for its answer); whether Inductor's probe is now skipped. Called
    before a cell that builds C++, outside its compile."""
    if os.environ.get(VEC_ISA_OK_ENV) is not None or not _x86():
        return known()
    candidates = advertised()
    path = answer_path(candidates)
    builds = _read(path)
    if builds is None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            lock = open(path.with_suffix(".lock"), "a")  # noqa: SIM115 - held across the probe
        except OSError:
            # Nowhere to keep it: probed for this process alone.
            return _accept(candidates, _probe())
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            builds = _read(path)
            if builds is None:
                builds = _probe()
                record = {"torch": torch.__version__, "advertised": candidates, "builds": builds}
                tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
                with contextlib.suppress(OSError):
                    tmp.write_text(json.dumps(record))
                    os.replace(tmp, path)
    return _accept(candidates, builds)
