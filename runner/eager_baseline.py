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
    time K            times K eager calls, prints ``{"samples": [...]}``
    done              prints ``{"jax_imported": ..., "cpus": [...]}`` and exits

The cell alternates ``time K`` with K calls of its own, so that whatever else runs on the
GPU or the host meanwhile hits both sides alike (a block each way, not a call each way:
the two sides live in two processes).

    python -m runner.eager_baseline
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any

READY = "ready"
GO = "go"
WARM = "warm"
TIME = "time"
DONE = "done"


def main() -> int:
    import torch

    from runner.config import Cell
    from runner.gpu_lock import parse_cpus
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
    move_to(parse_cpus(cpus) if cpus else None)
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
            samples = [timer(measurement.run_eager) for _ in range(int(count))]
            print(json.dumps({"samples": samples}), flush=True)
    if word != DONE:
        return 1
    reply: dict[str, Any] = {
        "jax_imported": "jax" in sys.modules,
        "cpus": sorted(os.sched_getaffinity(0)),
    }
    print(json.dumps(reply), flush=True)
    return 0


def move_to(cpus: frozenset[int] | None) -> None:
    """Every thread of this process onto ``cpus`` (Linux sets affinity per thread, and
    torch's intra-op threads exist by now)."""
    if not cpus:
        return
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(int(tid), cpus)


if __name__ == "__main__":
    sys.exit(main())
