"""zoo-run --executor ray on a real Ray cluster of this machine: a head that takes no
cells and two nodes of one CPU each, every process bound to 127.0.0.1.

One cluster serves the module (Ray starts slowly on 2 cores); a test that kills nodes
adds fresh ones back before the next test needs them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

# Ray replaces a loopback address with this host's outside one unless told otherwise
# (read when ray is imported); runner.cluster does the same for a loopback --ray-address.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import ray
from ray.cluster_utils import Cluster

from runner.cli.run import main
from tests.reliability.zoo_run import sigint_as_a_terminal_sends_it
from tests.results import rows

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures"
MISBEHAVING = FIXTURES / "misbehaving.py"
TOY = FIXTURES / "toy_models.py"
LOCAL = "127.0.0.1"
TINY = ["--models", "test_resnet,test_vit", "--backends", "eager,aot_eager", "--device", "cpu"]
SMALL = ["--models", "test_resnet,test_vit", "--backends", "eager", "--device", "cpu"]
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


def _add_node(cluster: Cluster):
    return cluster.add_node(num_cpus=1, node_ip_address=LOCAL, include_dashboard=False)


def _workers(cluster: Cluster) -> list:
    return [node for node in cluster.worker_nodes if node.remaining_processes_alive()]


@pytest.fixture(scope="module")
def cluster():
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            # The head keeps no CPU for cells, as `ray start --head --num-cpus 0` does.
            "num_cpus": 0,
            "node_ip_address": LOCAL,
            "include_dashboard": False,
            # A node killed outright is declared dead within about two seconds.
            "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 4},
        },
    )
    try:
        for _ in range(2):
            _add_node(cluster)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()


def _renew(cluster: Cluster) -> Cluster:
    """The cluster with two live nodes besides its head (dead ones dropped)."""
    for node in list(cluster.worker_nodes):
        if not node.remaining_processes_alive():
            cluster.remove_node(node, allow_graceful=False)
    while len(_workers(cluster)) < 2:
        _add_node(cluster)
    cluster.wait_for_nodes()
    return cluster


@pytest.fixture
def two_nodes(cluster):
    return _renew(cluster)


def _zoo_run(*args: str) -> subprocess.Popen:
    """zoo-run as a user runs it, in its own process (the tests' process holds the
    cluster's nodes, and a driver that is killed must not take them along)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-m", "runner.cli.run", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=ROOT,
        preexec_fn=sigint_as_a_terminal_sends_it,
    )


def _read_until(proc: subprocess.Popen, wanted, limit_s: float = 240) -> list[str]:
    lines = []
    deadline = time.monotonic() + limit_s
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if wanted(line):
            return lines
        assert time.monotonic() < deadline, "".join(lines)
    raise AssertionError("zoo-run ended first:\n" + "".join(lines))


def _rest_of(proc: subprocess.Popen, lines: list[str], limit_s: float, failure: str) -> str:
    """Everything ``proc`` printed (``lines`` read already) once it ends within
    ``limit_s``; else it is killed and the test fails with ``failure`` and the output."""
    try:
        rest, _ = proc.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        rest, _ = proc.communicate()
        raise AssertionError(f"{failure}:\n" + "".join(lines) + rest) from None
    return "".join(lines) + rest


def _node_ids(cluster: Cluster) -> dict[str, object]:
    """Each live worker node by the short id zoo-run names it with (host:id)."""
    return {node.node_id[:8]: node for node in _workers(cluster)}


