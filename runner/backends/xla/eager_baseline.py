"""The eager baseline of an XLA cell, timed in a process where JAX never ran.

Once JAX's GPU backend is up in a process, eager torch calls there slow down (measured on
the H200, BERT-MLM bf16-cast at batch 16: 5.0-5.3 ms in processes without JAX, 9.3-10 ms
beside it), so an XLA cell times its eager side here. This process builds the subject
exactly as the cell does (``runner.measure.subject``), with the cell's step and precision
treatment (fp32 with TF32 off, or model and inputs cast), and answers the cell on stdin:

    {"cell": {...}}   builds, prints ``ready``
    go CPUS           (sent while the cell holds its GPU's timing lock, with the cores the
                      lock holder times on: the reserved timing cores under
                      ``--timing-cpus``) moves every thread of its own there, warms up,
                      prints ``warm``
    time K            runs REWARM_CALLS untimed calls, then times K, prints
                      ``{"samples": [...]}``
    profile           profiles one call (``runner.measure.profile``), prints
                      ``{"gpu_ms": ..., "kernels": ..., "cost_s": ...}`` (or ``{"error": ...}``)
    done              prints ``{"jax_imported": ..., "cpus": [...]}`` and exits

The cell alternates ``time K`` with K calls of its own, so that whatever else runs on the
GPU or the host meanwhile hits both sides alike (a block each way, not a call each way:
the two sides live in two processes).

    python -m runner.backends.xla.eager_baseline

Importing this module imports neither torch nor jax: the XLA worker imports it for the
``EagerBaseline`` client.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from runner.matrix.cells import Cell
from runner.measure.host import die_with_parent, format_cpus, move_threads, parse_cpus

MODULE = "runner.backends.xla.eager_baseline"
READY = "ready"
GO = "go"
WARM = "warm"
TIME = "time"
PROFILE = "profile"
DONE = "done"


class EagerBaseline:
    """A baseline process for one cell: started early, so that it builds while the cell
    compiles; asked to time when the cell holds the GPU's lock."""

    def __init__(self, cell: Cell) -> None:
        # Its stderr is the worker's log; it shares the worker's process group, so a
        # worker killed for its timeout takes it along.
        self.proc = subprocess.Popen(
            [sys.executable, "-m", MODULE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._send(json.dumps({"cell": cell.to_dict()}))

    def _send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def _receive(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(
                f"the eager baseline process ended (exit {self.proc.wait()}); "
                "its traceback is in the worker's log"
            )
        return line.strip()

    def wait_ready(self) -> None:
        if (line := self._receive()) != READY:
            raise RuntimeError(f"the eager baseline process said {line!r}, not ready")

    def warm_up(self) -> None:
        """Called while holding the GPU lock: the baseline times on this thread's cores
        (the reserved timing cores when ``--timing-cpus`` is on)."""
        self._send(f"{GO} {format_cpus(os.sched_getaffinity(0))}")
        if (line := self._receive()) != WARM:
            raise RuntimeError(f"the eager baseline process said {line!r}, not warm")

    def time(self, count: int) -> list[float]:
        self._send(f"{TIME} {count}")
        return json.loads(self._receive())["samples"]

    def profile(self) -> dict[str, Any]:
        """One profiled eager call in the baseline process: its ``CallProfile`` fields,
        or ``{"error": message}``."""
        self._send(PROFILE)
        return json.loads(self._receive())

    def finish(self) -> None:
        self._send(DONE)
        if json.loads(self._receive())["jax_imported"]:
            raise RuntimeError("the eager baseline process imported jax")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def main() -> int:
    die_with_parent()
    import torch  # noqa: F401  (before the subject: the build imports it anyway)

    from runner.measure.failure import signature
    from runner.measure.profile import profile_call
    from runner.measure.subject import CAST, Subject
    from runner.measure.timing import synced_timer, timed_block, warm_up
    from runner.steps import registry as steps

    request = json.loads(sys.stdin.readline())
    cell = Cell.from_dict(request["cell"])
    step = steps.load(cell)
    subject = Subject.build(cell, treatment=CAST)
    step.prepare(subject.model)
    subject.load_inputs()
    subject.cast()
    program = step.program(subject.model)
    print(READY, flush=True)
    word, _, cpus = sys.stdin.readline().strip().partition(" ")
    if word != GO:
        return 1
    # Every thread: torch's intra-op threads exist by now.
    move_threads(parse_cpus(cpus))
    # The clock of the XLA side: host time, synchronized (JAX's streams are not torch's,
    # so CUDA events cannot time it).
    timer = synced_timer(subject.sync)

    def eager() -> Any:
        return program(*subject.inputs)

    with step.grad_mode(), subject.fp32_treatment():
        warm_up(lambda: (eager(), subject.sync()))
        print(WARM, flush=True)
        for line in sys.stdin:
            word, _, count = line.strip().partition(" ")
            if word == TIME:
                reply = {"samples": timed_block(eager, timer, int(count))}
            elif word == PROFILE:
                try:
                    reply = vars(profile_call(eager, subject.sync, subject.on_cuda))
                except Exception as exc:
                    reply = {"error": signature(exc)}
            else:
                break
            print(json.dumps(reply), flush=True)
    if word != DONE:
        return 1
    done = {"jax_imported": "jax" in sys.modules, "cpus": sorted(os.sched_getaffinity(0))}
    print(json.dumps(done), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
