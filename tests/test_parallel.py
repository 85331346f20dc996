"""Several workers: compiles overlap, timing holds one lock per GPU (here: the host)."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import deque
from pathlib import Path

import pytest

from runner.backends.registry import worker_kind
from runner.matrix.cells import Cell, CellConfig
from runner.matrix.holds import TIMING, TUNING, UNTIMED
from runner.matrix.phases import BUILD, COMPILE, WAITING
from runner.measure.host import SCRATCH_DIR_ENV, parse_cpus
from runner.plan import PlanOptions, plan_cells
from runner.schedule.cpus import split_cpus
from runner.schedule.executor import (
    ALONE_INTERRUPTED,
    ALONE_NOT_REACHED,
    STOPPED,
    WAITING_FOR_GPU,
    Executor,
    _crowd_onto,
    _observe_crowd,
    _Running,
)
from runner.schedule.gpu_lock import GpuLock
from runner.schedule.usage import HoldLog, Usage, read_holds
from tests.results import make_result
from zoo.catalog import select
from zoo.errors import Interrupted

FIXTURES = Path(__file__).parent / "fixtures"


def test_the_lock_is_exclusive_across_processes_and_reentrant_within_one(tmp_path):
    script = textwrap.dedent(
        f"""
        import json, sys, time
        from pathlib import Path
        from runner.matrix.holds import TIMING, TUNING, UNTIMED
        from runner.schedule.cpus import split_cpus
        from runner.schedule.gpu_lock import GpuLock
        lock = GpuLock("GPU-test", Path({str(tmp_path)!r}))
        with lock.held():
            with lock.held():  # re-entrant: Inductor's benchmarking inside our timing
                start = time.time()
                time.sleep(0.6)
                end = time.time()
        print(json.dumps([start, end]))
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    spans = sorted(json.loads(p.communicate(timeout=60)[0]) for p in procs)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end, spans  # no two holders at once