def test_a_sweep_over_two_nodes_records_the_rows_of_a_local_run(two_nodes, tmp_path, capsys):
    local_db, ray_db = tmp_path / "local.duckdb", tmp_path / "ray.duckdb"
    assert main([*SMALL, "--db", str(local_db)]) == 0
    capsys.readouterr()

    ray_args = [*SMALL, "--executor", "ray", "--ray-address", two_nodes.address]
    assert main([*ray_args, "--db", str(ray_db)]) == 0
    captured = capsys.readouterr()
    assert "ray cluster at" in captured.err and "2 node(s)" in captured.err
    assert "per node" in captured.out  # the per-node summary

    def cells(db):
        return {(r["cell_key"], r["model_id"], r["backend"], r["status"]) for r in rows(db)}

    assert cells(ray_db) == cells(local_db)
    assert {status for *_, status in cells(ray_db)} == {"pass"}
    # Both nodes ran cells, and each row says which.
    ids = _node_ids(two_nodes)
    ran_on = {r["notes"].rsplit("ran on ray node ", 1)[1].split(":")[1][:8] for r in rows(ray_db)}
    assert ran_on == set(ids)
    (run,) = rows(ray_db, "SELECT * FROM runs")
    assert run["status"] == "finished" and run["cells_recorded"] == 2
    assert run["env_id"] == rows(local_db, "SELECT env_id FROM runs")[0]["env_id"]

    # Resume: the plan on the cluster skips what is recorded; a dry run names the nodes.
    assert main([*ray_args, "--db", str(ray_db), "--dry-run"]) == 0
    captured = capsys.readouterr()
    assert "skipping 2 cells already recorded" in captured.err
    assert "2 node(s)" in captured.out and "0 cells to run" in captured.out
    assert len(rows(ray_db)) == 2


def test_a_node_killed_mid_sweep_loses_only_its_cells_in_flight(two_nodes, tmp_path):
    db = tmp_path / "zoo.duckdb"
    ids = _node_ids(two_nodes)
    # The driver's worker settings reach the nodes' workers: its ZOO_ variables (the
    # tuning pool's among them) and the placement's compile threads.
    settings = ["--tuning-pool", "--compile-threads", "1"]
    proc = _zoo_run(
        *TINY, *settings, "--executor", "ray", "--ray-address", two_nodes.address, "--db", str(db)
    )
    # A node that has finished one cell has started the next (it holds one in reserve).
    lines = _read_until(proc, lambda line: line.startswith("[1/4]"))
    environs = [environ for pid in _cluster_workers() if (environ := _environ(pid))]
    assert environs, "no worker of a node was found"
    for environ in environs:
        assert environ.get("ZOO_TUNING_POOL") == "1", environ
        assert environ.get("TORCHINDUCTOR_COMPILE_THREADS") == "1", environ
    victim = lines[-1].rstrip().rsplit(":", 1)[1]
    time.sleep(2)  # its next cell is building or compiling
    two_nodes.remove_node(ids[victim], allow_graceful=False)
    rest, _ = proc.communicate(timeout=300)
    output = "".join(lines) + rest
    assert proc.returncode == 0, output

    results = rows(db)
    assert len(results) == 4, output  # nothing finished was lost, nothing left out
    assert {r["status"] for r in results} == {"pass"}, output
    # The cell under way on the dead node ran again on the other one, and says so.
    retried = [r for r in results if "when its node died" in (r["notes"] or "")]
    assert len(retried) == 1, [r["notes"] for r in results]
    assert f":{victim}" in retried[0]["notes"].split("ended")[0]
    assert "lost" in output and "its node died" in output
    (run,) = rows(db, "SELECT * FROM runs")
    assert run["status"] == "finished" and run["cells_recorded"] == 4
    for row in results:
        assert "TORCHINDUCTOR_COMPILE_THREADS=1 (--compile-threads)" in row["notes"], row


