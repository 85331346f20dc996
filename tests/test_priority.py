"""A worker's helper processes run below its lock-holding main thread (runner.priority),
on real processes: a worker stand-in with a helper (which has a child of its own) and a
timing process it must leave alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from runner.priority import HELPER_NICE, children, helpers

SLEEP = "import time; time.sleep(120)"
WORKER = f"""
import subprocess, sys, time
from runner.priority import keep_helpers_low
helper = subprocess.Popen([sys.executable, "-c",
    "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {SLEEP!r}]); "
    "time.sleep(120)"])
timer = subprocess.Popen([sys.executable, "-c", {SLEEP!r}, "runner.eager_baseline"])
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