def test_untimed_holds_share_the_lock_with_each_other_and_with_nothing_else(tmp_path):
    """Untimed GPU work (references, eager outputs, memory passes) of several processes
    runs at once; timing and tuning never beside it."""
    script = textwrap.dedent(
        f"""
        import json, sys, time
        from pathlib import Path
        from runner.schedule.gpu_lock import GpuLock
        lock = GpuLock("GPU-shared", Path({str(tmp_path)!r}))
        print("start", flush=True)
        with lock.held(sys.argv[1]):
            start = time.time()
            time.sleep(1.0)
            end = time.time()
        print(json.dumps([sys.argv[1], start, end]), flush=True)
        """
    )
    kinds = [UNTIMED, UNTIMED, UNTIMED, TIMING, TUNING]
    procs = []
    for kind in kinds:
        proc = subprocess.Popen(
            [sys.executable, "-c", script, kind], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout.readline().strip() == "start"
        procs.append(proc)
    spans = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    untimed = [(start, end) for kind, start, end in spans if kind == UNTIMED]
    # At least two untimed holds overlapped (all three started within a second).
    assert any(
        a_start < b_end and b_start < a_end
        for (a_start, a_end), (b_start, b_end) in itertools.combinations(untimed, 2)
    ), spans
    for (kind, start, end), (other, other_start, other_end) in itertools.combinations(spans, 2):
        if (kind, other) != (UNTIMED, UNTIMED):
            assert other_start >= end or other_end <= start, spans  # never beside another


def test_an_exclusive_hold_inside_an_untimed_one_excludes_the_others_for_its_block(tmp_path):
    """Inductor's benchmarking (tuning) may run inside untimed work: the shared hold
    turns exclusive for that block and shared again after it; each stretch is logged."""
    log = HoldLog(tmp_path / "holds-worker-1.log")
    lock = GpuLock("GPU-up", tmp_path, holds_log=log)

    def others_can_take(operation: int) -> bool:
        fd = os.open(lock.path, os.O_RDWR)
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        finally:
            os.close(fd)

    with lock.held(UNTIMED):
        assert others_can_take(fcntl.LOCK_SH) and not others_can_take(fcntl.LOCK_EX)
        with lock.held(TUNING), lock.held(UNTIMED):
            assert not others_can_take(fcntl.LOCK_SH)
        assert others_can_take(fcntl.LOCK_SH) and not others_can_take(fcntl.LOCK_EX)
    assert others_can_take(fcntl.LOCK_EX)
    kinds = [line.split()[1] for line in log.path.read_text().splitlines()]
    assert kinds == [UNTIMED, TUNING, UNTIMED]
    with pytest.raises(ValueError, match="unknown kind of hold 'timed'"), lock.held("timed"):
        pass


def test_shared_holds_count_once_where_they_overlap(tmp_path):
    HoldLog(tmp_path / "holds-worker-1.log").record("GPU-a", UNTIMED, 100.0, 103.0)
    HoldLog(tmp_path / "holds-worker-2.log").record("GPU-a", UNTIMED, 102.0, 104.0)
    HoldLog(tmp_path / "holds-worker-2.log").record("GPU-a", UNTIMED, 110.0, 111.0)
    HoldLog(tmp_path / "holds-worker-3.log").record("GPU-a", TIMING, 104.0, 106.0)
    held = read_holds(tmp_path, since=0.0)
    assert held == {"GPU-a": {UNTIMED: pytest.approx(5.0), TIMING: pytest.approx(2.0)}}
    used = Usage(20.0, 3, 9, 16, 0.5, 0.0, held)
    assert used.lock_busy("GPU-a") == pytest.approx(0.35)


def _hold_lock_elsewhere(key: str, lock_dir: Path, seconds: float) -> subprocess.Popen:
    """Another process that holds the lock ``key`` for ``seconds``; returns once it does."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from pathlib import Path; from runner.schedule.gpu_lock import GpuLock; from runner.schedule.cpus import split_cpus; "
            f"held = GpuLock({key!r}, Path({str(lock_dir)!r})).held(); held.__enter__(); "
            f"print('held', flush=True); time.sleep({seconds})",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_dead_holder_releases_the_lock(tmp_path):
    holder = _hold_lock_elsewhere("GPU-x", tmp_path, seconds=600)
    fd = os.open(GpuLock("GPU-x", tmp_path).path, os.O_RDWR)
    with pytest.raises(BlockingIOError):  # really held by the other process
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.close(fd)
    holder.kill()
    holder.wait()
    start = time.monotonic()
    with GpuLock("GPU-x", tmp_path).held():
        assert time.monotonic() - start < 5


def test_a_waiter_announces_its_wait_once_and_its_turn_once(tmp_path):
    """The worker pauses its cell's clock on the first and resumes it on the second:
    waiting behind a holder, then yielding to a process waiting to time, is one wait."""
    calls = []
    lock = GpuLock(
        "GPU-w",
        tmp_path,
        on_wait=lambda: calls.append("wait"),
        on_acquired=lambda: calls.append("go"),
    )
    holder = _hold_lock_elsewhere("GPU-w", tmp_path, seconds=1.0)
    lock.waiters_dir.mkdir(exist_ok=True)
    marker = lock.waiters_dir / f"1-1.{TIMING}"
    fd = os.open(marker, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a live process waiting to time: the tuner yields

    def timer_leaves():
        time.sleep(1.5)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        marker.unlink()

    leaving = threading.Thread(target=timer_leaves)
    leaving.start()
    start = time.monotonic()
    with lock.held(TUNING):
        waited = time.monotonic() - start
    leaving.join()
    holder.wait()
    assert waited >= 1.4 and calls == ["wait", "go"]
    with lock.held(TUNING):  # nobody in the way: nothing announced
        pass
    assert calls == ["wait", "go"]


def _cells(timeout_s: float = 300.0) -> list[Cell]:
    options = PlanOptions(
        backends=("eager", "aot_eager"),
        modes=("default",),
        dynamic=("false",),
        precisions=("fp32",),
        steps=("infer",),
        device="cpu",
        timeout_s=timeout_s,
    )
    return plan_cells(select(["test_resnet"]), options, env_id="test").cells


def _run(cells, workdir: Path, workers: int, lock_dir: Path):
    results = []
    executor = Executor(workdir, workers=workers, lock_dir=lock_dir)
    executor.run(cells, on_result=results.append)
    return {r.cell_key: r for r in results}, executor.usage


def test_the_same_cells_and_statuses_whatever_the_number_of_workers(tmp_path):
    cells = _cells()
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    serial, _ = _run(cells, tmp_path / "one", 1, tmp_path / "locks")
    parallel, used = _run(cells, tmp_path / "two", 2, tmp_path / "locks")
    assert set(serial) == set(parallel) == {cell.key for cell in cells}
    for key, result in serial.items():
        assert result.status == parallel[key].status == "pass"
        assert result.graph_count == parallel[key].graph_count
        # Alone, no cell compiled beside another; two at once, beside at most the other.
        assert result.compile_beside == 0.0
        assert 0.0 <= parallel[key].compile_beside <= 1.0
        # The same through its timed calls; and the launch canary read both times.
        assert result.timing_beside == 0.0
        assert 0.0 <= parallel[key].timing_beside <= 1.0
        assert result.host_launch_us > 0 and parallel[key].host_launch_us > 0
    # What the run used: the host's lock was held for the timing of each cell, never
    # longer than the run; the cores were busy (building, compiling, timing).
    assert set(used.lock_held_s) == {"cpu"}
    assert used.lock_held_s["cpu"]["timing"] > 0.5 * len(cells)  # >= 0.5 s timed a cell
    assert 0 < used.lock_busy("cpu") <= 1
    assert 0 < used.cpu_busy <= 1
    assert 0 <= used.lock_wait < 1
    assert used.workers == 2 and used.cells == len(cells)


def test_compile_threads_reach_each_worker_and_each_row_says_so(tmp_path, monkeypatch):
    """--compile-threads: a number is handed to every worker as Inductor's variable, auto
    shares the cores out among the workers, and none leaves torch's default."""
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    cores = len(os.sched_getaffinity(0))
    kind = worker_kind("eager", os.environ)
    for setting, expected in ((3, "3"), ("auto", str(max(1, cores // 2))), (None, None)):
        executor = Executor(tmp_path, workers=2, compile_threads=setting)
        worker = executor._spawn(kind, 0)
        try:
            # Read once exec has given the worker its environment (read earlier, /proc
            # may show none: CI saw that once).
            environ = _environ_after_exec(worker.proc.pid, tmp_path)
            threads = [
                line.split(b"=", 1)[1].decode()
                for line in environ
                if line.startswith(b"TORCHINDUCTOR_COMPILE_THREADS=")
            ]
            assert threads == ([expected] if expected else [])
        finally:
            worker.kill()
    (cell,) = [c for c in _cells() if c.config.backend == "eager"]
    results = []
    Executor(tmp_path, workers=1, compile_threads=2).run([cell], on_result=results.append)
    (result,) = results
    assert result.status == "pass"
    assert "its worker ran with TORCHINDUCTOR_COMPILE_THREADS=2 (--compile-threads)" in (
        result.notes
    )


def test_lock_holds_are_logged_once_per_outermost_hold_and_summed_per_gpu(tmp_path):
    log = HoldLog(tmp_path / "holds-worker-1.log")
    lock = GpuLock("GPU-0123456789ab-cdef", tmp_path, holds_log=log)
    before = time.time()
    with lock.held(), lock.held(TUNING):  # re-entrant: inside the timing hold, not a hold
        time.sleep(0.2)
    with lock.held(TUNING):
        time.sleep(0.1)
    lines = log.path.read_text().splitlines()
    assert [line.split()[:2] for line in lines] == [
        ["GPU-0123456789ab-cdef", "timing"],
        ["GPU-0123456789ab-cdef", "tuning"],
    ]
    # Another worker's log, a line cut by a kill, and a hold from before the run.
    other = tmp_path / "holds-worker-2.log"
    other.write_text(f"GPU-other timing {before + 1:.3f} {before + 3:.3f}\nGPU-other tim")
    HoldLog(other).record("GPU-other", "timing", before - 10, before - 9)
    held = read_holds(tmp_path, since=before)
    assert held["GPU-0123456789ab-cdef"]["timing"] == pytest.approx(0.2, abs=0.05)
    assert held["GPU-0123456789ab-cdef"]["tuning"] == pytest.approx(0.1, abs=0.05)
    assert held["GPU-other"] == {"timing": pytest.approx(2.0)}


@pytest.mark.parametrize(
    ("workers", "cpu_busy", "held_s", "lock_wait", "says"),
    [
        (8, 0.50, 95.0, None, "timing-bound (the lock of GPU-01234567)"),
        # Held 72% over the run, but the workers waited for it half their time.
        (8, 0.50, 72.0, 0.47, "timing-bound (the lock of GPU-01234567)"),
        (8, 0.97, 40.0, 0.05, "CPU-bound: more workers would not help"),
        (8, 0.60, 40.0, 0.05, "more --workers may go faster"),
        (1, 0.97, 95.0, None, ""),  # one worker: nothing ran beside anything
    ],
)
def test_the_run_says_what_bounded_it(workers, cpu_busy, held_s, lock_wait, says):
    used = Usage(
        elapsed_s=100.0,
        workers=workers,
        cells=50,
        cpus=16,
        cpu_busy=cpu_busy,
        cpu_steal=0.0,
        lock_held_s={"GPU-0123456789ab": {"timing": held_s - 5, "tuning": 5.0}},
        lock_wait=lock_wait,
    )
    assert says in used.bound() if says else used.bound() == ""
    waited = f"workers waited {lock_wait:.0%} of their time for a lock" if lock_wait else ""
    assert waited in used.line() if waited else "waited" not in used.line()
    assert f"lock of GPU-01234567 held {held_s / 100:.0%} (timing" in used.line()


@pytest.mark.parametrize(
    ("held", "says"),
    [
        # The H100 max-autotune run b74ff70c: its lock held 93% of the run, 89% for
        # tuning and 3% for timing; "timing-bound" would send the reader to the timed calls.
        (
            {"timing": 3.0, "tuning": 89.0, "untimed": 1.0},
            "tuning-bound (the lock of GPU-01234567, held for autotuning: Inductor's kernel "
            "benchmarks, XLA's compiles)",
        ),
        # Hold logs are files: a kind this code does not know is named as it reads, braces
        # and all, not taken for a template.
        ({"{odd}": 90.0}, "{odd}-bound (the lock of GPU-01234567)"),
    ],
)
def test_a_lock_bound_is_named_by_the_hold_that_filled_it(held, says):
    used = Usage(
        elapsed_s=100.0,
        workers=6,
        cells=12,
        cpus=16,
        cpu_busy=0.16,
        cpu_steal=0.0,
        lock_held_s={"GPU-0123456789ab": held},
        lock_wait=0.72,
    )
    assert used.bound() == f"{says}: more workers would wait for it"


def test_waiting_for_the_gpu_does_not_count_against_the_timeout(tmp_path):
    cell = _eager_cpu_cell("toy_models.py:TinyMLP", timeout_s=12.0)
    phases = []
    results = []
    # Another process holds the host's timing lock for 20 s, longer than the cell's 12 s
    # timeout; the worker reaches its timing step within a few seconds and waits.
    holder = _hold_lock_elsewhere("cpu", tmp_path / "locks", seconds=20)
    executor = Executor(tmp_path, workers=1, lock_dir=tmp_path / "locks")
    executor.run(
        [cell],
        on_result=results.append,
        on_phase=lambda cell, phase: phases.append((time.monotonic(), phase)),
    )
    holder.wait(timeout=60)
    (result,) = results
    assert result.status == "pass", result.error_message
    assert result.wall_s > 15  # it really waited past its timeout
    assert "waiting for the GPU" in [phase for _, phase in phases]


@pytest.mark.parametrize("quiet", [[], ["--quiet-timing"]], ids=["", "quiet-timing"])
def test_zoo_run_with_two_workers_records_every_cell(tmp_path, capsys, quiet):
    import duckdb

    from runner.cli.run import main

    db = tmp_path / "zoo.duckdb"
    args = ["--models", "test_resnet,test_vit", "--backends", "eager", "--device", "cpu"]
    assert main([*args, "--workers", "2", "--db", str(db), *quiet]) == 0
    assert "2 worker(s) (quiet timing)" in capsys.readouterr().err  # on cpu, always
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT model_id, status, gpu_timing_s, gpu_tuning_s FROM results ORDER BY model_id"
        ).fetchall()
    assert [row[:2] for row in rows] == [("timm/test_resnet", "pass"), ("timm/test_vit", "pass")]
    # What each cost its device: the timed calls held it alone; eager tunes nothing.
    assert all(timing > 0 and tuning == 0 for *_, timing, tuning in rows), rows


def test_the_lock_counts_the_seconds_each_kind_of_hold_lasted(tmp_path):
    lock = GpuLock("GPU-tally", tmp_path)
    with lock.held(UNTIMED):
        time.sleep(0.05)
        with lock.held(TUNING):  # the shared hold turns exclusive for the block
            time.sleep(0.5)
        time.sleep(0.05)
    with lock.held(TIMING):
        time.sleep(0.05)
    assert set(lock.held_s) == {UNTIMED, TUNING, TIMING}
    assert lock.held_s[TUNING] >= 0.5 and lock.held_s[TIMING] >= 0.05
    # The untimed hold's two stretches, without the tuning block between them.
    assert 0.1 <= lock.held_s[UNTIMED] < 0.5


def test_cores_are_split_between_compiling_and_the_timing_of_each_gpu():
    alone = lambda cpu: frozenset({cpu})  # noqa: E731 (no SMT)
    timing, compiling = split_cpus(range(16), gpus=2, per_gpu=2, siblings=alone)
    assert timing == [frozenset({12, 13}), frozenset({14, 15})]
    assert compiling == frozenset(range(12))
    with pytest.raises(ValueError, match="at least one must be left"):
        split_cpus(range(4), gpus=2, per_gpu=2, siblings=alone)


def test_timing_cores_are_whole_physical_cores_with_their_smt_siblings():
    # Linux's usual numbering on 8 cores with two threads each: CPU n and n + 8 share one.
    pairs = lambda cpu: frozenset({cpu % 8, cpu % 8 + 8})  # noqa: E731
    timing, compiling = split_cpus(range(16), gpus=1, per_gpu=2, siblings=pairs)
    assert timing == [frozenset({7, 15})]
    assert compiling == frozenset(range(16)) - {7, 15}
    # One CPU asked for: its sibling comes along, never left to a compile.
    assert split_cpus(range(16), gpus=2, per_gpu=1, siblings=pairs)[0] == [
        frozenset({6, 14}),
        frozenset({7, 15}),
    ]
    # A sibling outside the process's CPUs is not given to anyone.
    timing, compiling = split_cpus([0, 1, 8], gpus=1, per_gpu=1, siblings=pairs)
    assert timing == [frozenset({1})] and compiling == frozenset({0, 8})
    with pytest.raises(ValueError, match="at least one must be left"):
        split_cpus([0, 8], gpus=1, per_gpu=1, siblings=pairs)


def test_this_machines_siblings_include_each_cpu():
    from runner.schedule.cpus import thread_siblings

    for cpu in os.sched_getaffinity(0):
        assert cpu in thread_siblings(cpu)
    assert thread_siblings(10**6) == frozenset({10**6})  # no such CPU: itself
    # sysfs writes siblings as a list or a range: both parse.
    assert parse_cpus("0,8") == {0, 8} and parse_cpus("0-2,8") == {0, 1, 2, 8}


def test_the_lock_holder_runs_on_the_timing_cores_and_returns(tmp_path):
    before = os.sched_getaffinity(0)
    lock = GpuLock("GPU-cores", tmp_path, timing_cpus=frozenset({min(before)}))
    with lock.held():
        assert os.sched_getaffinity(0) == {min(before)}
        with lock.held():  # re-entrant: still there
            assert os.sched_getaffinity(0) == {min(before)}
        assert os.sched_getaffinity(0) == {min(before)}
    assert os.sched_getaffinity(0) == before


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_threads_started_while_holding_the_lock_leave_the_timing_cores_with_it(tmp_path):
    """XLA starts compile and execution threads inside the lock; they inherit the timing
    cores, and must not stay there to compete with the next holder's timing."""
    before = os.sched_getaffinity(0)
    lock = GpuLock("GPU-threads", tmp_path, timing_cpus=frozenset({min(before)}))
    started, stop = threading.Event(), threading.Event()
    native: list[int] = []

    def thread_body():
        native.append(threading.get_native_id())
        started.set()
        stop.wait()

    thread = threading.Thread(target=thread_body)
    with lock.held():
        thread.start()
        started.wait()
        assert os.sched_getaffinity(native[0]) == {min(before)}
    try:
        assert os.sched_getaffinity(native[0]) == before
    finally:
        stop.set()
        thread.join()


def test_a_worker_compiles_off_the_timing_cores_and_times_on_them(tmp_path):
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs two cores to keep one for timing")
    log = tmp_path / "cores.log"
    spec = select(None, [f"{FIXTURES / 'toy_models.py'}:CoreRecorder"])[0]
    cell = Cell(spec, CellConfig("eager", "none", "false", "fp32"), "full", None, None, "cpu", "t")
    results = []
    executor = Executor(
        tmp_path,
        workers=1,
        env=dict(os.environ, ZOO_TEST_CORES_LOG=str(log)),
        gpus=["GPU-not-a-real-one"],  # the multi-GPU path: pinned, one lock per GPU
        lock_dir=tmp_path / "locks",
        timing_cpus_per_gpu=1,
    )
    executor.run([cell], on_result=results.append)
    (result,) = results
    assert result.status == "pass", result.error_message
    seen = [tuple(json.loads(line)) for line in log.read_text().splitlines()]
    # Reference, eager and compile ran where workers compile; the timed calls ran alone.
    assert set(seen) == {tuple(cores[:-1]), (cores[-1],)}, seen
    assert seen.count((cores[-1],)) >= 10  # the timed pairs: at least 5 eager + 5 compiled


@pytest.mark.parametrize(
    ("kind", "waiting"), [(TUNING, TIMING), (UNTIMED, TIMING), (TUNING, UNTIMED)]
)
def test_a_holder_yields_the_lock_to_a_process_waiting_to_hold_it_with_a_higher_rank(
    tmp_path, kind, waiting
):
    """Autotuners (XLA's compile, Inductor's benchmarking) take the lock as tuners: while
    a live process waits to time or to do untimed work (its marker flocked), a tuner does
    not keep the lock; untimed work yields to timing. A dead waiter's marker (not
    flocked) is removed and blocks nothing."""
    import threading

    lock = GpuLock("GPU-prio", tmp_path)
    lock.waiters_dir.mkdir()
    stale = lock.waiters_dir / f"999999-1.{waiting}"
    stale.touch()
    with lock.held(kind):  # a dead waiter's marker does not hold a tuner back
        pass
    assert not stale.exists()

    marker = lock.waiters_dir / f"1-1.{waiting}"
    fd = os.open(marker, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a live process waiting to time
    acquired = threading.Event()

    def tune():
        with GpuLock("GPU-prio", tmp_path).held(kind):
            acquired.set()

    tuner = threading.Thread(target=tune)
    tuner.start()
    time.sleep(0.5)
    assert not acquired.is_set() and lock.waiters(waiting) == 1
    fcntl.flock(fd, fcntl.LOCK_UN)  # the waiter got its turn and left
    os.close(fd)
    marker.unlink()
    tuner.join(timeout=10)
    assert acquired.is_set()


@pytest.mark.parametrize("first", [TIMING, UNTIMED])
def test_processes_waiting_to_time_or_to_do_untimed_work_go_before_those_waiting_to_tune(
    tmp_path, first
):
    """Untimed work (a reference, a warm-up, a memory pass) goes before tuning: with
    tuners always waiting (16 workers), ranked below them it stalled whole cells."""
    script = textwrap.dedent(
        """
        import json, sys, time
        from pathlib import Path
        from runner.schedule.gpu_lock import GpuLock
        lock = GpuLock("GPU-order", Path(sys.argv[1]))
        print("start", flush=True)
        with lock.held(sys.argv[2]):
            print(json.dumps(time.time()), flush=True)
            time.sleep(0.2)
        """
    )
    holder = _hold_lock_elsewhere("GPU-order", tmp_path, 4.0)

    def start(kind):
        proc = subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path), kind], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout.readline().strip() == "start"
        return proc

    tuners = [start(TUNING) for _ in range(3)]  # waiting first
    timer = start(first)
    times = [json.loads(p.stdout.readline()) for p in [timer, *tuners]]
    for p in [timer, *tuners, holder]:
        p.kill()
        p.wait()
    assert times[0] < min(times[1:]), times


def _environ_after_exec(pid: int, workdir: Path) -> list[bytes]:
    """A worker's environment as exec gave it. Read too early, /proc shows the forked
    parent's or (a vfork child's) nothing; the worker's scratch folder, set by the
    executor alone, says exec has happened."""
    deadline = time.monotonic() + 30
    while True:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        if f"{SCRATCH_DIR_ENV}={workdir}".encode() in environ:
            return environ
        assert time.monotonic() < deadline, environ
        time.sleep(0.01)


def test_workers_on_a_gpu_share_the_cores_out_for_torch_threads(tmp_path):
    """Several workers on GPUs each get OMP_NUM_THREADS = cores // workers (their CPU
    work is building models, not measured); CPU cells, one worker and a value the user
    set keep torch's default."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    executor = Executor(tmp_path, workers=2, env=env, gpus=["GPU-a"], lock_dir=tmp_path / "l")
    expected = max(1, len(os.sched_getaffinity(0)) // 2)
    assert executor.cpu_threads_per_worker() == expected
    worker = executor._spawn(executor._worker_kind("inductor"), 0)
    try:
        environ = _environ_after_exec(worker.proc.pid, tmp_path)
    finally:
        worker.kill()
    assert f"OMP_NUM_THREADS={expected}".encode() in environ
    assert not any(line.startswith(b"XLA_PYTHON_CLIENT_PREALLOCATE=") for line in environ)
    # An XLA worker starts with what its registry entries ask for (JAX must not take
    # the GPU's memory that torch shares), and never runs torch.compile's cells.
    xla = executor._worker_kind("xla")
    assert xla == ("xla", (("XLA_PYTHON_CLIENT_PREALLOCATE", "false"),))
    assert xla != executor._worker_kind("inductor")
    worker = executor._spawn(xla, 1)
    try:
        environ = _environ_after_exec(worker.proc.pid, tmp_path)
    finally:
        worker.kill()
    assert b"XLA_PYTHON_CLIENT_PREALLOCATE=false" in environ
    assert Executor(tmp_path, workers=2, env=env).cpu_threads_per_worker() is None
    assert Executor(tmp_path, workers=1, env=env, gpus=["a"]).cpu_threads_per_worker() is None
    mine = {**env, "OMP_NUM_THREADS": "3"}
    assert Executor(tmp_path, workers=2, env=mine, gpus=["a"]).cpu_threads_per_worker() is None


def test_two_slots_of_one_gpu_pin_their_workers_to_it_and_share_its_lock(tmp_path):
    """The multi-GPU code path on one GPU (issue 7's fallback, throughput.py
    --slots-per-gpu 2): a worker per slot, both pinned to the same GPU, one lock."""
    specs = select(["timm/test_resnet", "timm/test_vit"])
    config = CellConfig("eager", "none", "false", "fp32")
    cells = [Cell(spec, config, "full", 2, None, "cpu", "t") for spec in specs]
    results = []
    Executor(
        tmp_path,
        workers=2,
        gpus=["GPU-same", "GPU-same"],
        lock_dir=tmp_path / "locks",
    ).run(cells, on_result=results.append)
    assert sorted(r.status for r in results) == ["pass", "pass"]
    assert [p.name for p in (tmp_path / "locks").glob("*.lock")] == ["GPU-same.lock"]
    logs = sorted(tmp_path.glob("worker-*.log"))
    assert len(logs) == 2  # one worker per slot


def test_a_cell_clock_paused_for_two_reasons_at_once_counts_the_pause_once():
    running = _Running(cell=None, result_path=Path("x"), submitted=0.0, started_at="")
    running.start_clock(10.0)
    running.pause(12.0, WAITING_FOR_GPU)
    running.pause(13.0, STOPPED)  # stopped while waiting for the GPU
    running.resume(15.0, WAITING_FOR_GPU)
    assert running.elapsed_s(16.0) == pytest.approx(2.0)  # still stopped
    running.resume(17.0, STOPPED)
    assert running.elapsed_s(20.0) == pytest.approx(5.0)  # 10-12 and 17-20
    # Each reason's own pauses: what the lock cost the cell, whatever else paused it.
    assert running.waited(WAITING_FOR_GPU, 20.0) == pytest.approx(3.0)
    assert running.waited(STOPPED, 20.0) == pytest.approx(4.0)


def test_a_compile_counts_the_cells_busy_on_the_cores_beside_it_and_says_so():
    """compile_beside: time-weighted over the cell's compile phases, the other cells in
    a phase that loads the cores; a cell waiting for a GPU lock, or timing, loads none.
    timing_beside: the same over a cell's timed calls."""
    from types import SimpleNamespace

    def running(phase: str, reported: str | None = None, stopped: bool = False) -> _Running:
        state = _Running(cell=None, result_path=Path("x"), submitted=0.0, started_at="")
        state.phase, state.reported = phase, reported or phase
        return SimpleNamespace(running=state, stopped=stopped)

    compiling, building, timing = running(COMPILE), running(BUILD), running(TIMING)
    waiting = running(COMPILE, reported=WAITING)
    # Stopped while another cell times (--quiet-timing): it loads no core meanwhile.
    stopped = running(COMPILE, stopped=True)
    slots = [compiling, building, timing, waiting, stopped, None]
    since = time.monotonic() - 2.0
    _observe_crowd(slots, since)
    assert compiling.running.compiling_s == pytest.approx(2.0, abs=0.1)
    assert compiling.running.beside_s == pytest.approx(2.0, abs=0.1)  # the build only
    assert building.running.compiling_s == timing.running.compiling_s == 0.0
    assert waiting.running.compiling_s == stopped.running.compiling_s == 0.0
    building.running.phase = building.running.reported = COMPILE
    _observe_crowd(slots, time.monotonic() - 2.0)  # both compiling now
    result = make_result(notes="earlier note")
    _crowd_onto(result, compiling.running)
    assert result.compile_beside == pytest.approx(1.0, abs=0.05)
    assert result.notes.startswith("earlier note; compiled beside a mean of 1.0 other cells")
    # The timing cell counts every cell busy beside it (a build and a compile, then two
    # compiles), never the one waiting for the GPU nor the stopped one.
    assert timing.running.timing_s == pytest.approx(4.0, abs=0.2)
    assert timing.running.timing_beside_s == pytest.approx(4.0 + 4.0, abs=0.3)
    assert result.timing_beside is None  # the compiling cell was never timed
    alone = dataclasses.replace(result, notes=None, compile_beside=None)
    _crowd_onto(alone, timing.running)  # never seen compiling: nothing to say
    assert alone.compile_beside is None and alone.notes is None
    assert alone.timing_beside == pytest.approx(2.0, abs=0.05)


def _worker_states(workdir: Path) -> dict[str, tuple[str, str]]:
    """Each worker process under ``workdir``: its reported status and its process state
    (``T`` while stopped)."""
    states = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"runner.schedule.worker" not in command:
                continue
            status_file = Path(command[command.index(b"--status-file") + 1].decode())
            if status_file.parent != workdir:
                continue
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            # No status yet: still starting (importing torch), which may be stopped too.
            status = status_file.read_text().strip() if status_file.exists() else ""
            states[pid] = (status, state)
        except (FileNotFoundError, ProcessLookupError, ValueError, IndexError):
            continue
    return states


def test_quiet_timing_stops_the_other_workers_while_a_cell_times(tmp_path):
    spec = select(None, [f"{FIXTURES / 'toy_models.py'}:SlowMLP"])[0]
    cells = [
        Cell(spec, CellConfig(backend, "none", "false", "fp32"), "full", None, None, "cpu", "t")
        for backend in ("eager", "aot_eager")
    ]
    seen, done = [], threading.Event()

    def watch():
        while not done.is_set():
            seen.append(_worker_states(tmp_path))
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    results = []
    try:
        Executor(tmp_path, workers=2, lock_dir=tmp_path / "locks", quiet_timing=True).run(
            cells, on_result=results.append
        )
    finally:
        done.set()
        watcher.join()
    assert sorted(r.status for r in results) == ["pass", "pass"]
    # Moments where one worker timed while the other, busy with its cell, was stopped.
    quiet = [
        states
        for states in seen
        if any(status.endswith(" timing") and state != "T" for status, state in states.values())
        and any(state == "T" for _, state in states.values())
    ]
    assert quiet, "no worker was ever stopped while another timed"
    # Never two timing at once.
    assert not any(
        sum(status.endswith(" timing") and state != "T" for status, state in s.values()) > 1
        for s in seen
    )


def test_a_stopped_worker_dies_with_its_parent(tmp_path):
    """A worker stopped for another cell's timing when zoo-run dies would wait forever:
    the kernel kills it with its parent instead."""
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from runner.schedule.executor import Worker; "
            f"w = Worker('torch', Path({str(tmp_path)!r}), 'w', dict(__import__('os').environ)); "
            "print(w.proc.pid, flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    worker_pid = int(parent.stdout.readline())
    status = tmp_path / "w.status"
    try:
        deadline = time.monotonic() + 120
        while not (status.exists() and status.read_text().strip() == "ready"):
            assert time.monotonic() < deadline, "the worker never got ready"
            time.sleep(0.1)
        os.killpg(worker_pid, signal.SIGSTOP)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while Path(f"/proc/{worker_pid}").exists():
            state = Path(f"/proc/{worker_pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "Z":  # dead, waiting to be reaped by whoever adopted it
                break
            assert time.monotonic() < deadline, f"the stopped worker outlived its parent ({state})"
            time.sleep(0.1)
    finally:
        parent.kill()
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker_pid, signal.SIGKILL)


def test_no_cell_starts_that_would_end_after_the_deadline(tmp_path):
    """With a deadline at 1.5 times what one cell takes, the first cell ends before it
    and a second would end after it: the second never starts. (Starting cells until the
    deadline itself would start it.)"""
    cell = _eager_cpu_cell("misbehaving.py:SlowToBuild")
    cells = [dataclasses.replace(cell, batch_size=size) for size in (2, 3, 4)]
    locks = tmp_path / "locks"
    (tmp_path / "first").mkdir()
    (tmp_path / "boxed").mkdir()
    # What one cell takes the executor here: a worker started, the cell built and run.
    reference = []
    started = time.monotonic()
    Executor(tmp_path / "first", workers=1, lock_dir=locks).run([cell], reference.append)
    one_cell_s = time.monotonic() - started
    assert reference[0].status == "pass"
    results = []
    executor = Executor(tmp_path / "boxed", workers=1, lock_dir=locks)
    started = time.monotonic()
    executor.run(cells, on_result=results.append, deadline=started + 1.5 * one_cell_s)
    assert [result.status for result in results] == ["pass"], one_cell_s


def test_a_column_next_cell_is_judged_by_its_own_column(tmp_path):
    """A run of several columns (``--configs @core``): the next cell is judged against the
    deadline by the cells of its column finished so far, not by the whole run's median,
    which a column of max-autotune's minutes-long compiles would swamp either way."""
    from runner.schedule.executor import _ListFeed

    fast = _eager_cpu_cell("toy_models.py:TinyMLP")
    slow = dataclasses.replace(fast, config=CellConfig("inductor", "max-autotune", "false", "fp32"))
    executor = Executor(tmp_path, workers=1, lock_dir=tmp_path / "locks")
    # Finished so far: two eager cells of 2 s, three max-autotune cells of 300 s.
    executor._column_walls[fast.config] += [2.0, 2.0]
    executor._column_walls[slow.config] += [300.0, 300.0, 300.0]
    in_a_minute = time.monotonic() + 60.0
    # An eager cell fits a minute (the run's median, 300 s, would say no) ...
    assert not executor._feed_closed(_ListFeed([fast, slow]), in_a_minute)
    # ... a max-autotune cell does not (its column's median, 300 s).
    assert executor._feed_closed(_ListFeed([slow, fast]), in_a_minute)
    # A column none of whose cells has finished: the run's median judges it.
    fresh = dataclasses.replace(fast, config=CellConfig("aot_eager", "none", "false", "fp32"))
    assert executor._feed_closed(_ListFeed([fresh]), in_a_minute)
    assert not executor._feed_closed(_ListFeed([fresh]), time.monotonic() + 400.0)


def test_a_triage_job_of_a_cell_that_compiled_prices_its_lower_rungs_below_its_compile():
    """hrnet_w18's recorded row on the H200 (fail_accuracy, wall 123.7 s, Inductor compile
    107.9 s): its ladder job is three rungs that trace but lower nothing, and one Inductor
    rung. Priced as four whole cells (495 s) it fit no chunk's 460 s limit, run after run;
    the rungs below are priced at the wall less half the compile (333 s). A cell whose
    compile did not end is priced as before: it may fail on every rung only after as long."""
    from runner.matrix.results import CellResult
    from runner.schedule.executor import _triage_s
    from runner.triage import TRIAGE, job_seconds

    cell = dataclasses.replace(
        _eager_cpu_cell("toy_models.py:TinyMLP"),
        config=CellConfig("inductor", "default", "false", "bf16"),
    )
    job = dataclasses.replace(cell, extra={TRIAGE: "ladder"})
    accuracy = CellResult.for_cell(cell, status="fail_accuracy", wall_s=123.7, compile_s=107.9)
    assert _triage_s(job, {cell.key: accuracy}) == pytest.approx(3 * (123.7 - 53.95) + 123.7)
    assert _triage_s(job, {cell.key: accuracy}) < 460.0 < job_seconds(job, "ladder", 123.7)
    broken = CellResult.for_cell(cell, status="compile_error", wall_s=123.7, compile_s=100.0)
    assert _triage_s(job, {cell.key: broken}) == pytest.approx(4 * 123.7)
    # A bisect job adds its budget to the ladder.
    bisect = dataclasses.replace(cell, extra={TRIAGE: "bisect"})
    assert _triage_s(bisect, {cell.key: accuracy}) > _triage_s(job, {cell.key: accuracy}) + 500


@pytest.mark.slow
def test_a_triage_job_is_judged_by_its_own_cells_time(tmp_path):
    """Five fast cells, then a slow one that fails under inductor: its triage job
    builds it once per rung (four). With the deadline 12 s after the run would end
    without triage, the run's median cell would fit, the job would not: its cell is
    recorded without a verdict, for the next run to triage."""
    fast = _eager_cpu_cell("toy_models.py:TinyMLP")
    slow = dataclasses.replace(
        _eager_cpu_cell("breaking.py:SlowOpWithoutFakeKernel"),
        config=CellConfig("inductor", "default", "false", "fp32"),
    )
    cells = [dataclasses.replace(fast, batch_size=size) for size in range(2, 7)] + [slow]
    locks = tmp_path / "locks"
    (tmp_path / "first").mkdir()
    (tmp_path / "boxed").mkdir()
    reference: list = []
    started = time.monotonic()
    Executor(tmp_path / "first", workers=1, lock_dir=locks).run(cells, reference.append)
    untriaged_s = time.monotonic() - started
    assert [r.status for r in reference] == ["pass"] * 5 + ["compile_error"]
    results: list = []
    executor = Executor(tmp_path / "boxed", workers=1, lock_dir=locks)
    started = time.monotonic()
    deadline = started + untriaged_s + 12.0
    executor.run(cells, on_result=results.append, deadline=deadline, triage="ladder")
    assert [r.status for r in results] == ["pass"] * 5 + ["compile_error"], untriaged_s
    assert results[-1].triage_rung == "triage interrupted"


def _eager_cpu_cell(fixture: str, **fields) -> Cell:
    """An eager fp32 cpu cell of a fixture module (``FILE:CLASS`` under tests/fixtures)."""
    spec = select(None, [str(FIXTURES / fixture)])[0]
    return Cell(
        spec=spec,
        config=CellConfig("eager", "none", "false", "fp32"),
        size="full",
        batch_size=None,
        seq_len=None,
        device="cpu",
        env_id="test",
        **fields,
    )


def _oom_beside_a_slow_cell() -> tuple[Cell, Cell]:
    """A cell that times for over a second, and one that runs out of memory (as CUDA
    says it) at once at its batch of 8."""
    slow = _eager_cpu_cell("toy_models.py:SlowMLP")
    oom = dataclasses.replace(_eager_cpu_cell("toy_models.py:OutOfMemoryAbove2"), batch_size=8)
    return slow, oom


def _crowded_once(cell: Cell, result) -> Cell | None:
    """The executor's ``retry`` for these tests: on the CPU nothing is crowded, so every
    first out-of-memory stands for one."""
    if result.status == "oom" and cell.crowded_retries == 0:
        return cell.crowded_retry()
    return None


def test_a_crowded_retry_runs_alone_once_nothing_else_is_left(tmp_path):
    """A cell out of memory beside other processes is retried at the same batch, alone:
    once the feed has nothing more to start (emptying the GPU for it earlier would idle
    every other worker meanwhile) and the cells beside it have ended; nothing starts
    beside it."""
    slow, oom = _oom_beside_a_slow_cell()
    later = _eager_cpu_cell("toy_models.py:TinyMLP")
    results: list = []
    events: list[tuple[str, str]] = []

    def recorded(result) -> None:
        results.append(result)
        events.append(("end", result.cell_key))

    Executor(tmp_path, workers=2, lock_dir=tmp_path / "locks").run(
        [slow, oom, later],
        recorded,
        on_start=lambda cell: events.append(("start", cell.key)),
        retry=_crowded_once,
    )
    by_key = {result.cell_key: result for result in results}
    assert by_key[slow.key].status == by_key[later.key].status == "pass"
    retried = by_key[oom.key]
    assert (retried.status, retried.batch_size_run) == ("oom", 8)
    assert retried.notes.startswith("an attempt at batch 8 ended oom")
    # The cell queued behind the retry starts first, beside the slow one; the retry
    # starts once both have ended, and is the last to end.
    assert events[:3] == [("start", slow.key), ("start", oom.key), ("start", later.key)]
    assert set(events[3:5]) == {("end", later.key), ("end", slow.key)}
    assert events[5:] == [("start", oom.key), ("end", oom.key)]


def test_a_crowded_retry_that_would_end_past_the_deadline_keeps_its_attempt(tmp_path):
    """Alone, the retry would start after the run's deadline: it does not start, and
    the attempt that asked for it is recorded, saying why it stands."""
    slow, oom = _oom_beside_a_slow_cell()
    results: list = []
    starts: list[str] = []
    Executor(tmp_path, workers=2, lock_dir=tmp_path / "locks").run(
        [slow, oom],
        results.append,
        on_start=lambda cell: starts.append(cell.key),
        retry=_crowded_once,
        deadline=time.monotonic() + 2.0,
    )
    assert starts == [slow.key, oom.key]
    by_key = {result.cell_key: result for result in results}
    assert by_key[slow.key].status == "pass"
    assert by_key[oom.key].status == "oom"
    assert by_key[oom.key].notes.endswith(ALONE_NOT_REACHED)


def test_a_crowded_retry_stopped_by_an_interruption_keeps_its_attempt_and_says_so(tmp_path):
    """Interrupted while the retry runs alone: the attempt that asked for it is recorded,
    saying that its retry was stopped, not that it did not fit the time limit."""
    slow, oom = _oom_beside_a_slow_cell()
    results: list = []
    starts: list[str] = []
    executor = Executor(tmp_path, workers=2, lock_dir=tmp_path / "locks")

    def started(cell) -> None:
        starts.append(cell.key)
        if starts.count(oom.key) == 2:  # the retry alone is under way
            executor.stop()

    with pytest.raises(Interrupted):
        executor.run([slow, oom], results.append, on_start=started, retry=_crowded_once)
    assert starts == [slow.key, oom.key, oom.key]
    by_key = {result.cell_key: result for result in results}
    assert by_key[slow.key].status == "pass"
    assert by_key[oom.key].status == "oom"
    assert by_key[oom.key].notes.endswith(ALONE_INTERRUPTED)
    assert ALONE_NOT_REACHED not in by_key[oom.key].notes


def test_a_run_that_ends_by_its_deadline_keeps_time_for_its_crowded_retry(tmp_path):
    """A run with more cells than time (a chunk of a sweep): the feed closes early enough
    that the crowded retry queued meanwhile runs alone before the deadline, last, while
    cells of the feed are left for the next run."""
    slow, oom = _oom_beside_a_slow_cell()
    feed = [oom] + [dataclasses.replace(slow, batch_size=n) for n in range(1, 200)]
    events: list[tuple[str, str]] = []
    results: list = []

    def recorded(result) -> None:
        results.append(result)
        events.append(("end", result.cell_key))

    # The whole run may be kept for it: these cells' walls (seconds, a worker's start
    # included, longer on a loaded machine) are a far larger share of a short test run
    # than a GPU chunk's minute of its half hour. The feed closes that long before the
    # deadline (two walls of the first cells): on a slow 2-core machine (a CI run of
    # 2026-12-05 took 35 minutes for the suite, against 20 before), 40 s closed it
    # before a second cell of the feed started.
    executor = Executor(tmp_path, workers=2, lock_dir=tmp_path / "locks", crowded_reserve_share=1.0)
    started = time.monotonic()
    executor.run(
        feed,
        recorded,
        on_start=lambda cell: events.append(("start", cell.key)),
        retry=_crowded_once,
        deadline=started + 80.0,
    )
    assert time.monotonic() - started < 115.0
    starts = [key for what, key in events if what == "start"]
    assert 3 < len(starts) < len(feed)  # ended by the deadline, cells left
    retried = next(result for result in results if result.cell_key == oom.key)
    assert retried.status == "oom" and ALONE_NOT_REACHED not in (retried.notes or "")
    assert retried.notes.startswith("an attempt at batch 8 ended oom")
    # Its second start is the last, alone: every other cell had ended.
    assert starts[-1] == oom.key and events[-2:] == [("start", oom.key), ("end", oom.key)]


def test_the_time_kept_for_crowded_retries_is_theirs_and_the_drains_within_the_share(
    tmp_path,
):
    """The feed's deadline: the run's, less the cells under way ending (the last of
    two: the run's walls at quantile 2/3) and each queued crowded retry's column upper
    quartile, for as many as fit in the share of the run; nothing kept without a crowded
    retry or room for one."""
    slow, oom = _oom_beside_a_slow_cell()
    executor = Executor(tmp_path, workers=2, crowded_reserve_share=0.2)
    executor._column_walls[slow.config] = [30.0, 10.0, 20.0]
    crowded = [dataclasses.replace(oom, batch_size=n).crowded_retry() for n in (1, 2, 3)]
    queue = deque([crowded[0], slow, *crowded[1:]])
    drain, retry = 20.0 + 10.0 / 3, 25.0
    # 200 s of room: the drain and three retries.
    assert executor._feed_deadline(1000.0, queue, 0.0) == pytest.approx(1000.0 - drain - 3 * retry)
    # 50 s: the drain and one retry (a second would make 73).
    assert executor._feed_deadline(250.0, queue, 0.0) == pytest.approx(250.0 - drain - retry)
    # 30 s: not even one; nothing kept.
    assert executor._feed_deadline(150.0, queue, 0.0) == 150.0
    assert executor._feed_deadline(1000.0, deque([slow]), 0.0) == 1000.0
    assert executor._feed_deadline(None, queue, 0.0) is None


def test_a_cell_planned_as_a_crowded_retry_waits_to_run_alone(tmp_path):
    """A recorded row out of memory beside others is planned as a crowded retry
    (``--retry-failed``): taken from the plan first, it starts last, alone."""
    slow, oom = _oom_beside_a_slow_cell()
    later = _eager_cpu_cell("toy_models.py:TinyMLP")
    events: list[tuple[str, str]] = []
    Executor(tmp_path, workers=2, lock_dir=tmp_path / "locks").run(
        [oom.crowded_retry(), slow, later],
        lambda result: events.append(("end", result.cell_key)),
        on_start=lambda cell: events.append(("start", cell.key)),
        retry=_crowded_once,
    )
    assert events[:2] == [("start", slow.key), ("start", later.key)]
    assert events[-2:] == [("start", oom.key), ("end", oom.key)]


def test_a_cell_waiting_for_its_retry_is_recorded_when_the_run_stops(tmp_path):
    """A run stopped while a retry waits records the attempt that asked for it; the
    cell under way beside it gets no row."""
    slow, oom = _oom_beside_a_slow_cell()
    executor = Executor(tmp_path, workers=2, lock_dir=tmp_path / "locks")

    def retry(cell: Cell, result) -> Cell | None:
        retried = _crowded_once(cell, result)
        if retried is not None:
            executor.stop()
        return retried

    results: list = []
    with pytest.raises(Interrupted):
        executor.run([slow, oom], results.append, retry=retry)
    assert [(r.cell_key, r.status, r.batch_size_run) for r in results] == [(oom.key, "oom", 8)]
