"""A worker's helper processes run below its lock-holding main thread (runner.schedule.cpus),
on real processes: a worker stand-in with a helper (which has a child of its own) and a
timing process it must leave alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from runner.matrix.holds import TUNING
from runner.schedule.cpus import HELPER_NICE, HOLDER_NICE, Boost, children, helpers
from runner.schedule.gpu_lock import GpuLock

SLEEP = "import time; time.sleep(120)"
WORKER = f"""
import subprocess, sys, time
from runner.schedule.cpus import keep_helpers_low
helper = subprocess.Popen([sys.executable, "-c",
    "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {SLEEP!r}]); "
    "time.sleep(120)"])
timer = subprocess.Popen([sys.executable, "-c", {SLEEP!r}, "runner.backends.xla.eager_baseline"])
keep_helpers_low(busy=lambda: sys.argv[1] == "busy", every_s=0.1)
print(helper.pid, timer.pid, flush=True)
time.sleep(120)
"""


def nice(pid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, pid)


@pytest.fixture
def worker(request):
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER, request.param],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        helper, timer = (int(pid) for pid in proc.stdout.readline().split())
        deadline = time.monotonic() + 30
        while not children(helper) and time.monotonic() < deadline:
            time.sleep(0.05)
        yield proc.pid, helper, children(helper), timer
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.parametrize("worker", ["idle"], indirect=True)
def test_helpers_and_their_children_are_lowered_and_the_timer_is_not(worker):
    main, helper, grandchildren, timer = worker
    assert grandchildren, "the helper's child never started"
    assert set(helpers(main)) == {helper, *grandchildren}
    expected = max(nice(main), HELPER_NICE)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and {nice(p) for p in (helper, *grandchildren)} != {expected}:
        time.sleep(0.05)
    assert {nice(p) for p in (helper, *grandchildren)} == {expected}
    assert nice(timer) == nice(main) < expected  # the timer and the main thread keep theirs


@pytest.mark.parametrize("worker", ["busy"], indirect=True)
def test_nothing_is_lowered_while_the_worker_holds_the_lock(worker):
    main, helper, grandchildren, _ = worker
    time.sleep(0.6)  # six rounds of the thread
    assert {nice(p) for p in (helper, *grandchildren)} == {nice(main)}


def _in_thread(fn):
    """Run ``fn`` on a new thread (niceness is per thread on Linux) and return its value."""
    out = {}

    def run():
        out["value"] = fn()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return out["value"]


@pytest.mark.skipif(os.geteuid() != 0, reason="raising a thread's priority needs root")
def test_a_lock_holder_is_raised_for_the_hold_and_so_are_not_its_threads_after(tmp_path):
    def hold():
        lock = GpuLock("GPU-boost", tmp_path, boost=Boost())
        before = nice(0)
        with lock.held(TUNING):
            inside = nice(0)
            started = _in_thread(lambda: nice(0))  # a thread started in the hold inherits it
            child = threading.Thread(target=time.sleep, args=(0.5,))
            child.start()
        after = nice(0)
        child_after = os.getpriority(os.PRIO_PROCESS, child.native_id)
        child.join()
        return before, inside, started, after, child_after

    before, inside, started, after, child_after = _in_thread(hold)
    assert inside == started == min(before, HOLDER_NICE) < before
    assert after == child_after == before


def test_without_the_privilege_the_boost_turns_itself_off():
    """As an unprivileged user (root drops to nobody in a child process first)."""
    script = (
        "import os\n"
        "from runner.schedule.cpus import Boost\n"  # before: nobody may not read the stdlib
        "if os.geteuid() == 0:\n"
        "    os.setgid(65534); os.setuid(65534)\n"
        "boost = Boost(); before = os.getpriority(os.PRIO_PROCESS, 0)\n"
        "boost.raise_(); print(boost.permitted, os.getpriority(os.PRIO_PROCESS, 0) == before)\n"
        "boost.restore(); print(os.getpriority(os.PRIO_PROCESS, 0) == before)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    ).stdout.split()
    assert out == ["False", "True", "True"]
