"""The backends a cell can compile with, importable without torch or jax.

Each entry says which worker process it needs (torch.compile and XLA never share one:
importing torchax breaks torch.compile in that process), the modes and steps it
supports, the devices and modes it cannot run on and why (dropped at plan time), a rough
time per cell, and where its implementation lives: a ``runner.backends.base.Backend``
named by import path, imported only inside the worker that runs it, so jax never loads
in a torch worker. Adding a backend is a module and an entry here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from runner.matrix.axes import MODE_OPTION, MODES, NO_MODE, PRECISION_CANNOT_RUN, base_mode
from runner.matrix.cells import CellConfig
from runner.matrix.fingerprint import TORCH_PROCESS, XLA_PROCESS
from runner.matrix.plugins import resolve
from runner.matrix.versions import installed
from runner.steps.registry import INFER, TRAIN
from runner.steps.registry import base as step_base

ANY_MODE = "*"
# Inductor configs a user can ask for beside a mode (torch._inductor.config): weights
# folded into the graph as constants (inference), and C++ instead of Python wrapper code.
INDUCTOR_OPTIONS = ("freezing", "cpp_wrapper")
EXPORT_MODES = ("non-strict", "strict")
AOT_INDUCTOR_MODES = ("default", "max-autotune")


@dataclass(frozen=True)
class BackendEntry:
    name: str
    # The worker process it runs in (runner.matrix.fingerprint.PROCESS_KINDS), which is
    # also what its cells' environment id covers.
    process: str
    # "module:Class" of its Backend; None for a backend listed but not built.
    implementation: str | None
    # Its modes (empty: it has none, and its cells record NO_MODE); the first is the one
    # its cells get when no --modes are asked for.
    modes: tuple[str, ...] = ()
    # Options a mode may carry, as ``MODE+OPTION[+OPTION]`` (inductor's configs beside its
    # modes: ``default+freezing``); the mode string is the cell's, so they key it.
    mode_options: tuple[str, ...] = ()
    steps: tuple[str, ...] = (INFER,)
    # Devices it cannot run on, and why.
    cannot_run_on: Mapping[str, str] = field(default_factory=dict)
    # (mode, device) pairs that cannot run, and why.
    mode_cannot_run: Mapping[tuple[str, str], str] = field(default_factory=dict)
    # Rough seconds per cell for --dry-run by (device, mode), ANY_MODE for the rest:
    # from costs measured on an H200 with 16 cores and on 2 CPU cores.
    estimate: Mapping[tuple[str, str], float] = field(default_factory=dict)
    # "module:function" answering (backend, device) -> why it cannot run here, or None,
    # from installed package metadata only: asked inside the worker, whose cell is then
    # ``unsupported`` with that reason.
    availability: str | None = None
    # How a bf16/fp16 cell's precision is applied: "autocast" (the model stays fp32) or
    # "cast" (model and inputs cast, eager side too: autocast does not cross into JAX).
    treatment: str = "autocast"
    # The Python lines that compile ``model`` into ``compiled`` as the cell did, for the
    # dashboard's reproduce snippet (runner.backends.reproduce fills the placeholders).
    snippet: str = "compiled = torch.compile(model, backend={backend}{mode}, dynamic={dynamic})"
    # Whether a failing cell of it can be triaged on the torch.compile backend ladder
    # (runner.triage): the torch.compile backends.
    ladder: bool = False
    # Why a listed backend without an implementation does not run; ``{version}`` is the
    # installed version of the distribution of its name.
    not_built: str | None = None
    # The modes whose compiled code replays CUDA graphs on CUDA (ANY_MODE: every cell):
    # their activations live in the graphs' private memory pool (runner.measure.subject).
    cuda_graphs: tuple[str, ...] = ()
    # "module:function" taking the environment workers start from and answering the
    # variables a worker running its cells must start with (computed in the parent,
    # without torch): cells whose backends ask for different ones never share a worker.
    worker_env: str | None = None
    # Whether its cells on the CPU build C++ kernels with the host's compiler, and the
    # modes or mode options (ANY_MODE: every cell) that build C++ on any device (a C++
    # wrapper, an AOTInductor package): Inductor probes the host's vector instructions
    # first (runner.measure.vec_isa).
    cpp_on_cpu: bool = False
    cpp_modes: tuple[str, ...] = ()

    def builds_cpp(self, device: str, mode: str) -> bool:
        """Whether a cell of ``mode`` on ``device`` builds C++ with the host's compiler."""
        if (device == "cpu" and self.cpp_on_cpu) or ANY_MODE in self.cpp_modes:
            return True
        return any(part in self.cpp_modes for part in mode.split(MODE_OPTION))

    def modes_for(self, asked: tuple[str, ...] | None) -> tuple[str, ...]:
        """The modes of its cells for the modes asked for (None: its default)."""
        if not self.modes:
            return (NO_MODE,)
        if asked is None:
            return self.modes[:1]
        return tuple(mode for mode in asked if self.accepts(mode))

    def accepts(self, mode: str) -> bool:
        """Whether ``mode`` (with its ``+options``) is one of this backend's."""
        base, *options = mode.split(MODE_OPTION)
        return (
            base in self.modes
            and len(set(options)) == len(options)
            and all(option in self.mode_options for option in options)
        )

    def describe_modes(self) -> str:
        """Its modes in words, for messages."""
        if not self.modes:
            return f"backend {self.name} has no modes"
        options = (
            f", each with options +{', +'.join(self.mode_options)}" if self.mode_options else ""
        )
        return f"backend {self.name}'s modes: {', '.join(self.modes)}{options}"

    def estimate_s(self, device: str, mode: str) -> float:
        base = base_mode(mode)
        return self.estimate.get((device, base), self.estimate.get((device, ANY_MODE), 20.0))

    def unavailable_reason(self, device: str) -> str | None:
        """Why the backend cannot run on ``device`` here, or None (imports nothing)."""
        if self.availability is not None:
            reason = resolve(self.availability)(self.name, device)
            if reason is not None:
                return reason
        return self.not_built.format(version=installed(self.name)) if self.not_built else None

    def load(self) -> type:
        """Its Backend class (imports what it needs: torch, or jax for XLA)."""
        if self.implementation is None:
            raise ValueError(f"backend {self.name} has no implementation: {self.not_built}")
        return resolve(self.implementation)


