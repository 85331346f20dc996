"""Past one machine: a run's cells spread over the nodes of a Ray cluster.

One Ray actor per node (``runner.cluster.node.NodeRunner``) runs the local
``Executor`` there, so a cell is measured by the same host machinery whichever
executor ran it. The driver (this process) hands out cells: each node asks for as
many as it has workers free (plus one in reserve), so nodes of different speeds
share the work and a node holds few cells at a time; results stream back and the
driver alone writes them, through ``runner.session.Session``.

A node that dies loses only the cells it held: those it had not started go back to
the others; a cell under way there is run once more elsewhere, and when that is not
possible (it was the second loss, or no node is left) it is recorded as a ``crash``
naming the node. Ray ships this package (``runner``, ``zoo``) to the nodes, which
need only the same dependencies installed (``pip install 'zoo-matrix[runner,ray]'``
with the same constraints).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import tempfile
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.env import fingerprints
from runner.matrix.cells import Cell
from runner.matrix.clock import utc_now_iso
from runner.matrix.fingerprint import FIELDS
from runner.matrix.results import CRASH, CellResult
from runner.schedule.memory import MemoryBudget, spread_by_need
from runner.schedule.usage import Usage
from zoo.errors import NodesLost, UsageError, interruption, raise_terminated

INSTALL_HINT = (
    "--executor ray needs Ray, the 'ray' extra: pip install -c constraints.txt "
    "'zoo-matrix[ray]' (pip install -e '.[ray]' in a checkout)"
)
LOOPBACK = ("127.0.0.1", "localhost", "::1")
# How often a cell under way on a node that died is run again on another node. A cell
# may be what killed its node (a host out of memory): it is not given a third.
NODE_LOSS_RETRIES = 1
POLL_S = 0.2
# Cells a node holds beyond one per worker, so that a worker that frees up between two
# polls finds its next cell at once; all a node's death costs them is a new start.
PREFETCH = 1
CONNECT_TIMEOUT_S = 10.0
# How long a node may stay unreachable before the driver gives its cells to others (Ray
# declares a dead node's actors dead sooner, after its health checks fail).
SILENCE_S = 120.0
# How long a stopped node may take to kill its workers before the driver lets go.
STOP_WAIT_S = 60.0
# Environment variables of the driver that the nodes' workers see too (ZOO_WARM_CACHE
# and friends change what a cell measures, so every node must run with them).
FORWARDED_PREFIX = "ZOO_"


@dataclass
class NodeStats:
    """One node's part of a run, for the progress bar and the summary."""

    name: str
    host: str
    gpus: int
    workers: int = 0
    statuses: Counter = field(default_factory=Counter)
    first_start: float | None = None
    last_result: float | None = None
    # Why the node left the run early (it died, or its executor failed), or None.
    lost: str | None = None
    usage: Usage | None = None

    @property
    def cells(self) -> int:
        return sum(self.statuses.values())

    def cells_per_hour(self) -> float | None:
        if self.first_start is None or self.last_result is None:
            return None
        spent = self.last_result - self.first_start
        return self.cells * 3600 / spent if spent > 0 else None


@dataclass
class _Node:
    name: str
    node_id: str
    actor: Any
    info: dict[str, Any]
    stats: NodeStats
    held: dict[str, Cell] = field(default_factory=dict)
    started: dict[str, str] = field(default_factory=dict)  # key -> started_at
    phase: dict[str, str] = field(default_factory=dict)
    poll_ref: Any = None
    done: bool = False
    silent_since: float | None = None


def smallest_share(nodes: Iterable[_Node], workers: int | None) -> float | None:
    """The smallest worker's share of its GPU's memory among ``nodes`` with GPUs
    (``workers`` each, else each node's default), or None where none has a GPU of
    known memory: the driver hands cells out in order, so it spreads them by it
    (``runner.schedule.memory.spread_by_need``)."""
    shares = [
        MemoryBudget(node.info["env"].get("gpu_memory_gb")).share_gib(
            workers or node.info["default_workers"], node.stats.gpus
        )
        for node in nodes
        if node.stats.gpus
    ]
    return min((share for share in shares if share is not None), default=None)


def _ray():
    try:
        import ray
    except ImportError:
        raise UsageError(INSTALL_HINT) from None
    return ray


def _has_ray() -> bool:
    """Whether Ray can be imported, asked without importing it."""
    try:
        return importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):  # ValueError: a module set to None in sys.modules
        return False


