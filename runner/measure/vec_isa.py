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

That switch skips each set's own check, not the checks of the sets' features (AVX512's
bf16, VNNI, AMX tiles, AMX fp16), which build and load a program each and have no
switch: ~18 s a process on 2 cores, paid again by every process whose first cell builds
C++. The probe records their answers too, and a process that reads the record answers
them from it (``_serve``); the processes a cell starts still make them.
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
# The record's format, part of its file's name: 2 added the feature checks' answers.
RECORD_FORMAT = 2
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
    """The file of this machine's answer: named by the CPU's sets, the compiler, torch and
    the record's format."""
    key = json.dumps(
        [RECORD_FORMAT, torch.__version__, platform.machine(), candidates, _compiler()]
    )
    return cache_dir() / f"inductor-vec-isa-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def _check_key(isa, code: str) -> str:
    """One of Inductor's build-and-load checks: the set, the flags it builds with (a
    feature's check adds its own) and the program."""
    what = f"{type(isa).__name__}\n{isa._arch_flags}\n{code}"
    return hashlib.sha256(what.encode()).hexdigest()[:16]


def _probe() -> tuple[list[str], dict[str, bool]]:
    """Inductor's probe itself, its builds in a directory of their own: the sets that
    build, and the answer of every build-and-load check it made (``_check_key``)."""
    from torch._inductor import cpu_vec_isa

    checks: dict[str, bool] = {}
    cls = cpu_vec_isa.VecISA
    served = cls.__dict__["check_build"]
    original = getattr(served, "_zoo_original", served)

    def recording(self, code: str) -> bool:
        checks[_check_key(self, code)] = answer = original(self, code)
        return answer

    saved = os.environ.get(_INDUCTOR_CACHE_ENV)
    directory = tempfile.mkdtemp(prefix="zoo-vec-isa-")
    os.environ[_INDUCTOR_CACHE_ENV] = directory
    cls.check_build = recording
    try:
        _forget(cpu_vec_isa)
        return [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()], checks
    finally:
        cls.check_build = served
        _forget(cpu_vec_isa)
        if saved is None:
            os.environ.pop(_INDUCTOR_CACHE_ENV, None)
        else:
            os.environ[_INDUCTOR_CACHE_ENV] = saved
        shutil.rmtree(directory, ignore_errors=True)


def _forget(cpu_vec_isa) -> None:
    """Inductor's answers cached in this process (the valid sets, each set's truth and
    features), so that they are asked again."""
    cpu_vec_isa.valid_vec_isa_list.cache_clear()
    for isa in cpu_vec_isa.supported_vec_isa_list:
        for cls in type(isa).__mro__:
            for member in vars(cls).values():
                if hasattr(member, "cache_clear"):
                    member.cache_clear()


def _read(path: Path) -> tuple[list[str], dict[str, bool]] | None:
    try:
        record = json.loads(path.read_text())
        builds, checks = record.get("builds"), record.get("checks")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(builds, list) or not isinstance(checks, dict):
        return None
    return builds, checks


def _serve(checks: dict[str, bool]) -> None:
    """Answer Inductor's build-and-load checks in this process from ``checks`` where they
    hold the check. Beside each set's own check (which ``TORCHINDUCTOR_VEC_ISA_OK`` skips),
    the sets check their features (AVX512's bf16, VNNI, AMX tiles and fp16) with no switch
    to skip them: each a build and a Python process loading it, ~18 s a process on 2
    cores, for every process whose first cell builds C++. A process this one starts asks
    again (the minifier's own processes)."""
    from torch._inductor import cpu_vec_isa

    cls = cpu_vec_isa.VecISA
    current = cls.__dict__["check_build"]
    served = getattr(current, "_zoo_served", None)
    if served is not None:
        served.update(checks)
        return
    served = dict(checks)

    def check_build(self, code: str, _original=current) -> bool:
        answer = served.get(_check_key(self, code))
        return _original(self, code) if answer is None else bool(answer)

    check_build._zoo_served = served
    check_build._zoo_original = current
    cls.check_build = check_build


def _serving() -> bool:
    """Whether this process answers the feature checks from a record already."""
    from torch._inductor import cpu_vec_isa

    return hasattr(cpu_vec_isa.VecISA.__dict__["check_build"], "_zoo_served")


def _accept(candidates: list[str], builds: list[str], checks: dict[str, bool]) -> bool:
    """Skip Inductor's probe in this process and its children when it found every
    advertised set builds, and its feature checks in this process; otherwise leave
    Inductor to probe as it does."""
    if not candidates or builds != candidates:
        return False
    from torch._inductor import config

    os.environ[VEC_ISA_OK_ENV] = "1"
    config.cpp.vec_isa_ok = True
    _serve(checks)
    return True


def _x86() -> bool:
    return platform.machine() in ("x86_64", "AMD64")


def known() -> bool:
    """Use this machine's recorded answer, if there is one (reads a file, builds
    nothing); whether Inductor's probe is now skipped. A ``TORCHINDUCTOR_VEC_ISA_OK``
    already set (by the user, or by the process that started this one) stands; set to
    1, the recorded feature checks are still served."""
    switch = os.environ.get(VEC_ISA_OK_ENV)
    if not _x86():
        return switch == "1"
    if switch == "1" and _serving():
        return True  # read already, by this process's first cell
    candidates = advertised()
    record = _read(answer_path(candidates))
    if switch is not None:
        if switch == "1" and record is not None:
            _serve(record[1])
        return switch == "1"
    return record is not None and _accept(candidates, *record)


def ensure() -> bool:
    """This machine's answer, probed now if nobody recorded it yet (one process probes,
    the others wait for its answer); whether Inductor's probe is now skipped. Called
    before a cell that builds C++, outside its compile."""
    if os.environ.get(VEC_ISA_OK_ENV) is not None or not _x86():
        return known()
    candidates = advertised()
    path = answer_path(candidates)
    record = _read(path)
    if record is None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            lock = open(path.with_suffix(".lock"), "a")  # noqa: SIM115 - held across the probe
        except OSError:
            # Nowhere to keep it: probed for this process alone.
            return _accept(candidates, *_probe())
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            record = _read(path)
            if record is None:
                record = _probe()
                builds, checks = record
                answer = {
                    "torch": torch.__version__,
                    "advertised": candidates,
                    "builds": builds,
                    "checks": checks,
                }
                tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
                with contextlib.suppress(OSError):
                    tmp.write_text(json.dumps(answer))
                    os.replace(tmp, path)
    return _accept(candidates, *record)
