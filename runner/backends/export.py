"""Deployment routes: ``torch.export`` of the program, run as exported (``export``, modes
``non-strict`` and ``strict``), and the exported program compiled ahead of time by
Inductor into a package that is loaded and run (``aot_inductor``, modes ``default`` and
``max-autotune``).

An exported program is one graph or nothing: it has no graph breaks, and a model that
does not export fails the cell in phase ``export`` with the error; for such a model
``torch.export.draft_export`` says what stood in the way (its issue kinds are kept with
the cell). Dynamic cells export every input dim as ``Dim.AUTO`` (torch.export decides
which stay static; the cell records the ones it made dynamic), and the shape probe calls
the same program on the halved inputs: it runs or it fails, with no recompile.
"""

from __future__ import annotations

import collections
import ctypes
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from runner.backends.base import Backend, Compiled
from runner.matrix.axes import base_mode
from runner.matrix.phases import AOT_COMPILE, COMPILE, EXPORT, LOAD_PACKAGE, RUN_EXPORTED
from runner.measure.context import CellContext
from runner.measure.failure import signature
from runner.measure.subject import Subject

STRICT = "strict"
PACKAGE = "model.pt2"


class Export(Backend):
    """``torch.export.export`` of the program, strict or not; the exported module runs."""

    def compile(
        self,
        subject: Subject,
        program: torch.nn.Module,
        outputs: Callable[[Any], list],
        eager_once_s: float,
    ) -> Compiled:
        self.ctx.enter(COMPILE)
        started = time.perf_counter()
        exported = export_program(
            self.ctx, subject, program, strict=base_mode(self.config.mode) == STRICT
        )
        export_s = time.perf_counter() - started
        compiled = ExportedProgram(self.ctx, subject, exported.module(), outputs, RUN_EXPORTED)
        compiled.compile_s = export_s
        compiled.first_call_s = export_s + compiled.first_call_s
        self.ctx.note(f"torch.export {export_s:.2f} s")
        return compiled


class AotInductor(Backend):
    """Non-strict export, ``aoti_compile_and_package`` into the cell's own temporary
    folder, ``aoti_load_package``, run; ``max-autotune`` autotunes its kernels (under
    the GPU lock, as Inductor's benchmarking always is in a worker)."""

    def compile(
        self,
        subject: Subject,
        program: torch.nn.Module,
        outputs: Callable[[Any], list],
        eager_once_s: float,
    ) -> Compiled:
        ctx = self.ctx
        ctx.enter(COMPILE)
        started = time.perf_counter()
        exported = export_program(ctx, subject, program, strict=False)
        export_s = time.perf_counter() - started
        ctx.enter(AOT_COMPILE)
        folder = Path(tempfile.mkdtemp(prefix="zoo-aoti-"))
        try:
            configs = {"max_autotune": True} if self.config.mode == "max-autotune" else None
            package = torch._inductor.aoti_compile_and_package(
                exported, package_path=str(folder / PACKAGE), inductor_configs=configs
            )
            ctx.enter(LOAD_PACKAGE)
            library = global_libstdcxx()
            loaded = torch._inductor.aoti_load_package(package)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        compile_s = time.perf_counter() - started
        compiled = ExportedProgram(ctx, subject, loaded, outputs, RUN_EXPORTED, folder)
        compiled.compile_s = compile_s
        compiled.first_call_s = compile_s + compiled.first_call_s
        ctx.note(
            f"torch.export {export_s:.2f} s, AOT compile and load {compile_s - export_s:.2f} s"
        )
        if library is not None:
            ctx.note(f"package loaded with {library} in the global scope")
        return compiled


def global_libstdcxx() -> str | None:
    """Puts the process's libstdc++ into its global symbol scope, where a package's
    standard-library calls find it first; returns its path (None where the process has
    none loaded, or not from a file).

    torch's own libraries export copies of some libstdc++ internals (``std::filesystem::
    path``'s, under ``libtorch_cpu.so``) built by another GCC. Where libstdc++ is not
    global (it is loaded as a dependency of torch's extension, local to it), a package
    built here by a newer ``g++`` binds those calls to torch's copies: on the H200 hosts
    we measure on, every package crashed at load so (benchmarks/aoti_probe/exporter.sh
    lists which symbols went where). Opening the already loaded library again with
    ``RTLD_GLOBAL`` (``RTLD_NOLOAD``: never a second copy) fixes that as ``LD_PRELOAD``
    of it did, without restarting the process."""
    maps = Path("/proc/self/maps")
    if not maps.exists():
        return None
    loaded = {line.split()[-1] for line in maps.read_text().splitlines() if "libstdc++.so" in line}
    for path in sorted(loaded):
        if path.startswith("/"):
            try:
                ctypes.CDLL(path, mode=os.RTLD_GLOBAL | os.RTLD_NOLOAD)
            except OSError:
                continue
            return path
    return None


