"""Where a failing cell breaks: the backend ladder, climbed on its own.

PyTorch's troubleshooting guide has users climb it by hand: ``eager`` (dynamo alone),
``aot_eager`` (plus AOTAutograd), ``aot_eager_decomp_partition`` (plus Inductor's
decompositions and the partitioner), then the failing backend. The first rung whose cell
fails (or fails the accuracy rule) names the stage: dynamo, AOT autograd,
decompositions/partitioning, or the backend itself. Each rung is the same cell under that
backend, checked only (build, reference, eager, compile, accuracy: no timing), in the
worker that runs the triage job; the cell's own row keeps its status and gains the rung.
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
# Cell.extra's entry that makes a worker triage the cell instead of measuring it.
TRIAGE = "triage"
PHASE_PREFIX = "triage "


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
        rung = measure_cell(
            Cell(
                cell.spec,
                config,
                cell.size,
                cell.batch_size,
                cell.seq_len,
                cell.device,
                cell.env_id,
                cell.timeout_s,
                cell.extra,
            ),
            gate=gate,
            checks_only=True,
        )
        if rung.status != PASS:
            verdict.triage_rung = stage(config)
            verdict.triage_detail = rung.error_signature or rung.status
            break
    return verdict


def merge(original: CellResult, triage: CellResult) -> None:
    """The triage job's verdict into the cell's own row (its status is left as it was).
    A triage job that died names the rung it died on."""
    if triage.triage_rung is not None:
        original.triage_rung, original.triage_detail = triage.triage_rung, triage.triage_detail
        return
    phase = triage.error_phase or ""
    backend = phase.removeprefix(PHASE_PREFIX) if phase.startswith(PHASE_PREFIX) else None
    died = f"{triage.status}: {triage.error_type}"
    if backend is not None:
        original.triage_rung = RUNG_STAGE.get(backend, f"fails in {backend}")
        original.triage_detail = f"the triage process ended ({died}) on this rung"
    else:
        original.triage_rung, original.triage_detail = "triage failed", died