_OTHER = {("cuda", ANY_MODE): 20.0, ("cpu", ANY_MODE): 10.0}
_TORCH_COMPILE = "runner.backends.torch_compile:TorchCompile"
# torch.compile's backends train as they infer; the other routes infer only (for now).
_TRAINS = (INFER, TRAIN)
_XLA = "runner.backends.xla.jax_routes:JaxRoute"
_XLA_AVAILABILITY = "runner.backends.xla.support:unavailable_reason"
_XLA_WORKER_ENV = "runner.backends.xla.support:worker_env"

BACKENDS: dict[str, BackendEntry] = {
    entry.name: entry
    for entry in (
        BackendEntry(
            "inductor",
            TORCH_PROCESS,
            _TORCH_COMPILE,
            modes=MODES,
            mode_options=INDUCTOR_OPTIONS,
            steps=_TRAINS,
            ladder=True,
            cuda_graphs=("reduce-overhead", "max-autotune"),
            cpp_on_cpu=True,
            cpp_modes=("cpp_wrapper",),
            mode_cannot_run={
                ("reduce-overhead", "cpu"): (
                    "mode reduce-overhead uses CUDA graphs, which need CUDA (device is cpu)"
                ),
            },
            estimate={
                ("cuda", ANY_MODE): 45.0,
                ("cuda", "max-autotune"): 330.0,
                ("cuda", "max-autotune-no-cudagraphs"): 330.0,
                ("cpu", ANY_MODE): 40.0,
            },
        ),
        BackendEntry(
            "eager", TORCH_PROCESS, _TORCH_COMPILE, steps=_TRAINS, estimate=_OTHER, ladder=True
        ),
        BackendEntry(
            "aot_eager",
            TORCH_PROCESS,
            _TORCH_COMPILE,
            steps=_TRAINS,
            estimate=_OTHER,
            ladder=True,
        ),
        BackendEntry(
            "cudagraphs",
            TORCH_PROCESS,
            _TORCH_COMPILE,
            cannot_run_on={"cpu": "backend cudagraphs needs CUDA (device is cpu)"},
            cuda_graphs=(ANY_MODE,),
            steps=_TRAINS,
            estimate=_OTHER,
            ladder=True,
        ),
        # torch.export's program, run as exported (non-strict: today's default tracer;
        # strict: TorchDynamo's). A program exported under autocast keeps none of its
        # casts (measured on the H200: bf16 ViT-B/16 ran at 7x its autocast GPU time):
        # model and inputs are cast instead, as PyTorch's harness does for export.
        BackendEntry(
            "export",
            TORCH_PROCESS,
            "runner.backends.export:Export",
            modes=EXPORT_MODES,
            treatment="cast",
            snippet=(
                "with {precision}:\n"
                "    program = torch.export.export(model, inputs, strict={strict}{shapes})\n"
                "compiled = program.module()"
            ),
            estimate={("cuda", ANY_MODE): 25.0, ("cpu", ANY_MODE): 15.0},
        ),
        # Non-strict export, compiled ahead of time by Inductor into a package, loaded, run.
        BackendEntry(
            "aot_inductor",
            TORCH_PROCESS,
            "runner.backends.export:AotInductor",
            modes=AOT_INDUCTOR_MODES,
            treatment="cast",
            cpp_on_cpu=True,
            cpp_modes=(ANY_MODE,),
            snippet=(
                "with {precision}:\n"
                "    program = torch.export.export(model, inputs{shapes})\n"
                "package = torch._inductor.aoti_compile_and_package(program{configs})\n"
                "compiled = torch._inductor.aoti_load_package(package)"
            ),
            estimate={
                ("cuda", ANY_MODE): 60.0,
                ("cuda", "max-autotune"): 330.0,
                ("cpu", ANY_MODE): 90.0,
            },
        ),
        # torch modules under jax.jit through torchax, and torch.export -> JAX.
        BackendEntry(
            "xla",
            XLA_PROCESS,
            _XLA,
            estimate=_OTHER,
            availability=_XLA_AVAILABILITY,
            worker_env=_XLA_WORKER_ENV,
            treatment="cast",
            snippet=(
                "import jax\nimport torchax\n\n"
                "env = torchax.default_env()\n"
                "states, function = torchax.extract_jax(model)\n"
                "jitted = jax.jit(function)\n"
                "compiled = lambda *xs: env.j2t_copy(jitted(states, env.t2j_copy(xs)))"
            ),
        ),
        BackendEntry(
            "xla_export",
            XLA_PROCESS,
            _XLA,
            estimate=_OTHER,
            availability=_XLA_AVAILABILITY,
            worker_env=_XLA_WORKER_ENV,
            treatment="cast",
            snippet=(
                "import jax\nimport torchax\nimport torchax.export\n"
                "from torch.nn.attention import SDPBackend, sdpa_kernel\n\n"
                "env = torchax.default_env()\n"
                "with sdpa_kernel(SDPBackend.MATH):\n"
                "    program = torch.export.export(model, inputs{shapes})\n"
                "    states, function = torchax.export.exported_program_to_jax(program)\n"
                "jitted = jax.jit(function)\n"
                "compiled = lambda *xs: env.j2t_copy(jitted(states, env.t2j_copy(xs)))"
            ),
        ),
        BackendEntry(
            "torch_xla",
            XLA_PROCESS,
            None,
            estimate=_OTHER,
            availability=_XLA_AVAILABILITY,
            worker_env=_XLA_WORKER_ENV,
            treatment="cast",
            snippet="# torch_xla cells are not run by zoo-matrix: nothing to reproduce\ncompiled = model",
            # No torch_xla release pairs with the torch this project pins (torch_xla 2.9
            # needs torch 2.9), so there is nothing to build its run against yet.
            not_built="torch_xla {version} is installed, but zoo-matrix does not run torch_xla "
            "cells yet",
        ),
    )
}