def test_a_cell_that_kills_every_node_it_runs_on_is_a_crash_row_then_resumes(two_nodes, tmp_path):
    """It kills the node it starts on, then the node it is retried on: a crash row naming
    both. The cell the first node held in reserve went along to the second, and with no
    node left it is left for the resume; the one the second node finished stays."""
    db = tmp_path / "zoo.duckdb"
    args = ["--module", f"{MISBEHAVING}:KillsItsRayNode", "--module", f"{TOY}:TinyMLP"]
    args += ["--module", f"{TOY}:SlowMLP", "--backends", "eager", "--device", "cpu"]
    args += ["--executor", "ray", "--ray-address", two_nodes.address, "--db", str(db)]
    before = set(_node_folders())
    proc = _zoo_run(*args)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1, output
    assert "every ray node was lost; 1 cell was not run" in output
    # The nodes died with their actors, which may have left their folders behind.
    left = set(_node_folders()) - before
    by_model = {r["model_id"]: r for r in rows(db)}
    (finished,) = set(by_model) - {"custom/misbehaving:KillsItsRayNode"}
    assert by_model[finished]["status"] == "pass"
    crash = by_model["custom/misbehaving:KillsItsRayNode"]
    assert crash["status"] == "crash" and crash["error_type"] == "NodeDied"
    assert crash["error_phase"] == "compile"
    assert "was lost while the cell was in phase 'compile'" in crash["error_message"]
    first, second = crash["notes"].split("; ")
    assert first.startswith("an attempt on ray node") and "when its node died" in first
    assert second.startswith("ran on ray node") and second[-8:] not in first
    (run,) = rows(db, "SELECT * FROM runs")
    assert run["status"] == "interrupted" and run["cells_recorded"] == 2

    # Fresh nodes: the same command runs only the cell left.
    _renew(two_nodes)
    _wait_for_owners(left)
    stale = _stale_node_folder()
    proc = _zoo_run(*args)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output
    # The new nodes' actors removed what dead ones left, and the run says so. (A dying
    # actor may still remove its own folder meanwhile: those are gone too, unnamed.)
    assert not stale.exists() and f"removed {stale} on ray node" in output, output
    assert not any(folder.exists() for folder in left), output
    assert sorted((r["model_id"], r["status"]) for r in rows(db)) == [
        ("custom/misbehaving:KillsItsRayNode", "crash"),
        ("custom/toy_models:SlowMLP", "pass"),
        ("custom/toy_models:TinyMLP", "pass"),
    ]


def test_ctrl_c_records_nothing_in_flight_and_leaves_no_worker(two_nodes, tmp_path):
    db = tmp_path / "zoo.duckdb"
    proc = _zoo_run(
        "--models", "test_resnet", "--module", f"{MISBEHAVING}:HangWhenCompiled",
        "--module", f"{TOY}:TinyMLP", "--backends", "eager", "--device", "cpu",
        "--executor", "ray", "--ray-address", two_nodes.address, "--db", str(db),
    )  # fmt: skip
    lines = _read_until(proc, lambda line: line.startswith("[2/3]"))
    time.sleep(3)  # the hanging cell is compiling on its node
    proc.send_signal(signal.SIGINT)
    # Within the hanging cell's 300 s timeout: a lost Ctrl-C fails here, with the output.
    output = _rest_of(proc, lines, 120, "zoo-run did not end after SIGINT")
    assert proc.returncode == 130, output
    assert "interrupted" in output and "zoo-run summary" in output
    assert sorted(r["model_id"] for r in rows(db)) == [
        "custom/toy_models:TinyMLP",
        "timm/test_resnet",
    ]
    (run,) = rows(db, "SELECT * FROM runs")
    assert run["status"] == "interrupted" and run["cells_recorded"] == 2
    # The nodes' workers went with the run (their actors were ended).
    deadline = time.monotonic() + 30
    while _cluster_workers():
        assert time.monotonic() < deadline, _cluster_workers()
        time.sleep(0.5)


def _environ(pid: str) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}  # ended meanwhile
    return dict(
        item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item
    )