def _started_here() -> str | None:
    """The address of the cluster ``ray start`` last started on this machine, read where
    Ray's own ``address="auto"`` reads it, without importing Ray (whose loopback setting
    depends on the address)."""
    root = Path(os.environ.get("RAY_TMPDIR") or tempfile.gettempdir()) / "ray"
    try:
        return (root / "ray_current_cluster").read_text().strip() or None
    except OSError:
        return None


def _split_address(address: str) -> tuple[str, int] | None:
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


class Cluster:
    """A connection to a Ray cluster, and one ``NodeRunner`` actor per node a run uses.

    ``connect`` then ``start_nodes``; ``shutdown`` ends the actors (and with them their
    workers) and the connection."""

    def __init__(self, address: str, ray_module: Any) -> None:
        self.address = address
        self.ray = ray_module
        self.nodes: list[_Node] = []
        self.env: dict[str, Any] = {}
        self.device = "cpu"

    @classmethod
    def connect(cls, address: str | None) -> Cluster:
        """Connect to the cluster at ``address`` (``host:port`` of its head; None: the
        one ``ray start`` started on this machine, or ``RAY_ADDRESS``). Raises
        ``UsageError`` when Ray is missing or no cluster answers there."""
        if not _has_ray():
            raise UsageError(INSTALL_HINT)
        wanted = address or os.environ.get("RAY_ADDRESS") or _started_here()
        if wanted is None:
            raise UsageError(
                "--executor ray: no Ray cluster was started on this machine (`ray start "
                "--head`, README: Past one machine); pass its address with --ray-address"
            )
        parts = _split_address(wanted)
        if parts is not None and parts[0] in LOOPBACK:
            # Ray swaps a loopback address for this host's outside address, where a
            # cluster bound to the loopback (one machine, nothing exposed) does not
            # listen. Read when Ray is imported, so before that.
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        ray = _ray()
        if parts is not None and not wanted.startswith("ray://"):
            try:
                socket.create_connection(parts, timeout=CONNECT_TIMEOUT_S).close()
            except OSError as error:
                raise UsageError(
                    f"no Ray cluster at {wanted} ({error.strerror or error}); start one with "
                    "`ray start --head` (README: Past one machine) and pass its address "
                    "with --ray-address"
                ) from None
        import runner
        import zoo

        runtime_env = {
            # The driver's own code runs on every node, installed there or not.
            "py_modules": [runner, zoo],
            "excludes": ["__pycache__", "*.pyc"],
            "env_vars": {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_PREFIX)},
        }
        try:
            ray.init(
                address=wanted,
                runtime_env=runtime_env,
                log_to_driver=False,
                logging_level="ERROR",
                configure_logging=True,
            )
        except ConnectionError as error:
            raise UsageError(
                f"no Ray cluster at {wanted}: {error}. Start one with `ray start --head` "
                "(README: Past one machine) or pass its address with --ray-address"
            ) from None
        return cls(wanted, ray)

    def alive_nodes(self) -> list[dict[str, Any]]:
        return [node for node in self.ray.nodes() if node.get("Alive")]

    def choose_device(self, requested: str | None) -> str:
        """The run's device: cuda when any node has a GPU, unless asked for; cuda with no
        GPU in the cluster is a ``UsageError``."""
        gpus = sum(node["Resources"].get("GPU", 0) for node in self.alive_nodes())
        if requested == "cuda" and not gpus:
            raise UsageError(
                f"--device cuda: the Ray cluster at {self.address} has no GPUs "
                f"({len(self.alive_nodes())} node(s), none with a GPU resource); "
                "use --device cpu or add GPU nodes"
            )
        self.device = requested or ("cuda" if gpus else "cpu")
        return self.device

    def start_nodes(self, paths: Iterable[str] = (), timing_cpus: int = 0) -> None:
        """One ``NodeRunner`` on every node that can run the device's cells (on cuda the
        nodes with GPUs, which the actor reserves whole); every node must share the
        first's environment and see the user model files ``paths``."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from runner.cluster.node import NodeRunner

        ray = self.ray
        # A node declared with no CPUs (a head started with --num-cpus 0, the usual way to
        # keep the head free) or, on cuda, no GPUs gets no cells.
        resource = "GPU" if self.device == "cuda" else "CPU"
        candidates = [n for n in self.alive_nodes() if n["Resources"].get(resource, 0) > 0]
        hosts = Counter(n.get("NodeManagerHostname", "") for n in candidates)
        remote = ray.remote(NodeRunner)
        pending = []
        for node in sorted(
            candidates, key=lambda n: not n["Resources"].get("node:__internal_head__")
        ):
            node_id = node["NodeID"]
            host = node.get("NodeManagerHostname") or node.get("NodeManagerAddress", "?")
            name = host if hosts[host] == 1 else f"{host}:{node_id[:8]}"
            gpus = int(node["Resources"].get("GPU", 0)) if self.device == "cuda" else 0
            actor = remote.options(
                num_cpus=0,
                # On cuda the node's GPUs are the run's: Ray hands the actor all of them
                # (CUDA_VISIBLE_DEVICES) and places nothing else on them meanwhile.
                num_gpus=gpus,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                max_restarts=0,
                max_task_retries=0,
            ).remote(self.device, node_id)
            pending.append((name, node_id, host, gpus, actor))
        paths = list(paths)
        for name, node_id, host, gpus, actor in pending:
            info = ray.get(actor.describe.remote(paths))
            self.nodes.append(_Node(name, node_id, actor, info, NodeStats(name, host, gpus)))
        self._check_nodes(paths, timing_cpus)
        self.env = self.nodes[0].info["env"]

    def _check_nodes(self, paths: list[str], timing_cpus: int) -> None:
        if not self.nodes:
            raise UsageError(
                f"the Ray cluster at {self.address} has no node to run {self.device} cells on "
                "(nodes started with --num-cpus 0, or on cuda with no GPU, take none)"
            )
        first = self.nodes[0]
        for node in self.nodes:
            if node.info["missing"]:
                raise UsageError(
                    f"ray node {node.name} has no {', '.join(node.info['missing'])}: a --module "
                    "file must be at the same path on every node (a shared file system)"
                )
            if fingerprints(node.info["env"]) != fingerprints(first.info["env"]):
                differ = [
                    f"{name} {first.info['env'].get(name)} on {first.name}, "
                    f"{node.info['env'].get(name)} on {node.name}"
                    for name in dict.fromkeys(n for names in FIELDS.values() for n in names)
                    if first.info["env"].get(name) != node.info["env"].get(name)
                ]
                raise UsageError(
                    "the nodes' environments differ, so their cells would not share keys: "
                    f"{'; '.join(differ)}. Install the same versions on every node "
                    "(pip install -c constraints.txt) or run each kind of node on its own"
                )
            if timing_cpus:
                reason = self.ray.get(node.actor.check_timing_cpus.remote(timing_cpus))
                if reason:
                    raise UsageError(
                        f"--timing-cpus {timing_cpus} on ray node {node.name}: {reason}"
                    )

    def shutdown(self) -> None:
        for node in self.nodes:
            # A dead node's actor is gone already.
            with contextlib.suppress(Exception):
                self.ray.kill(node.actor)
        self.nodes = []
        self.ray.shutdown()


class RayExecutor:
    """The local ``Executor``'s ``run`` over a ``Cluster``'s nodes."""

    def __init__(self, cluster: Cluster, placement: dict[str, Any]) -> None:
        self.cluster = cluster
        self.placement = placement
        self.stats: list[NodeStats] = [node.stats for node in cluster.nodes]
        self.usage: Usage | None = None
        # Every lock hold of every node's workers, the worker named "node/worker".
        self.holds: list[tuple[str, str, str, float, float]] = []
        self._deadline: float | None = None
        # A wrap-up asked for (``wrap_up``), handed to the nodes by run()'s loop: seconds.
        self._wrap_up_s: float | None = None
        self.wrapped_up = False
        # The cells the nodes stopped at the wrap-up's end without a row (model, column).
        self.stopped: list[str] = []

    def wrap_up(self, within_s: float) -> None:
        """As ``Executor.wrap_up``, on every node: the run ends within ``within_s``
        seconds. Safe in a signal handler: run()'s loop tells the nodes."""
        self._wrap_up_s = within_s

    def run(
        self,
        cells: Iterable[Cell],
        on_result: Callable[[CellResult], None],
        on_start: Callable[[Cell], None] = lambda cell: None,
        on_phase: Callable[[Cell, str], None] = lambda cell, phase: None,
        deadline: float | None = None,
        retry: Callable[[Cell, CellResult], Cell | None] | None = None,
        on_node: Callable[[Cell, str], None] = lambda cell, node: None,
    ) -> None:
        """As ``Executor.run``; ``on_node(cell, node)`` says where a cell started.
        Raises ``Interrupted`` on Ctrl-C or SIGTERM (the nodes' workers killed, the cells
        in flight dropped), ``NodesLost`` when every node died with cells left."""
        ray = self.cluster.ray
        self._deadline = deadline
        live = list(self.cluster.nodes)
        # Handed out in order, so spread here: each node's own executor is fed.
        share = smallest_share(live, self.placement.get("workers"))
        pending = deque(spread_by_need(list(cells), share))
        losses: dict[str, list[str]] = {}
        stop_after = None if deadline is None else max(0.0, deadline - time.monotonic())
        placement = {**self.placement, "stop_after_s": stop_after}
        in_main = _in_main_thread()
        previous = signal.signal(signal.SIGTERM, raise_terminated) if in_main else None
        try:
            starts = [(node, node.actor.start.remote(placement, retry)) for node in live]
            for node, ref in starts:
                try:
                    node.stats.workers = ray.get(ref)
                except ray.exceptions.RayError as error:
                    live.remove(node)
                    self._lost(node, _why(error), live, pending, losses, on_result)
            while live:
                if self._wrap_up_s is not None:
                    within_s, self._wrap_up_s = self._wrap_up_s, None
                    self.wrapped_up = True
                    cut = time.monotonic() + within_s
                    deadline = self._deadline = cut if deadline is None else min(deadline, cut)
                    for node in live:
                        node.actor.wrap_up.remote(within_s)
                if deadline is not None and time.monotonic() >= deadline:
                    pending.clear()
                for node in live:
                    if node.poll_ref is None and not node.done:
                        node.poll_ref = node.actor.poll.remote()
                refs = [node.poll_ref for node in live if node.poll_ref is not None]
                ready, _ = ray.wait(refs, num_returns=len(refs), timeout=POLL_S)
                for node in list(live):
                    if node.poll_ref is None or node.poll_ref not in ready:
                        continue
                    ref, node.poll_ref = node.poll_ref, None
                    try:
                        reply = ray.get(ref)
                    except ray.exceptions.ActorUnavailableError:
                        # Unreachable for now, maybe back soon: lost only once Ray says
                        # the actor died, or after a long silence.
                        node.silent_since = node.silent_since or time.monotonic()
                        if time.monotonic() - node.silent_since < SILENCE_S:
                            continue
                        live.remove(node)
                        with contextlib.suppress(Exception):
                            ray.kill(node.actor)
                        why = f"it did not answer for {SILENCE_S:.0f} s"
                        self._lost(node, why, live, pending, losses, on_result)
                        continue
                    except ray.exceptions.RayError as error:
                        live.remove(node)
                        self._lost(node, _why(error), live, pending, losses, on_result)
                        continue
                    node.silent_since = None
                    self._events(
                        node, reply["events"], losses, on_result, on_start, on_phase, on_node
                    )
                    if reply["done"]:
                        node.done = True
                        self._finished(node, reply["outcome"])
                        live.remove(node)
                        status = reply["outcome"].get("status", "")
                        if status.startswith("failed"):
                            self._lost(node, status, live, pending, losses, on_result)
                        elif deadline is not None:
                            # Its feed is still open, so it ended by the deadline (a
                            # time limit or a wrap-up): nothing more starts anywhere.
                            pending.clear()
                        continue
                self._hand_out(live, pending)
                if not pending and not any(node.held for node in live):
                    break
                time.sleep(POLL_S)
            if pending and not live:
                left = "1 cell was" if len(pending) == 1 else f"{len(pending)} cells were"
                raise NodesLost(
                    f"every ray node was lost; {left} not run (the same command resumes with them)"
                )
            self._close(live)
        except KeyboardInterrupt as stop:
            self._stop(live)
            raise interruption(stop) from None
        finally:
            if in_main:
                signal.signal(signal.SIGTERM, previous)

    def _hand_out(self, live: list[_Node], pending: deque[Cell]) -> None:
        """Cells for each node's free workers first, then one in reserve each: a few
        cells at the start go one per node, not all to the first."""
        given: dict[str, list[Cell]] = {node.name: [] for node in live}
        for reserve in (0, PREFETCH):
            for node in live:
                want = node.stats.workers + reserve - len(node.held) - len(given[node.name])
                while want > 0 and pending:
                    given[node.name].append(pending.popleft())
                    want -= 1
        for node in live:
            if cells := given[node.name]:
                node.held.update((cell.key, cell) for cell in cells)
                node.actor.offer.remote([cell.to_dict() for cell in cells])

    def _events(self, node, events, losses, on_result, on_start, on_phase, on_node) -> None:
        now = time.monotonic()
        for kind, value in events:
            if kind == "start":
                cell = node.held.get(value)
                if cell is None:
                    continue
                node.started[value] = utc_now_iso()
                if node.stats.first_start is None:
                    node.stats.first_start = now
                on_node(cell, node.name)
                on_start(cell)
            elif kind == "phase":
                key, phase = value
                node.phase[key] = phase
                if (cell := node.held.get(key)) is not None:
                    on_phase(cell, phase)
            elif kind == "result":
                result = CellResult.from_dict(value)
                node.held.pop(result.cell_key, None)
                node.started.pop(result.cell_key, None)
                node.phase.pop(result.cell_key, None)
                notes = [*losses.pop(result.cell_key, []), f"ran on ray node {node.name}"]
                result.notes = "; ".join([*notes, *([result.notes] if result.notes else [])])
                node.stats.statuses[result.status] += 1
                node.stats.last_result = now
                on_result(result)

    def _lost(self, node: _Node, why: str, live, pending, losses, on_result) -> None:
        """``node`` left the run: cells it had not started go back to the others, those
        under way run once more elsewhere or become ``crash`` rows naming it."""
        node.stats.lost = why
        back = []
        for key, cell in node.held.items():
            if key not in node.started:
                back.append(cell)
                continue
            phase = node.phase.get(key, "starting")
            attempt = f"an attempt on ray node {node.name} ended in phase '{phase}' when {why}"
            past_deadline = self._deadline is not None and time.monotonic() >= self._deadline
            if live and not past_deadline and len(losses.get(key, [])) < NODE_LOSS_RETRIES:
                losses.setdefault(key, []).append(attempt)
                back.append(cell)
                continue
            earlier = losses.pop(key, [])
            started_at = node.started[key]
            node.stats.statuses[CRASH] += 1
            on_result(
                CellResult.for_cell(
                    cell,
                    status=CRASH,
                    error_type="NodeDied",
                    error_phase=phase,
                    error_signature=f"crash: NodeDied in {phase}",
                    error_message=f"ray node {node.name} ({node.stats.host}) was lost while "
                    f"the cell was in phase '{phase}': {why}",
                    notes="; ".join([*earlier, f"ran on ray node {node.name}"]),
                    started_at=started_at,
                    finished_at=utc_now_iso(),
                )
            )
        node.held.clear()
        pending.extendleft(reversed(back))

    def _finished(self, node: _Node, outcome: dict[str, Any]) -> None:
        self.stopped.extend(outcome.get("stopped", []))
        if outcome.get("usage"):
            node.stats.usage = Usage.from_dict(outcome["usage"])
        for worker, key, kind, start, end in outcome.get("holds", []):
            self.holds.append((f"{node.name}/{worker}", key, kind, start, end))

    def _close(self, live: list[_Node]) -> None:
        """The run is over: each node ends its executor; its usage and holds come back."""
        ray = self.cluster.ray
        for node in live:
            node.actor.close.remote()
        deadline = time.monotonic() + STOP_WAIT_S
        for node in live:
            while not node.done and time.monotonic() < deadline:
                try:
                    reply = ray.get(node.actor.poll.remote(), timeout=STOP_WAIT_S)
                except (ray.exceptions.RayError, TimeoutError):
                    break
                if reply["done"]:
                    node.done = True
                    self._finished(node, reply["outcome"])
                else:
                    time.sleep(POLL_S)

    def _stop(self, live: list[_Node]) -> None:
        ray = self.cluster.ray
        refs = [node.actor.stop.remote() for node in live]
        # Stopping what is left: a node that died meanwhile has stopped already.
        with contextlib.suppress(Exception):
            ray.wait(refs, num_returns=len(refs), timeout=STOP_WAIT_S)


def _why(error: Exception) -> str:
    """A node's death, in a few words, from Ray's error."""
    text = str(error).lower()
    if "node" in text and ("died" in text or "dead" in text):
        return "its node died"
    return f"its actor died ({type(error).__name__})"


def _in_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
