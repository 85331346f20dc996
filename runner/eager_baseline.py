"""The eager baseline of an XLA cell, timed in a process where JAX never ran.

Once JAX's GPU backend is up in a process, eager torch calls there slow down (measured on
the H200, BERT-MLM bf16-cast at batch 16: 5.0-5.3 ms in processes without JAX, 9.3-10 ms
beside it), so an XLA cell times its eager side here. This process builds the model and
inputs exactly as the cell does (``Measurement.build``), with the cell's precision
treatment (fp32 with TF32 off, or model and inputs cast), and answers the cell on stdin:

    {"cell": {...}}   builds, prints ``ready``
    go CPUS           (sent while the cell holds its GPU's timing lock, with the cores the
                      lock holder times on: the reserved timing cores under
                      ``--timing-cpus``) moves every thread of its own there, warms up,
                      prints ``warm``
    time K            runs REWARM_CALLS untimed calls, then times K, prints
                      ``{"samples": [...]}``
    done              prints ``{"jax_imported": ..., "cpus": [...]}`` and exits

The cell alternates ``time K`` with K calls of its own, so that whatever else runs on the
GPU or the host meanwhile hits both sides alike (a block each way, not a call each way:
the two sides live in two processes).

    python -m runner.eager_baseline
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

# Untimed calls at the start of each block, on both sides: the first calls after the
# other process had the GPU run slow (measured on the H200: the first of 5 up to 1.3-2x
# the block's last, eager and XLA alike).
REWARM_CALLS = 3

READY = "ready"
GO = "go"
WARM = "warm"
TIME = "time"
DONE = "done"


def main() -> int:
    from runner.worker import die_with_parent

    die_with_parent()
    import torch

    from runner.config import Cell
    from runner.gpu_lock import move_threads, parse_cpus
    from runner.measure import AUTOCAST_DTYPES, Measurement, cast_floats, no_gate, warm_up
    from runner.result import CellResult

    request = json.loads(sys.stdin.readline())
    cell = Cell.from_dict(request["cell"])
    measurement = Measurement(cell, CellResult.for_cell(cell), [], lambda phase: None, no_gate)
    measurement.build(None, None)
    cast = AUTOCAST_DTYPES.get(cell.config.precision)
    if cast is not None:
        measurement.model = measurement.model.to(cast)
        measurement.inputs = cast_floats(measurement.inputs, cast)
    print(READY, flush=True)
    word, _, cpus = sys.stdin.readline().strip().partition(" ")
    if word != GO:
        return 1
    # Every thread: torch's intra-op threads exist by now.
    move_threads(parse_cpus(cpus))
    # The clock of the XLA side: host time, synchronized (JAX's streams are not torch's,
    # so CUDA events cannot time it).
    timer = measurement.synced_timer()
    with torch.no_grad(), measurement.fp32_treatment():
        warm_up(lambda: (measurement.run_eager(), measurement.sync()))
        print(WARM, flush=True)
        for line in sys.stdin:
            word, _, count = line.strip().partition(" ")
            if word != TIME:
                break
            samples = timed_block(measurement.run_eager, timer, int(count))
            print(json.dumps({"samples": samples}), flush=True)
    if word != DONE:
        return 1
    reply: dict[str, Any] = {
        "jax_imported": "jax" in sys.modules,
        "cpus": sorted(os.sched_getaffinity(0)),
    }
    print(json.dumps(reply), flush=True)
    return 0


def timed_block(
    call: Callable[[], Any], timer: Callable[[Callable[[], Any]], float], count: int
) -> list[float]:
    """One block of the alternation, on either side: ``REWARM_CALLS`` untimed calls,
    then ``count`` timed ones."""
    for _ in range(REWARM_CALLS):
        call()
    return [timer(call) for _ in range(count)]


if __name__ == "__main__":
    sys.exit(main())