def replays_cuda_graphs(backend: str, mode: str) -> bool:
    """Whether a cell of ``backend`` and ``mode`` replays CUDA graphs (on CUDA)."""
    graphs = get(backend).cuda_graphs
    return ANY_MODE in graphs or base_mode(mode) in graphs


def names() -> tuple[str, ...]:
    """Every backend, in the order a reader expects them."""
    return tuple(BACKENDS)


def get(name: str) -> BackendEntry:
    """The entry of ``name``. A name not listed is taken for a backend registered with
    dynamo (``torch._dynamo.list_backends()``, its testing backends included) and runs
    through torch.compile; the command line offers only the listed ones."""
    entry = BACKENDS.get(name)
    if entry is None:
        return BackendEntry(name, TORCH_PROCESS, _TORCH_COMPILE, steps=_TRAINS, ladder=True)
    return entry


def process_kind(backend: str) -> str:
    """The worker process a backend's cells run in."""
    return get(backend).process


# A worker's kind: its process kind and the variables it started with, sorted.
WorkerKind = tuple[str, tuple[tuple[str, str], ...]]


def worker_kind(backend: str, env: Mapping[str, str]) -> WorkerKind:
    """The kind of worker that runs ``backend``'s cells, started from ``env``."""
    entry = get(backend)
    extra = resolve(entry.worker_env)(env) if entry.worker_env else {}
    return entry.process, tuple(sorted(extra.items()))


def worker_group(backend: str) -> tuple[bool, str]:
    """What orders a plan's cells so that those of one worker kind run together: torch
    workers first, then by what they start with (no environment of their own first)."""
    entry = get(backend)
    return entry.process != TORCH_PROCESS, entry.worker_env or ""


def cannot_run(config: CellConfig, device: str) -> str | None:
    """Why a column cannot run on ``device`` at all (dropped at plan time), or None."""
    entry = get(config.backend)
    reason = entry.cannot_run_on.get(device) or entry.mode_cannot_run.get(
        (base_mode(config.mode), device)
    )
    if reason is not None:
        return reason
    if step_base(config.step) not in entry.steps:
        return f"backend {entry.name} does not run step {step_base(config.step)}"
    return PRECISION_CANNOT_RUN.get((config.precision, device))


def mode_problems(backends: tuple[str, ...], modes: tuple[str, ...]) -> list[str]:
    """What is wrong with asking these backends for these modes: a mode no backend has,
    or a backend with modes that has none of them. Empty when the request makes sense."""
    moded = [entry for entry in map(get, backends) if entry.modes]
    if not moded:
        return []  # backends without modes ignore them
    problems = [
        f"mode {mode!r} is no mode of {', '.join(entry.name for entry in moded)}; "
        + "; ".join(entry.describe_modes() for entry in moded)
        for mode in modes
        if not any(entry.accepts(mode) for entry in moded)
    ]
    problems += [
        f"backend {entry.name} has none of the modes {', '.join(modes)}; {entry.describe_modes()}"
        for entry in moded
        if not entry.modes_for(modes) and not problems
    ]
    return problems
