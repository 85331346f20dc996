"""Where a failing cell breaks: the backend ladder, climbed on its own.

PyTorch's troubleshooting guide has users climb it by hand: ``eager`` (dynamo alone),
``aot_eager`` (plus AOTAutograd), ``aot_eager_decomp_partition`` (plus Inductor's
decompositions and the partitioner), then the failing backend. The first rung whose cell
fails (or fails the accuracy rule) names the stage: dynamo, AOT autograd,
decompositions/partitioning, or the backend itself. Each rung is the same cell under that
backend, checked only (build, reference, eager, compile, accuracy: no timing), in the
worker that runs the triage job; the cell's own row keeps its status and gains the rung.

With ``bisect``, a cell whose rung is Inductor then runs Inductor's compiler bisector
(``torch._inductor.compiler_bisector``), which recompiles the cell with ever fewer
Inductor passes and lowerings enabled until it finds the first one that makes it fail:
the subsystem it names is kept in the row. It is bounded in time (``BISECT_BUDGET_S``).

With ``minify``, a cell whose failure reaches a backend's graph (every rung above dynamo)
is compiled once more with dynamo's minifier armed (``repro_after``: after AOT autograd
for Inductor, after dynamo for the other rungs; ``repro_level`` 4, the accuracy check, for
``fail_accuracy``, else 2); the launcher it writes is run in a child process, which
shrinks the graph while the failure persists and writes ``repro.py`` (trying each smaller
graph in that process for a failure Python reports, in one of its own for a crash). The
script is kept in the row (``triage_repro``, its inputs drawn at random: no saved tensors
travel with it) and run once to check that it still fails. Bounded by
``MINIFY_BUDGET_S``.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from runner.backends import registry as backends
from runner.cell import measure_cell
from runner.matrix.axes import NO_MODE
from runner.matrix.cells import Cell, CellConfig
from runner.matrix.holds import UNTIMED
from runner.matrix.results import (
    COMPILE_ERROR,
    FAIL_ACCURACY,
    PASS,
    TRIAGED_STATUSES,
    CellResult,
)
from runner.measure.context import Gate, no_gate
from runner.measure.host import SCRATCH_DIR_ENV
from runner.measure.isolation import cold_compile_caches

LADDER = ("eager", "aot_eager", "aot_eager_decomp_partition")
RUNG_STAGE = {
    "eager": "fails in dynamo",
    "aot_eager": "fails in AOT autograd",
    "aot_eager_decomp_partition": "fails in decompositions/partitioning",
}
# Statuses a compiler can be blamed for: triage climbs the ladder for these.
TRIAGED = TRIAGED_STATUSES
NOT_AGAIN = "did not fail again"
# Cell.extra's entry that makes a worker triage the cell instead of measuring it; its
# value is the triage mode.
TRIAGE = "triage"
# Cell.extra's entry of a triage job for a cell already recorded without a verdict: that
# row (``CellResult.to_dict``), which the verdict joins. The cell is not measured again.
RECORDED = "recorded"
LADDER_ONLY = "ladder"
BISECT = "bisect"
MINIFY = "minify"
MODES = (LADDER_ONLY, BISECT, MINIFY)
PHASE_PREFIX = "triage "
BISECT_PHASE = "triage bisect"
MINIFY_PHASE = "triage minify"
BISECT_BUDGET_S = 600.0
MINIFY_BUDGET_S = 900.0
# Where --trace puts each traced cell's folder (set by zoo-run, read in the worker).
TRACE_DIR_ENV = "ZOO_TRACE_DIR"
TRACE_PHASE = "triage trace"
TLPARSE_S = 120.0
# The most of a cell's compile that a ladder rung below its backend is priced at
# (``rung_below_s``).
LADDER_COMPILE_SHARE = 0.5
# The failures the minifier shrinks in its own process (``--no-isolate``): Python reports
# them, so a smaller graph that fails leaves the minifier standing. A process per try (the
# default, kept for a crash, which would take the minifier down with it) costs a Python
# start, torch's import and Inductor's ISA feature checks a try: the minifier test's
# relu-and-add graph took 9 tries, ~20-30 s each, on 2 cores.
IN_PROCESS_MINIFY = (FAIL_ACCURACY, COMPILE_ERROR)
# The repro's own check run, after minifying.
REPRO_CHECK_S = 300.0
# The most of a repro script a row keeps.
REPRO_CHARS = 200_000


def job_timeout(cell: Cell, mode: str) -> float:
    """How long a triage job of ``cell`` may run: each rung as long as the cell may,
    plus the bisector's or the minifier's budget."""
    return job_seconds(cell, mode, cell.timeout_s)


def job_seconds(cell: Cell, mode: str, rung_s: float, below_s: float | None = None) -> float:
    """A triage job of ``cell`` at ``rung_s`` a rung: each rung runs the cell once, then
    the bisector or the minifier may take its budget. ``below_s``: what each rung below
    the cell's own backend takes, where that is known to be less (``rung_s`` if not)."""
    extra = {BISECT: BISECT_BUDGET_S, MINIFY: MINIFY_BUDGET_S + REPRO_CHECK_S}.get(mode, 0.0)
    below = rung_s if below_s is None else below_s
    return below * (len(rungs(cell)) - 1) + rung_s + extra