def export_program(
    ctx: CellContext, subject: Subject, program: torch.nn.Module, *, strict: bool
) -> torch.export.ExportedProgram:
    """The program exported with the cell's inputs under its precision (autocast is
    traced into the graph); the graph's size and dynamic dims go into the row. A program
    that does not export is looked at with ``draft_export`` before the error is raised."""
    ctx.enter(EXPORT)
    dynamic = dynamic_shapes(subject.inputs) if ctx.cell.config.dynamic != "false" else None
    try:
        with subject.autocast():
            exported = torch.export.export(
                program, subject.inputs, dynamic_shapes=dynamic, strict=strict
            )
    except Exception:
        ctx.result.export_issues = draft_issues(ctx, subject, program, dynamic)
        raise
    ops = sum(node.op == "call_function" for node in exported.graph.nodes)
    ctx.result.graph_nodes = len(exported.graph.nodes)
    ctx.result.graph_ops = ops
    if dynamic is not None:
        ctx.result.dynamic_dims = json.dumps(exported_dynamic_dims(exported))
    return exported


def dynamic_shapes(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """Every dim of every tensor input may vary; torch.export decides which stay static."""
    return tuple(
        {dim: torch.export.Dim.AUTO for dim in range(x.dim())}
        if isinstance(x, torch.Tensor)
        else None
        for x in inputs
    )


def exported_dynamic_dims(exported: torch.export.ExportedProgram) -> list[list[int]]:
    """Per user input of the program, the dims it was exported with as symbolic."""
    users = set(exported.graph_signature.user_inputs)
    dims = []
    for node in exported.graph.nodes:
        if node.op != "placeholder" or node.name not in users:
            continue
        value = node.meta.get("val")
        shape = getattr(value, "shape", ())
        dims.append([dim for dim, size in enumerate(shape) if not isinstance(size, int)])
    return dims


def draft_issues(
    ctx: CellContext, subject: Subject, program: torch.nn.Module, dynamic: Any
) -> str | None:
    """What ``torch.export.draft_export`` reports for a program that did not export:
    ``{"issue kind": count}`` as JSON; None where it fails itself (noted)."""
    try:
        with subject.autocast():
            draft = torch.export.draft_export(program, subject.inputs, dynamic_shapes=dynamic)
    except Exception as exc:
        ctx.note(f"draft_export failed too: {signature(exc)}")
        return None
    kinds = collections.Counter(failure.failure_type.name for failure in draft._report.failures)
    ctx.note(
        "draft_export: "
        + (", ".join(f"{count} {kind}" for kind, count in kinds.items()) or "no issue found")
    )
    return json.dumps(dict(kinds))


class ExportedProgram(Compiled):
    """An exported program's module (or an AOTInductor package's runner); its first call
    runs on construction. Its calls run with autocast off: the program holds the casts
    autocast made while it was exported."""

    def __init__(
        self,
        ctx: CellContext,
        subject: Subject,
        module: Callable[..., Any],
        outputs: Callable[[Any], list],
        first_phase: str,
        folder: Path | None = None,
    ) -> None:
        self.subject = subject
        self.module = module
        self.folder = folder
        self.first_graphs = 1
        ctx.phase = first_phase
        self.first_call(subject, outputs)

    def __call__(self, inputs: tuple[Any, ...]) -> Any:
        with torch.autocast(self.subject.device.type, enabled=False):
            return self.module(*inputs)

    def run(self) -> Any:
        return self(self.subject.inputs)

    def graphs(self) -> int:
        return 1  # exported once; other shapes run or fail, nothing recompiles

    def record_graph_breaks(self, ctx: CellContext) -> None:
        ctx.result.graph_count = 1
        ctx.result.graph_break_count = 0
        ctx.result.unique_break_count = 0

    def close(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