def _wait_for_owners(folders, timeout_s: float = 60) -> None:
    """Until the processes that own ``folders`` have ended (a dying actor's exit lags its
    node's)."""
    from runner.matrix.process import alive
    from runner.schedule.workdir import OWNER_FILE

    deadline = time.monotonic() + timeout_s
    for folder in folders:
        try:
            owner = json.loads((folder / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue  # removed already
        while alive(owner["host"], owner["pid"], owner["pid_started"]):
            assert time.monotonic() < deadline, f"the owner of {folder} is still running"
            time.sleep(0.2)


def _stale_node_folder() -> Path:
    """A node folder whose owner (a process of this host) has ended: what an actor
    killed with its node leaves."""
    from runner.matrix.process import current_host, start_token
    from runner.schedule.workdir import NODE_PREFIX, OWNER_FILE

    gone = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    token = start_token(gone.pid)
    gone.kill()
    gone.wait()
    folder = Path(tempfile.mkdtemp(prefix=NODE_PREFIX))
    owner = {"run_id": "dead-node", "host": current_host(), "pid": gone.pid, "pid_started": token}
    (folder / OWNER_FILE).write_text(json.dumps(owner))
    (folder / "worker-1.log").write_text("left behind\n")
    return folder


def _node_folders() -> list[Path]:
    return list(Path(tempfile.gettempdir()).glob("zoo-node-*"))


def _cluster_workers() -> list[str]:
    """zoo-matrix worker processes started under a node actor (a zoo-node- workdir)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"runner.schedule.worker" in command and any(b"zoo-node-" in part for part in command):
            found.append(pid)
    return found


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--device", "cuda"], "has no GPUs"),
        (["--ray-address", "127.0.0.1:9"], "no Ray cluster at 127.0.0.1:9"),
        (["--models", "resnt50"], "closest"),
    ],
)
def test_bad_input_on_a_cluster_exits_2_and_records_nothing(
    cluster, args, message, tmp_path, capsys
):
    db = tmp_path / "zoo.duckdb"
    base = ["--models", "test_resnet", "--backends", "eager", "--executor", "ray"]
    if "--ray-address" not in args:
        base += ["--ray-address", cluster.address]
    assert main([*base, *args, "--db", str(db)]) == 2
    assert message in capsys.readouterr().err
    assert not db.exists()
    assert not ray.is_initialized()  # the connection was closed again


def test_ray_options_without_ray_or_without_the_executor_exit_2(tmp_path):
    db = tmp_path / "zoo.duckdb"
    # Python refuses to import a module set to None in sys.modules: Ray not installed.
    script = (
        "import sys; sys.modules['ray'] = None; from runner.cli.run import main; "
        f"sys.exit(main(['--models', 'test_resnet', '--executor', 'ray', '--db', {str(db)!r}]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "needs Ray, the 'ray' extra" in done.stderr and "zoo-matrix[ray]" in done.stderr
    with pytest.raises(SystemExit):
        main(["--help"])
    assert main(["--models", "test_resnet", "--ray-address", "127.0.0.1:1", "--db", str(db)]) == 2
    assert not db.exists()


def test_help_names_the_executor_options(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "--executor {local,ray}" in out and "--ray-address ADDR" in out


def test_sigusr1_wraps_up_every_node(two_nodes, tmp_path):
    """The driver's SIGUSR1 reaches the nodes: none starts a cell after, and the run
    ends as finished and says why."""
    db = tmp_path / "zoo.duckdb"
    proc = _zoo_run(
        *SMALL, "--dynamic", "false,true", "--executor", "ray",
        "--ray-address", two_nodes.address, "--db", str(db), "--wrap-up", "0.01",
    )  # fmt: skip
    lines = _read_until(proc, lambda line: line.startswith("[1/4]"))
    proc.send_signal(signal.SIGUSR1)
    output = _rest_of(proc, lines, 240, "zoo-run did not wrap up")
    assert proc.returncode == 0, output
    recorded = len(rows(db))
    assert 1 <= recorded < 4, output
    assert f"wrapped up on SIGUSR1 (--wrap-up 0.01 s): {4 - recorded} cells not recorded" in output
    (run,) = rows(db, "SELECT * FROM runs")
    assert run["status"] == "finished" and run["cells_recorded"] == recorded