def failed_job_s(job: Cell, failed: CellResult) -> float:
    """What the triage job ``job`` of the failing row ``failed`` likely takes: that
    cell's own time per rung (a large model's triage is several of its compiles, not a
    run's median cell), less for the rungs below its backend where its compile ended
    (``rung_below_s``)."""
    return job_seconds(job, job.extra[TRIAGE], failed.wall_s or 0.0, rung_below_s(failed))


def rung_below_s(result: CellResult) -> float | None:
    """What a ladder rung below the backend likely takes for the cell of ``result``, a
    measured cell whose compile ended (it failed the accuracy check): its wall time less
    the part of its compile that only the backend does. The rungs trace the model as the
    backend does but lower nothing (hrnet_w18, one thread of this 2-core CPU: dynamo 18 s,
    aot_eager 25 s, aot_eager_decomp_partition 33 s; its Inductor compile on the H200
    took 108 s); ``LADDER_COMPILE_SHARE`` of the compile bounds them. None where the
    compile did not end, or took no time: each rung is then priced as the whole cell."""
    if result.status != FAIL_ACCURACY or not result.compile_s or result.wall_s is None:
        return None
    return max(0.0, result.wall_s - (1.0 - LADDER_COMPILE_SHARE) * result.compile_s)


def job_of_recorded(cell: Cell, mode: str, run_id: str, recorded: CellResult) -> Cell:
    """The triage job of ``cell``, recorded in run ``run_id`` as ``recorded`` with no
    verdict (none was asked for, or a run's end cut its job off): the ladder alone. Its
    row is the recorded one, measurements and times as they were, with the verdict and a
    note saying where it was measured: measuring the cell again would cost a run its
    whole time once more, and a large model's job would then not fit a chunked sweep's
    time limit, run after run."""
    row = CellResult.from_dict(recorded.to_dict())
    row.triage_rung = row.triage_detail = None
    note = f"measured in run {run_id}; this row adds the triage verdict of a later run"
    row.add_note(note)
    return replace(
        cell,
        timeout_s=job_timeout(cell, mode),
        extra={**cell.extra, TRIAGE: mode, RECORDED: row.to_dict()},
    )


def wants_triage(cell: Cell, result: CellResult) -> bool:
    """Whether a result is one the ladder can place: a torch.compile cell that failed."""
    return (
        result.status in TRIAGED
        and backends.get(cell.config.backend).ladder
        and not cell.extra.get(TRIAGE)
    )


def rungs(cell: Cell) -> list[CellConfig]:
    """The ladder's configs below the cell's backend, then the cell's own."""
    config = cell.config
    below = LADDER[: LADDER.index(config.backend)] if config.backend in LADDER else LADDER
    return [
        CellConfig(backend, NO_MODE, config.dynamic, config.precision, config.step)
        for backend in below
    ] + [config]


def stage(config: CellConfig) -> str:
    return stage_of(config.backend)


def stage_of(backend: str) -> str:
    """What a rung failing under ``backend`` says of the failure."""
    return RUNG_STAGE.get(backend, f"fails in {backend}")


def ladder(
    cell: Cell, *, report_phase: Callable[[str], None] = lambda phase: None, gate: Gate = no_gate
) -> CellResult:
    """The triage of ``cell``: a result carrying only its identity and the ladder's verdict
    (``triage_rung``, ``triage_detail``: the failing rung's error signature or status)."""
    verdict = CellResult.for_cell(cell, status=PASS, triage_rung=NOT_AGAIN)
    for config in rungs(cell):
        report_phase(PHASE_PREFIX + config.backend)
        rung = measure_cell(with_config(cell, config), gate=gate, checks_only=True)
        if rung.status != PASS:
            verdict.triage_rung = stage(config)
            verdict.triage_detail = rung.error_signature or rung.status
            mode = cell.extra.get(TRIAGE)
            if trace_root := os.environ.get(TRACE_DIR_ENV):
                report_phase(TRACE_PHASE)
                verdict.triage_trace = trace(
                    with_config(cell, config), gate, Path(trace_root) / cell.key
                )
            if config.backend == "inductor" and mode == BISECT:
                report_phase(BISECT_PHASE)
                verdict.triage_bisect = bisect(with_config(cell, config), gate)
            elif mode == MINIFY:
                report_phase(f"{MINIFY_PHASE} {config.backend}")
                verdict.triage_minify, verdict.triage_repro = minify(
                    with_config(cell, config),
                    gate,
                    accuracy=rung.status == FAIL_ACCURACY,
                    isolate=rung.status not in IN_PROCESS_MINIFY,
                )
            break
    return verdict


