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
"""

from __future__ import annotations

from collections.abc import Callable

from runner.backends import registry as backends
from runner.cell import measure_cell
from runner.matrix.axes import NO_MODE
from runner.matrix.cells import Cell, CellConfig
from runner.matrix.results import COMPILE_ERROR, CRASH, FAIL_ACCURACY, PASS, CellResult
from runner.measure.context import Gate, no_gate

LADDER = ("eager", "aot_eager", "aot_eager_decomp_partition")
RUNG_STAGE = {
    "eager": "fails in dynamo",
    "aot_eager": "fails in AOT autograd",
    "aot_eager_decomp_partition": "fails in decompositions/partitioning",
}
# Statuses a compiler can be blamed for: triage climbs the ladder for these.
TRIAGED = (COMPILE_ERROR, FAIL_ACCURACY, CRASH)
NOT_AGAIN = "did not fail again"
# Cell.extra's entry that makes a worker triage the cell instead of measuring it; its
# value is the triage mode.
TRIAGE = "triage"
LADDER_ONLY = "ladder"
BISECT = "bisect"
MODES = (LADDER_ONLY, BISECT)
PHASE_PREFIX = "triage "
BISECT_PHASE = "triage bisect"
BISECT_BUDGET_S = 600.0


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
    return RUNG_STAGE.get(config.backend, f"fails in {config.backend}")


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
            if config.backend == "inductor" and cell.extra.get(TRIAGE) == BISECT:
                report_phase(BISECT_PHASE)
                verdict.triage_bisect = bisect(with_config(cell, config), gate)
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


def merge(original: CellResult, triage: CellResult) -> None:
    """The triage job's verdict into the cell's own row (its status is left as it was).
    A triage job that died names the rung it died on."""
    if triage.triage_rung is not None:
        original.triage_rung, original.triage_detail = triage.triage_rung, triage.triage_detail
        original.triage_bisect = triage.triage_bisect
        return
    phase = triage.error_phase or ""
    backend = phase.removeprefix(PHASE_PREFIX) if phase.startswith(PHASE_PREFIX) else None
    died = f"{triage.status}: {triage.error_type}"
    if phase == BISECT_PHASE:
        original.triage_rung = RUNG_STAGE.get("inductor", "fails in inductor")
        original.triage_bisect = f"the bisector's process ended ({died})"
    elif backend is not None:
        original.triage_rung = RUNG_STAGE.get(backend, f"fails in {backend}")
        original.triage_detail = f"the triage process ended ({died}) on this rung"
    else:
        original.triage_rung, original.triage_detail = "triage failed", died
