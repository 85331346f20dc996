"""One run's lifecycle: its record in the database, its cells executed on workers, each
result written as it arrives, the run finished with what happened to it.

``zoo-run`` (``runner.cli.run``) and ``benchmarks/throughput.py`` both run cells
through a ``Session``; neither rebuilds the lifecycle.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.env import rows as environment_rows
from runner.matrix.cells import Cell
from runner.matrix.results import CellResult
from runner.schedule.executor import Executor
from runner.schedule.usage import Usage, each_hold
from runner.schedule.workdir import remove_stale, run_workdir
from runner.store.db import Store
from runner.store.schema import RunRecord
from zoo.errors import Interrupted

if TYPE_CHECKING:
    from runner.cluster.executor import Cluster, NodeStats


@dataclass(frozen=True)
class Placement:
    """Where and how a run's cells execute (``runner.schedule.executor.Executor``; on a
    cluster, on each node)."""

    # None: each cluster node's default (runner.schedule.cpus.default_workers).
    workers: int | None = 1
    # GPUs (UUIDs) to spread workers over, a GPU named more than once standing for as
    # many slots; none on CPU.
    gpus: tuple[str, ...] = ()
    timing_cpus_per_gpu: int = 0
    quiet_timing: bool = False
    # Inductor's compile threads per worker: a number, "auto" (the cores shared out), or
    # None for torch's default (Executor's compile_threads).
    compile_threads: int | str | None = None
    # A fresh worker process for every cell (the serial baseline of the benchmark).
    reuse_workers: bool = True
    # Failing torch.compile cells are triaged in this mode (runner.triage.MODES), or not.
    triage: str | None = None
    # Each GPU's memory: cells start beside others only where they fit
    # (runner.schedule.memory); None starts them as workers free up. A cluster's nodes
    # take their own GPUs'.
    gpu_memory_gib: float | None = None


@dataclass
class Outcome:
    """What a finished (or interrupted) run did."""

    run_id: str
    results: list[CellResult] = field(default_factory=list)
    status: str = "finished"
    elapsed_s: float = 0.0
    usage: Usage | None = None
    # Every lock hold of the run's workers: (worker, key, kind, start, end), wall clock.
    holds: list[tuple[str, str, str, float, float]] = field(default_factory=list)
    # A cluster run: each node's part (its usage there; ``usage`` stays None).
    nodes: list[NodeStats] = field(default_factory=list)
    # Why an interrupted run stopped, when not Ctrl-C, and the exit status it calls for.
    reason: str = ""
    exit_code: int = 0
    # The signal that interrupted it (SIGINT for Ctrl-C, SIGTERM), if one did.
    stopped_by: signal.Signals | None = None
    # Whether it was asked to wrap up (SIGUSR1, ``Session.run``'s ``wrap_up_s``).
    wrapped_up: bool = False
    # The cells (model and column) still under way at the wrap-up's end, stopped there
    # without a row: the next run runs them.
    stopped: list[str] = field(default_factory=list)

    @property
    def interrupted(self) -> bool:
        return self.status == "interrupted"


class Session:
    """A run in ``store`` (None: results are not stored) in the environment ``env``
    (``runner.env.capture``) on ``device``."""

    def __init__(
        self,
        store: Store | None,
        env: dict[str, Any],
        device: str,
        **run_values: Any,
    ) -> None:
        """``run_values``: the run record's label, command, zoo_version."""
        self.store = store
        self.env = env
        self.device = device
        self.run_values = run_values

    def run(
        self,
        cells: Iterable[Cell],
        placement: Placement,
        *,
        on_start: Callable[[Cell], None] = lambda cell: None,
        on_phase: Callable[[Cell, str], None] = lambda cell, phase: None,
        on_result: Callable[[CellResult], None] = lambda result: None,
        on_started: Callable[[str], None] = lambda run_id: None,
        on_note: Callable[[str], None] = lambda text: None,
        stop_after_s: float | None = None,
        retry: Callable[[Cell, CellResult], Cell | None] | None = None,
        cluster: Cluster | None = None,
        on_node: Callable[[Cell, str], None] = lambda cell, node: None,
        wrap_up_s: float | None = None,
    ) -> Outcome:
        """Run ``cells``; ``on_started`` gets the run id once the run is recorded, each
        result is recorded, then handed to ``on_result``. No cell
        starts after ``stop_after_s`` seconds (those left get no row); ``retry`` may run a
        cell again instead of recording its result (``runner.plan.smaller_batch``). Ctrl-C and SIGTERM
        end the run as ``interrupted``, in-flight cells dropped, nothing recorded lost;
        an error of ours ends it as ``failed`` (and is raised). First, runs of dead
        processes are marked ``abandoned`` and their temporary folders removed; ``on_note``
        gets a line for each.

        With ``cluster`` (``runner.cluster.executor.Cluster``, its nodes started) the
        cells run on its nodes, each with ``placement``'s workers (None: the node's
        default); ``on_node`` gets each cell and the node it started on. This process
        stays the one writer of the store.

        ``wrap_up_s`` (from the main thread): SIGUSR1 makes the run end
        within that many seconds, as if its time limit were then (where that is sooner),
        stopping the cells still under way then (``Outcome.stopped``): what a batch
        scheduler's warning before a job's end asks for (Slurm's ``--signal=B:USR1@S``)."""
        cells = list(cells)
        run = RunRecord.starting(self.env, self.device, cells_planned=len(cells), **self.run_values)
        if self.store is not None:
            for run_id, recorded in self.store.abandon_dead_runs():
                on_note(
                    f"run {run_id} ended without finishing (its process is gone): marked "
                    f"abandoned, with the {recorded} cell(s) it recorded"
                )
        for folder in remove_stale():
            on_note(f"removed {folder}, the temporary folder of a run whose process is gone")
        # Nodes on one host may both have removed a folder (their actors start together).
        by_node = {}
        for node in cluster.nodes if cluster is not None else []:
            for folder in node.info.get("removed", []):
                by_node.setdefault(folder, node.name)
        for folder, name in by_node.items():
            on_note(
                f"removed {folder} on ray node {name}, the temporary folder of a node whose "
                "actor is gone"
            )
        if self.store is not None:
            for row in environment_rows(self.env):
                self.store.record_environment(row)
            self.store.start_run(run)
        outcome = Outcome(run.run_id)
        on_started(run.run_id)

        def record(result: CellResult) -> None:
            if self.store is not None:
                self.store.write_results(run.run_id, [result])
            outcome.results.append(result)
            on_result(result)

        started = time.monotonic()
        deadline = started + stop_after_s if stop_after_s is not None else None
        try:
            callbacks = {"on_result": record, "on_start": on_start, "on_phase": on_phase}
            if cluster is not None:
                from runner.cluster.executor import RayExecutor

                ray_executor = RayExecutor(cluster, asdict(placement))
                try:
                    with _on_usr1(wrap_up_s, ray_executor.wrap_up):
                        ray_executor.run(
                            cells, **callbacks, deadline=deadline, retry=retry, on_node=on_node
                        )
                except Interrupted as error:
                    outcome.status = "interrupted"
                    outcome.reason, outcome.exit_code = str(error), error.exit_code
                    outcome.stopped_by = error.signal
                outcome.wrapped_up = ray_executor.wrapped_up
                outcome.stopped = list(ray_executor.stopped)
                outcome.nodes = ray_executor.stats
                outcome.holds = list(ray_executor.holds)
            else:
                with run_workdir(run.run_id, on_left=_left_note(on_note)) as workdir:
                    executor = Executor(
                        workdir,
                        workers=placement.workers or 1,
                        gpus=list(placement.gpus),
                        timing_cpus_per_gpu=placement.timing_cpus_per_gpu,
                        quiet_timing=placement.quiet_timing,
                        compile_threads=placement.compile_threads,
                        reuse_workers=placement.reuse_workers,
                        memory_gib=placement.gpu_memory_gib,
                    )
                    try:
                        with _on_usr1(wrap_up_s, executor.wrap_up):
                            executor.run(
                                cells,
                                **callbacks,
                                deadline=deadline,
                                retry=retry,
                                triage=placement.triage,
                            )
                    except Interrupted as error:
                        outcome.status = "interrupted"
                        outcome.reason, outcome.exit_code = str(error), error.exit_code
                        outcome.stopped_by = error.signal
                    outcome.wrapped_up = executor.wrapped_up
                    outcome.stopped = [cell.describe() for cell in executor.stopped]
                    outcome.usage = executor.usage
                    outcome.holds = list(each_hold(workdir))
        except BaseException:
            # Not left `running`: the rows it did record are counted.
            if self.store is not None:
                with contextlib.suppress(Exception):
                    self.store.finish_run(run.run_id, "failed", len(outcome.results))
            raise
        outcome.elapsed_s = time.monotonic() - started
        if self.store is not None:
            self.store.finish_run(run.run_id, outcome.status, len(outcome.results))
        return outcome


def _left_note(on_note: Callable[[str], None]) -> Callable[[Path], None]:
    """What a run says of a temporary folder whose removal a Ctrl-C cut short."""

    def left(path: Path) -> None:
        on_note(
            f"interrupted while removing its temporary folder {path}: the next run "
            "removes what is left"
        )

    return left


@contextlib.contextmanager
def _on_usr1(within_s: float | None, wrap_up: Callable[[float], None]):
    """While in the block, SIGUSR1 calls ``wrap_up(within_s)`` (nothing without
    ``within_s``, or off the main thread, where no handler can be set)."""
    if within_s is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: wrap_up(within_s))
    try:
        yield
    finally:
        signal.signal(signal.SIGUSR1, previous)
