"""What a cell's status means to a reader: passed, failed (by kind), unsupported here, not run.

A cell ``unsupported`` here (e.g. torch_xla on a CUDA build without it) was never
attempted: counting it as a failure makes a backend that cannot run on this machine read
"0% pass" and paints it red. A place of the matrix without a cell was not run. So a pass
rate is over the cells that were attempted and supported, and the other two are named
beside it, on every page that shows one.
"""

from __future__ import annotations

from runner.matrix.results import PASS, STATUSES, TRIAGE_INTERRUPTED, UNSUPPORTED

PASSED = "passed"
FAILED = "failed"
UNSUPPORTED_HERE = "unsupported here"
NOT_RUN = "not run"
CATEGORIES = (PASSED, FAILED, UNSUPPORTED_HERE, NOT_RUN)
# Every status but these is a failure of some kind (an unknown one too).
FAILURE_STATUSES = tuple(s for s in STATUSES if s not in (PASS, UNSUPPORTED))


def category(status: str | None) -> str:
    """The category of a recorded status (None: no cell, not run)."""
    if status is None:
        return NOT_RUN
    if status == PASS:
        return PASSED
    if status == UNSUPPORTED:
        return UNSUPPORTED_HERE
    return FAILED


def pass_rate(passed: int, attempted: int) -> float | None:
    """The share of attempted-and-supported cells that passed (None when none was)."""
    return passed / attempted if attempted else None


def pass_rate_text(passed: int, attempted: int, unsupported: int = 0, not_run: int = 0) -> str:
    """``"75% (3/4)"`` over the attempted cells, with the rest beside it:
    ``"75% (3/4) · 2 unsupported · 1 not run"``; ``"– (0/0)"`` when nothing was attempted."""
    rate = pass_rate(passed, attempted)
    text = f"{'–' if rate is None else f'{round(100 * rate)}%'} ({passed:,}/{attempted:,})"
    extra = [
        f"{count:,} {name}"
        for count, name in ((unsupported, "unsupported"), (not_run, NOT_RUN))
        if count
    ]
    return " · ".join([text, *extra])


# What each verdict of the triage ladder (runner.triage: eager, then aot_eager, then
# aot_eager_decomp_partition, then the cell's own backend, each run for its checks)
# tells a reader about where a failure lies.
VERDICT_MEANINGS = {
    "fails in dynamo": (
        "torch.compile's eager backend, dynamo's graph capture with no compiler behind "
        "it, already fails as the cell did: the cause is in capturing or running the "
        "model's code under dynamo, not in a compiler"
    ),
    "fails in AOT autograd": (
        "dynamo's capture passes and aot_eager fails: the cause is in AOT autograd's "
        "tracing or functionalization"
    ),
    "fails in decompositions/partitioning": (
        "aot_eager passes and aot_eager_decomp_partition fails: the cause is in "
        "Inductor's decompositions or the partitioner, before Inductor lowers anything"
    ),
    "did not fail again": (
        "every rung, the cell's own backend included, passed when triaged: the failure "
        "did not repeat (flaky, or caused by the run's conditions, such as a crowded device)"
    ),
    TRIAGE_INTERRUPTED: (
        "the triage job was cut off (by a time limit or the run's end) before a verdict; "
        "the next zoo-run --triage over the same database triages the cell"
    ),
}


def verdict_meaning(verdict: str) -> str | None:
    """What the ladder's ``verdict`` (``triage_rung``) says of a failure; None for text
    it never writes."""
    if verdict in VERDICT_MEANINGS:
        return VERDICT_MEANINGS[verdict]
    prefix = "fails in "
    if verdict.startswith(prefix) and len(verdict) > len(prefix):
        backend = verdict[len(prefix) :]
        where = (
            "Inductor's lowering, scheduling or generated kernels"
            if backend == "inductor"
            else f"what {backend} adds to the graph"
        )
        return (
            "every rung before it (eager, aot_eager, aot_eager_decomp_partition) passes "
            f"and {backend} itself fails: the cause is in {where}"
        )
    return None