def with_config(cell: Cell, config: CellConfig) -> Cell:
    return Cell(
        cell.spec,
        config,
        cell.size,
        cell.batch_size,
        cell.seq_len,
        cell.device,
        cell.env_id,
        cell.timeout_s,
        cell.extra,
    )


class _OutOfTime(Exception):
    pass


def bisect(cell: Cell, gate: Gate, budget_s: float = BISECT_BUDGET_S) -> str:
    """What Inductor's compiler bisector names for a cell that fails under Inductor:
    ``backend/subsystem`` (and the pass number and what it says), or why it named none."""
    import time

    from torch._inductor.compiler_bisector import CompilerBisector

    deadline = time.monotonic() + budget_s
    runs = 0

    def passes() -> bool:
        nonlocal runs
        if time.monotonic() > deadline:
            raise _OutOfTime
        runs += 1
        return measure_cell(cell, gate=gate, checks_only=True).status == PASS

    try:
        found = CompilerBisector.do_bisect(passes)
    except _OutOfTime:
        return f"no answer within {budget_s:.0f} s ({runs} compiles)"
    except Exception as exc:
        return f"the bisector failed after {runs} compiles: {type(exc).__name__}: {exc}"[:300]
    if found is None:
        return f"no subsystem found ({runs} compiles): the failure may not be Inductor's"
    number = f" #{found.bisect_number}" if found.bisect_number is not None else ""
    debug = f": {found.debug_info}" if found.debug_info else ""
    return f"{found.backend}/{found.subsystem}{number}{debug} ({runs} compiles)"[:300]


def trace(cell: Cell, gate: Gate, folder: Path) -> str:
    """The cell compiled once more with torch's structured trace logged in ``folder``
    (as ``TORCH_TRACE`` would), and tlparse's report made from it
    where tlparse is installed: a line naming the files."""
    import logging
    import shutil

    from torch._logging._internal import LazyTraceHandler, TorchLogsFormatter, trace_log

    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    handler = LazyTraceHandler(str(folder))
    handler.setFormatter(TorchLogsFormatter(trace=True))
    level, propagate = trace_log.level, trace_log.propagate
    trace_log.addHandler(handler)
    trace_log.setLevel(logging.DEBUG)
    trace_log.propagate = False
    try:
        measure_cell(cell, gate=gate, checks_only=True)
    finally:
        trace_log.removeHandler(handler)
        handler.close()
        trace_log.setLevel(level)
        trace_log.propagate = propagate
    logs = sorted(folder.glob("*.log"))
    if not logs:
        return f"no trace was written (in {folder})"
    log = logs[0]
    tlparse = shutil.which("tlparse")
    if tlparse is None:
        return f"trace {log}; tlparse is not installed (pip install tlparse; tlparse {log})"
    report = folder / "tlparse"
    ran = _run_child(
        [tlparse, str(log), "-o", str(report), "--no-browser", "--overwrite"],
        cwd=folder,
        timeout_s=TLPARSE_S,
    )
    if ran is None:
        return f"trace {log}; tlparse did not end within {TLPARSE_S:.0f} s"
    index = report / "index.html"
    if ran.returncode or not index.exists():
        return f"trace {log}; tlparse failed: {(ran.stderr or ran.stdout).strip()[-200:]}"
    return f"trace {log}; tlparse report {index}"


