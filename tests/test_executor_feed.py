"""The local executor over a feed of cells that arrive during the run (what each node of
a cluster runs), stopped from another thread."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from runner.cluster.node import CellQueue
from runner.matrix.cells import Cell, CellConfig
from runner.schedule.executor import Executor
from zoo.catalog import select
from zoo.errors import Interrupted

FIXTURES = Path(__file__).parent / "fixtures"


def _cell(module: str, backend: str = "eager") -> Cell:
    spec = select(None, [f"{FIXTURES / module}"])[0]
    return Cell(spec, CellConfig(backend, "none", "false", "fp32"), "full", None, None, "cpu", "t")


def _run_beside(tmp_path: Path, first: Cell, meanwhile, **callbacks) -> list:
    """Run ``first`` from a feed while ``meanwhile(feed, executor, results, phases)``
    acts from another thread; the results."""
    feed = CellQueue()
    feed.put([first])
    results: list = []
    phases: list[str] = []
    executor = Executor(tmp_path, workers=1, lock_dir=tmp_path / "locks")
    helper = threading.Thread(target=meanwhile, args=(feed, executor, results, phases))
    helper.start()
    try:
        executor.run(feed, on_result=results.append, on_phase=lambda c, p: phases.append(p))
    finally:
        helper.join()
    assert executor.usage is not None
    return results


def test_cells_handed_over_during_the_run_are_run_until_the_feed_is_closed(tmp_path):
    def hand_over_late(feed, executor, results, phases):
        while not results:
            time.sleep(0.1)
        feed.put([_cell("toy_models.py:TinyMLP", "aot_eager")])
        time.sleep(0.5)
        feed.close()

    results = _run_beside(tmp_path, _cell("toy_models.py:TinyMLP"), hand_over_late)
    assert [(r.backend, r.status) for r in results] == [("eager", "pass"), ("aot_eager", "pass")]


def test_stop_from_another_thread_kills_the_workers_and_drops_the_cell(tmp_path):
    def stop_when_compiling(feed, executor, results, phases):
        while "compile" not in phases:
            time.sleep(0.1)
        executor.stop()

    with pytest.raises(Interrupted):
        _run_beside(tmp_path, _cell("misbehaving.py:HangWhenCompiled"), stop_when_compiling)


def test_wrap_up_ends_on_time_stopping_a_cell_still_under_way(tmp_path):
    """A wrap-up's end is kept: a cell still compiling then is stopped without a result
    (``stopped`` names it), the cell finished before keeps its result, and the run ends
    without an error instead of waiting for the cell's own timeout (300 s)."""
    hang = _cell("misbehaving.py:HangWhenCompiled")
    feed = CellQueue()
    feed.put([_cell("toy_models.py:TinyMLP"), hang])
    results: list = []
    compiling: list = []
    executor = Executor(tmp_path, workers=1, lock_dir=tmp_path / "locks")

    def on_phase(cell, phase):
        if cell.key == hang.key and phase == "compile":
            compiling.append(time.monotonic())
            executor.wrap_up(1.0)

    started = time.monotonic()
    executor.run(feed, on_result=results.append, on_phase=on_phase)
    assert [(r.model_id, r.status) for r in results] == [("custom/toy_models:TinyMLP", "pass")]
    assert compiling and time.monotonic() - compiling[0] < 20
    assert executor.stopped == [hang] and executor.wrapped_up
    assert time.monotonic() - started < 120


def test_a_cell_that_outlasts_a_time_limited_run_is_recorded_as_its_timeout(tmp_path, monkeypatch):
    """A cell whose own clock ran most of the run and is still under way 10 s after its
    deadline could not end within any run of that length: it is stopped there with a
    `timeout` row that says so (a chunked sweep would otherwise start it again in every
    chunk, and never end it). A cell started later is left to its own timeout, as
    before. (Half the run here, not nine tenths: a worker's start, which its clock
    leaves out, takes seconds of this short run.)"""
    from dataclasses import replace

    from runner.matrix.results import OUTLASTED_RUN, TIMEOUT
    from runner.schedule import executor as executor_module
    from runner.schedule.executor import RUN_END_GRACE_S

    monkeypatch.setattr(executor_module, "LONG_CELL_SHARE", 0.5)

    first = _cell("misbehaving.py:HangWhenCompiled")
    later = replace(_cell("misbehaving.py:HangWhenCompiled", "aot_eager"), timeout_s=15.0)
    feed = CellQueue()
    feed.put([first])
    results: list = []
    executor = Executor(tmp_path, workers=2, lock_dir=tmp_path / "locks")

    def hand_over_later():
        time.sleep(7.0)
        feed.put([later])

    helper = threading.Thread(target=hand_over_later)
    helper.start()
    started = time.monotonic()
    try:
        executor.run(feed, on_result=results.append, deadline=started + 8.0)
    finally:
        helper.join()
    by_backend = {result.backend: result for result in results}
    assert sorted(by_backend) == ["aot_eager", "eager"]
    cut = by_backend["eager"]
    assert (cut.status, cut.error_type) == (TIMEOUT, OUTLASTED_RUN)
    assert 8.0 + RUN_END_GRACE_S <= cut.wall_s < 8.0 + RUN_END_GRACE_S + 5
    assert "when the run's --time-limit ended it" in cut.error_message
    assert "its own --timeout, 300 s, was not reached" in cut.error_message
    own = by_backend["aot_eager"]
    assert (own.status, own.error_type) == (TIMEOUT, "Timeout")
    assert own.error_message.startswith("no result after 15 s")
