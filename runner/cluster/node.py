"""One node of a cluster: the local ``Executor`` over the cells the driver hands it.

``NodeRunner`` is the body of the Ray actor that ``runner.cluster.executor`` starts on
each node (this module imports no Ray: the actor is any object with these methods).
On its node it is the same host machinery as a local run: worker processes,
parallel compiles, timing alone under each GPU's lock, warm workers, XLA cells in
processes of their own. The driver hears what happened (``poll``) and hands it
cells (``offer``) as its workers free up, so nodes of different speed share the
sweep, and a node that dies loses only the cells it holds.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runner import env as environment
from runner.matrix.cells import Cell
from runner.matrix.results import CellResult
from runner.schedule.cpus import default_workers, split_cpus
from runner.schedule.executor import Executor
from runner.schedule.usage import each_hold
from runner.schedule.workdir import NODE_PREFIX, make_workdir, remove_stale, remove_workdir
from zoo.errors import Interrupted


class CellQueue:
    """The cells handed to this node, taken by its executor as workers free up."""

    def __init__(self) -> None:
        self._cells: deque[Cell] = deque()
        self._closed = False
        self._lock = threading.Lock()

    def put(self, cells: list[Cell]) -> None:
        with self._lock:
            self._cells.extend(cells)

    def take(self) -> Cell | None:
        with self._lock:
            return self._cells.popleft() if self._cells else None

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def exhausted(self) -> bool:
        with self._lock:
            return self._closed and not self._cells

    def __len__(self) -> int:
        with self._lock:
            return len(self._cells)


class NodeRunner:
    """Runs the cells of one run on this node; every method returns plain data."""

    def __init__(self, device: str, node_id: str = "") -> None:
        self.device = device
        self.node_id = node_id
        self.host = socket.gethostname()
        self.env = environment.capture(device)
        self.gpus = environment.gpu_uuids() if device == "cuda" else []
        self._feed = CellQueue()
        self._events: list[tuple[str, Any]] = []
        self._events_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._executor: Executor | None = None
        # What earlier actors on this host left (killed with their node, or by
        # ray.kill before their run could remove it), then this actor's own folder.
        self.removed = [str(path) for path in remove_stale(prefix=NODE_PREFIX)]
        self._workdir = make_workdir(node_id, prefix=NODE_PREFIX)
        self._outcome: dict[str, Any] = {}

    def describe(self, paths: list[str] | None = None) -> dict[str, Any]:
        """What the driver needs to plan for this node: its host, environment, GPUs,
        the workers it would run by default, and which of ``paths`` (user model files)
        it lacks."""
        return {
            "node_id": self.node_id,
            "host": self.host,
            "env": self.env,
            "gpus": self.gpus,
            "cpus": len(os.sched_getaffinity(0)),
            "default_workers": default_workers(self.device, self.env),
            "missing": [path for path in paths or [] if not Path(path).exists()],
            "pid": os.getpid(),
            "removed": self.removed,
        }

    def check_timing_cpus(self, per_gpu: int) -> str | None:
        """Why ``--timing-cpus per_gpu`` cannot work here, or None."""
        if not per_gpu or not self.gpus:
            return None
        try:
            split_cpus(os.sched_getaffinity(0), len(self.gpus), per_gpu)
        except ValueError as error:
            return str(error)
        return None

    def start(
        self,
        placement: dict[str, Any],
        retry: Callable[[Cell, CellResult], Cell | None] | None = None,
    ) -> int:
        """Start the executor (``placement``: ``runner.session.Placement``'s fields,
        workers None for this node's default); returns its number of workers."""
        workers = placement.get("workers") or default_workers(self.device, self.env)
        quiet = placement.get("quiet_timing", False) or (self.device == "cpu" and workers > 1)
        self._executor = Executor(
            self._workdir,
            workers=workers,
            gpus=self.gpus,
            timing_cpus_per_gpu=placement.get("timing_cpus_per_gpu", 0),
            quiet_timing=quiet,
            compile_threads=placement.get("compile_threads"),
            reuse_workers=placement.get("reuse_workers", True),
            memory_gib=self.env.get("gpu_memory_gb") if self.gpus else None,
        )
        self._triage = placement.get("triage")
        stop_after = placement.get("stop_after_s")
        # The driver's deadline as seconds left: clocks of two machines do not agree.
        deadline = None if stop_after is None else time.monotonic() + stop_after
        self._thread = threading.Thread(target=self._run, args=(retry, deadline), daemon=True)
        self._thread.start()
        return workers

    def _event(self, kind: str, value: Any) -> None:
        with self._events_lock:
            self._events.append((kind, value))

    def _run(self, retry, deadline: float | None) -> None:
        assert self._executor is not None

        def on_start(cell: Cell) -> None:
            self._event("start", cell.key)

        def on_phase(cell: Cell, phase: str) -> None:
            self._event("phase", (cell.key, phase))

        def on_result(result: CellResult) -> None:
            self._event("result", result.to_dict())

        status = "finished"
        try:
            self._executor.run(
                self._feed,
                on_result=on_result,
                on_start=on_start,
                on_phase=on_phase,
                deadline=deadline,
                retry=retry,
                triage=self._triage,
            )
        except Interrupted:
            status = "interrupted"
        except Exception as error:  # the driver must hear of it: its cells go elsewhere
            status = f"failed: {type(error).__name__}: {error}"
        usage = self._executor.usage
        self._outcome = {
            "status": status,
            "stopped": [cell.describe() for cell in self._executor.stopped],
            "usage": usage.to_dict() if usage is not None else None,
            "holds": list(each_hold(self._workdir)),
        }
        remove_workdir(self._workdir)

    def offer(self, cells: list[dict[str, Any]]) -> None:
        """Cells (``Cell.to_dict``) for this node to run."""
        self._feed.put([Cell.from_dict(data) for data in cells])

    def poll(self) -> dict[str, Any]:
        """What happened since the last poll (starts, phases, results, in order) and,
        once its run has ended, how it ended."""
        with self._events_lock:
            events, self._events = self._events, []
        done = self._thread is not None and not self._thread.is_alive()
        return {"events": events, "done": done, "outcome": self._outcome}

    def close(self) -> None:
        """No more cells: the run ends once those handed over are done."""
        self._feed.close()

    def wrap_up(self, within_s: float) -> None:
        """End the run within ``within_s`` seconds (``Executor.wrap_up``): the driver's
        SIGUSR1."""
        if self._executor is not None:
            self._executor.wrap_up(within_s)

    def stop(self) -> None:
        """End the run now (Ctrl-C on the driver): workers killed, cells in flight
        dropped."""
        self._feed.close()
        if self._executor is not None:
            self._executor.stop()
        if self._thread is not None:
            self._thread.join(timeout=60)