def minify(
    cell: Cell,
    gate: Gate,
    *,
    accuracy: bool,
    isolate: bool = True,
    budget_s: float = MINIFY_BUDGET_S,
) -> tuple[str, str | None]:
    """Dynamo's minifier on a cell that fails under its (rung's) backend: a line saying
    what it found, and the repro script (None when it wrote none). With ``isolate``, the
    minifier tries each smaller graph in a process of its own (torch's default), else all
    of them in the minifier's process (``IN_PROCESS_MINIFY``)."""
    if cell.config.backend == "eager":
        return "not minified: the failure is dynamo's own, before any graph exists", None
    import torch._dynamo.config as dynamo_config

    # Fresh compile caches for the armed compile and the minifier's processes, even with
    # warm caches asked for: a cache hit would skip the compile the minifier hooks into.
    with (
        cold_compile_caches(always=True),
        tempfile.TemporaryDirectory(prefix="minify-", dir=os.environ.get(SCRATCH_DIR_ENV)) as tmp,
    ):
        folder = Path(tmp)
        armed = {
            "debug_dir_root": str(folder / "debug"),
            "repro_after": "aot" if cell.config.backend == "inductor" else "dynamo",
            "repro_level": 4 if accuracy else 2,
        }
        work = folder / "work"
        work.mkdir()
        started = time.monotonic()
        # The minifier copies what it writes into the working directory, too.
        with dynamo_config.patch(armed), contextlib.chdir(work):
            again = measure_cell(cell, gate=gate, checks_only=True)
        launchers = sorted((folder / "debug").rglob("minifier_launcher.py"))
        if not launchers:
            return (
                f"not minified: the armed compile ({again.status}) wrote no launcher; the "
                "failure did not show in the graph the backend got",
                None,
            )
        (work / "repro.py").unlink(missing_ok=True)
        left = budget_s - (time.monotonic() - started)
        # Untimed work on the GPU: beside other untimed work, never beside timing.
        with gate(UNTIMED):
            minified = _run_child(
                [
                    sys.executable,
                    str(launchers[0]),
                    "minify",
                    *([] if isolate else ["--no-isolate"]),
                ],
                work,
                max(left, 1.0),
            )
        if minified is None:
            return f"no minimal repro within {budget_s:.0f} s", None
        spent = time.monotonic() - started
        repro = work / "repro.py"
        if not repro.exists():
            return f"the minifier wrote no repro ({spent:.0f} s)", None
        # Its inputs were saved beside it; without that folder they are drawn at random.
        text = re.sub(r"save_dir='[^']*'", "save_dir=None", repro.read_text())
        repro.write_text(text)
        # The minifier's checkpoints are named by their graph's node count.
        checkpoints = (folder / "debug").glob("**/checkpoints/*.py")
        nodes = min((int(path.stem) for path in checkpoints if path.stem.isdigit()), default=None)
        with gate(UNTIMED):
            check = _run_child([sys.executable, str(repro)], work, REPRO_CHECK_S)
        if check is None:
            fails = f"the repro did not end within {REPRO_CHECK_S:.0f} s"
        else:
            fails = "the repro fails as the cell did" if check.returncode else "the repro ran clean"
        size = f"{nodes} graph nodes" if nodes is not None else "a graph"
        return f"minified to {size} in {spent:.0f} s; {fails}", text[:REPRO_CHARS]


def _run_child(argv: list[str], cwd: Path, timeout_s: float) -> subprocess.CompletedProcess | None:
    """``argv`` run to its end in ``cwd``, its output captured; None when it ran past
    ``timeout_s`` (and was killed)."""
    try:
        return subprocess.run(
            argv,
            cwd=cwd,
            timeout=timeout_s,
            capture_output=True,
            text=True,
            errors="replace",
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None


def merge(original: CellResult, triage: CellResult) -> None:
    """The triage job's verdict into the cell's own row (its status is left as it was).
    A triage job that died names the rung it died on."""
    if triage.triage_rung is not None:
        original.triage_rung, original.triage_detail = triage.triage_rung, triage.triage_detail
        original.triage_bisect = triage.triage_bisect
        original.triage_minify, original.triage_repro = triage.triage_minify, triage.triage_repro
        original.triage_trace = triage.triage_trace
        return
    phase = triage.error_phase or ""
    backend = phase.removeprefix(PHASE_PREFIX) if phase.startswith(PHASE_PREFIX) else None
    died = f"{triage.status}: {triage.error_type}"
    if phase == BISECT_PHASE:
        original.triage_rung = stage_of("inductor")
        original.triage_bisect = f"the bisector's process ended ({died})"
    elif phase.startswith(MINIFY_PHASE + " "):
        original.triage_rung = stage_of(phase.removeprefix(MINIFY_PHASE + " "))
        original.triage_minify = f"the minifier's process ended ({died})"
    elif backend is not None:
        original.triage_rung = stage_of(backend)
        original.triage_detail = f"the triage process ended ({died}) on this rung"
    else:
        original.triage_rung, original.triage_detail = "triage failed", died
