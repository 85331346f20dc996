"""The eager baseline of an XLA cell, timed in a process where JAX never ran.

Once JAX's GPU backend is up in a process, eager torch calls there slow down (measured on
the H200, BERT-MLM bf16-cast at batch 16: 5.0-5.3 ms in processes without JAX, 9.3-10 ms
beside it), so an XLA cell times its eager side here. This process builds the model and
inputs exactly as the cell does (``Measurement.build``), with the cell's precision
treatment (fp32 with TF32 off, or model and inputs cast), prints ``ready``, waits for
``go`` (sent while the cell holds its GPU's timing lock), times eager calls with the
cells' warm-up and sampling loops, and prints ``{"samples": [...], "jax_imported": ...}``.

    python -m runner.eager_baseline     (stdin: one JSON line {"cell": {...}}, then "go")
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any

READY = "ready"
GO = "go"


def main() -> int:
    import torch

    from runner.config import Cell
    from runner.measure import AUTOCAST_DTYPES, Measurement, cast_floats
    from runner.result import CellResult

    request = json.loads(sys.stdin.readline())
    cell = Cell.from_dict(request["cell"])
    measurement = Measurement(
        cell, CellResult.for_cell(cell), [], lambda phase: None, contextlib.nullcontext
    )
    measurement.build(None, None)
    cast = AUTOCAST_DTYPES.get(cell.config.precision)
    if cast is not None:
        measurement.model = measurement.model.to(cast)
        measurement.inputs = cast_floats(measurement.inputs, cast)
    print(READY, flush=True)
    if sys.stdin.readline().strip() != GO:
        return 1
    with torch.no_grad(), measurement.fp32_treatment():
        # The clock of the XLA side: host time, synchronized (JAX's streams are not
        # torch's, so CUDA events cannot time it).
        samples = measurement.time_alone(measurement.run_eager, measurement.synced_timer())
    reply: dict[str, Any] = {"samples": samples, "jax_imported": "jax" in sys.modules}
    print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
