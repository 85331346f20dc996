"""Starting cells by GPU memory (runner.schedule.memory): the rule, and real workers
kept apart by it."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from runner.cli.run import _run_order, _with_expected_memory
from runner.matrix.cells import Cell, CellConfig
from runner.plan import Plan
from runner.schedule.executor import Executor, _ListFeed
from runner.schedule.memory import (
    EXPECTED_GIB,
    EXPECTED_S,
    Deferring,
    MemoryBudget,
    expected_gib,
    observed_peak_mb,
    spread_by_need,
)
from runner.schedule.usage import Usage
from runner.store.db import Store
from runner.store.schema import RunRecord
from tests.results import make_result
from zoo.catalog import select

FIXTURES = Path(__file__).parent / "fixtures"


def _cell(model: str, backend: str = "eager", gib: float | None = None) -> Cell:
    spec = select(None, [f"{FIXTURES / 'toy_models.py'}:{model}"])[0]
    cell = Cell(spec, CellConfig(backend, "none", "false", "fp32"), "full", None, None, "cpu", "t")
    return cell if gib is None else replace(cell, extra={EXPECTED_GIB: gib})


def test_a_cell_starts_beside_others_only_where_it_fits():
    budget = MemoryBudget(100.0)  # 90 GiB to fill
    big, small = _cell("TinyMLP", gib=60), _cell("SlowMLP", gib=20)
    assert budget.fits(big, [])  # an idle GPU takes anything, even more than it has
    assert budget.fits(replace(big, extra={EXPECTED_GIB: 500}), [])
    assert budget.fits(small, [big])
    assert not budget.fits(big, [big])
    # Room kept for a cell waiting first in line.
    assert not budget.fits(small, [big], reserve_gib=20)
    # A model never recorded takes what this run's finished cells took, at their median
    # (nothing before the first has finished).
    unknown = _cell("CoreRecorder")
    assert budget.need(unknown) == 0.0
    for peak in (10_240, 20_480, 40_960):
        budget.learn(
            SimpleNamespace(
                eager_peak_reserved_mb=peak,
                compiled_peak_reserved_mb=None,
                reference_peak_reserved_mb=None,
            )
        )
    assert budget.need(unknown) == expected_gib(20_480) == 20 * 1.1 + 1
    # Without a capacity (a CPU run) every cell fits.
    assert MemoryBudget(None).fits(big, [big, big])


def test_the_feed_is_searched_past_a_cell_that_does_not_fit_and_keeps_its_order():
    """Cells that fit start past one that does not (it keeps its place, first in line);
    once it has waited long enough they start only where they leave it room."""
    cells = [_cell("TinyMLP", b, gib) for b, gib in (("eager", 80), ("aot_eager", 70))]
    cells += [_cell("SlowMLP", "eager", 50), _cell("SlowMLP", "aot_eager", 5)]
    budget = MemoryBudget(100.0)  # 90 GiB to fill
    running = [_cell("CoreRecorder", gib=30)]

    def fits(cell, reserve):
        return budget.fits(cell, running, reserve)

    feed = Deferring(_ListFeed(cells))
    # 80 and 70 do not fit beside 30; 50 does.
    assert feed.take_fitting(fits, budget.need) is cells[2]
    assert feed.passed_over == {cells[0].key, cells[1].key}
    assert [feed.take(), feed.take(), feed.take()] == [cells[0], cells[1], cells[3]]
    assert feed.exhausted()
    # Waited long enough: 50 would leave no room for 80; 5 would not either (30 + 5 +
    # 80 > 90), so nothing starts until the 30 ends.
    feed = Deferring(_ListFeed(cells), reserve_after_s=0.0)
    assert feed.take_fitting(fits, budget.need) is None
    assert feed.peek() is cells[0] and len(feed.back) == 4
    running.clear()  # an idle GPU: the first in line starts
    assert feed.take_fitting(fits, budget.need) is cells[0]


def test_a_waiting_cell_keeps_only_the_room_the_cells_ending_first_leave_it_short():
    """Backfilling: a cell first in line needs its GiB free once the cells under way
    expected to end first have ended; cells started meanwhile must leave only what
    those do not free."""
    budget = MemoryBudget(100.0)  # 90 GiB to fill
    a, b, w = _cell("TinyMLP", gib=20), _cell("SlowMLP", gib=60), _cell("CoreRecorder", gib=25)
    # 10 free now; a (20) ends in 10 s and frees 20, 5 short of w's 25: 5 is kept, so a
    # cell of 5 GiB starts now and fits beside w and b once a has ended.
    assert budget.kept_room(w, [(a, 10.0), (b, 100.0)]) == 5.0
    # b ends first: its 60 leave w room to spare, so nothing is kept.
    assert budget.kept_room(w, [(a, 100.0), (b, 10.0)]) == 0.0
    # A cell of unknown end holds its memory past any time: b frees what w needs.
    assert budget.kept_room(w, [(a, None), (b, 100.0)]) == 0.0
    # Only a (20) could free anything, and a cell of 35 would still not fit: all it
    # needs is kept.
    large = replace(w, extra={EXPECTED_GIB: 35})
    assert budget.kept_room(large, [(a, 1.0), (b, None)]) == 35.0
    # A cell that fits now (it waits for another reason) keeps all it needs.
    assert budget.kept_room(w, [(a, 1.0)]) == 25.0
    # Without a capacity every cell fits: its need, as before.
    assert MemoryBudget(None).kept_room(w, [(a, 1.0), (b, None)]) == 25.0


def test_cells_start_beside_a_large_cell_whose_successor_waits_for_its_end(tmp_path):
    """The executor's wiring: each cell under way is expected to go on for its wall
    (``EXPECTED_S``, its newest row's) less the time since it was handed out. A large
    cell waits for the large one under way; a small cell behind it starts beside that
    one, since it still fits once the first has ended. Where the wall is unknown the
    waiting cell keeps all it needs, as before."""
    from collections import deque

    from runner.schedule.executor import _Running

    executor = Executor(tmp_path, workers=3, memory_gib=10.0)  # 9 to fill
    first = replace(_cell("SlowMLP", gib=6.0), extra={EXPECTED_GIB: 6.0, EXPECTED_S: 100.0})
    second, small = _cell("SlowMLP", "aot_eager", 6.0), _cell("TinyMLP", gib=1.0)

    def slots(cell):
        running = _Running(cell, tmp_path / "r.json", time.monotonic() - 40.0, "")
        return [SimpleNamespace(running=running), None, None]

    left = executor._seconds_left([first], slots(first))
    assert left[0][0] is first and left[0][1] == pytest.approx(60.0, abs=5.0)
    feed = Deferring(_ListFeed([second, small]), reserve_after_s=0.0)
    assert executor._take_fitting(feed, [first], slots(first), deque()) is small
    assert feed.peek() is second
    # Counted for the run's summary: before, it would have waited.
    assert executor._backfilled == 1
    unknown = replace(first, extra={EXPECTED_GIB: 6.0})
    assert executor._seconds_left([unknown], slots(unknown)) == [(unknown, None)]
    feed = Deferring(_ListFeed([second, small]), reserve_after_s=0.0)
    assert executor._take_fitting(feed, [unknown], slots(unknown), deque()) is None
    # Before the waiting cell has waited long enough nothing is kept for it: no backfill.
    fresh = Executor(tmp_path, workers=3, memory_gib=10.0)
    feed = Deferring(_ListFeed([second, small]))
    assert fresh._take_fitting(feed, [unknown], slots(unknown), deque()) is small
    assert fresh._backfilled == 0


def test_a_compile_s_peak_counts_in_what_a_cell_is_expected_to_take(tmp_path):
    """The first compiled call runs outside the lock's exclusive holds, its activations
    beside the neighbours' (schema 10's ``compile_peak_reserved_mb``): where it is a row's
    largest peak, the planner and the run's own median take it."""
    store = Store.open(tmp_path / "zoo.duckdb")
    run = RunRecord(command="zoo-run", label=None, env_id="env-a")
    store.start_run(run)
    model = "custom/toy_models:TinyMLP"
    row = make_result(
        "a",
        model_id=model,
        device="cuda",
        eager_peak_reserved_mb=1_000,
        compiled_peak_reserved_mb=2_000,
        reference_peak_reserved_mb=3_000,
        compile_peak_reserved_mb=6_000,
        resident_mb=500,
    )
    store.write_results(run.run_id, [row])
    assert store.peak_reserved_mb([model], "cuda") == {(model, "infer"): 6_000}
    assert observed_peak_mb(row) == 6_000
    # Rows recorded before schema 10 have none: the other peaks stand.
    assert observed_peak_mb(replace(row, compile_peak_reserved_mb=None)) == 3_000
    with store.connection(read_only=True) as con:
        assert con.execute("SELECT resident_mb FROM results").fetchone() == (500,)


def test_memory_bound_runs_say_so():
    usage = Usage(elapsed_s=60, workers=4, cells=10, cpus=2, cpu_busy=0.2, cpu_steal=0.0)
    assert "more --workers may go faster" in usage.bound()
    usage.memory_waits = 3
    assert usage.bound().startswith("memory-bound: 3 cell(s) waited")
    assert "also waited" not in usage.bound()
    # Workers that queued on the lock as well: the run says both.
    usage.lock_held_s = {"GPU-4b184857-6a6b": {"timing": 20.0, "tuning": 10.0}}
    usage.lock_wait = 0.3
    assert usage.bound() == (
        "memory-bound: 3 cell(s) waited for room in a GPU's memory; the workers also "
        "waited 30% of their time for the lock of GPU-4b184857; more workers would not help"
    )
    usage.lock_held_s, usage.lock_wait = {}, None
    assert "backfilled" not in usage.line()
    usage.backfilled = 2
    assert "2 cell(s) backfilled beside one waiting for memory" in usage.line()
    # A cluster node's usage comes back to the driver as a dict.
    again = Usage.from_dict(usage.to_dict())
    assert (again.memory_waits, again.backfilled) == (3, 2)


def _spans(tmp_path: Path, cells: list[Cell], memory_gib: float | None) -> dict[str, tuple]:
    """Each cell's (start, end) over a real run of three workers."""
    started: dict[str, float] = {}
    spans: dict[str, tuple] = {}

    def on_result(result):
        spans[result.cell_key] = (started[result.cell_key], time.monotonic(), result.status)

    tmp_path.mkdir()
    executor = Executor(tmp_path, workers=3, lock_dir=tmp_path / "locks", memory_gib=memory_gib)
    executor.run(
        cells, on_result=on_result, on_start=lambda c: started.setdefault(c.key, time.monotonic())
    )
    assert {status for *_, status in spans.values()} == {"pass"}
    return spans


def _overlap(a: tuple, b: tuple) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_workers_are_kept_apart_by_memory_and_start_together_without_it(tmp_path):
    """Two cells expected to take 6 GiB each of a 10 GiB device (9 to fill) never run at
    once, while a 2 GiB one runs beside either; without a capacity the three start
    together on three workers."""
    big = [_cell("SlowMLP", "eager", 6.0), _cell("SlowMLP", "aot_eager", 6.0)]
    small = _cell("TinyMLP", "eager", 2.0)
    cells = [*big, small]
    spans = _spans(tmp_path / "kept", cells, memory_gib=10.0)
    assert not _overlap(spans[big[0].key], spans[big[1].key])
    assert _overlap(spans[small.key], spans[big[0].key])
    free = _spans(tmp_path / "free", cells, memory_gib=None)
    assert _overlap(free[big[0].key], free[big[1].key])


def test_the_planner_expects_a_models_largest_recorded_peak(tmp_path):
    """A cell of a model recorded before carries what it reserved at its peak there, the
    largest of the reference's, eager's and compiled's over the newest row of each of its
    cells, by step and device; a model never recorded carries nothing."""
    store = Store.open(tmp_path / "zoo.duckdb")
    run = RunRecord(command="zoo-run", label=None, env_id="env-a")
    store.start_run(run)
    model = "custom/toy_models:TinyMLP"
    rows = [
        # An older row of one cell gives way to its newest.
        make_result("a", model_id=model, device="cuda", eager_peak_reserved_mb=90_000),
        make_result("a", model_id=model, device="cuda", eager_peak_reserved_mb=2_048),
        make_result("b", model_id=model, device="cuda", compiled_peak_reserved_mb=4_096),
        make_result("c", model_id=model, device="cuda", step="train", eager_peak_reserved_mb=8e3),
        # The accuracy reference's peak counts too: a float64 copy beside the model.
        make_result(
            "g",
            model_id=model,
            device="cuda",
            step="train",
            eager_peak_reserved_mb=1e3,
            reference_peak_reserved_mb=12e3,
        ),
        make_result("d", model_id=model, device="cpu", eager_peak_reserved_mb=50_000),
        make_result(
            "f",
            model_id="custom/x:Other",
            family="custom",
            device="cuda",
            compiled_peak_reserved_mb=3e4,
        ),
    ]
    for row in rows:
        store.write_results(run.run_id, [row])
        time.sleep(0.01)
    assert store.peak_reserved_mb([model], "cuda") == {
        (model, "infer"): 4096,
        (model, "train"): 12e3,
    }
    assert store.peak_reserved_mb([], "cuda") == {}
    # A grouping it does not know is refused, with or without names.
    for names in ([], [model]):
        with pytest.raises(ValueError, match="by model_id or family, not 'size'"):
            store.peak_reserved_mb(names, "cuda", by="size")
    cuda = [replace(_cell(name), device="cuda") for name in ("TinyMLP", "SlowMLP")]
    plan = _with_expected_memory(Plan(cells=cuda), store, "cuda")
    assert plan.cells[0].extra[EXPECTED_GIB] == round(expected_gib(4096), 1) == 5.4
    # A user's module shares its family name (custom) with every other: no kin.
    assert EXPECTED_GIB not in plan.cells[1].extra
    # A model never recorded takes its family's largest (timm/resnet18's row, 10 GiB).
    store.write_results(
        run.run_id, [make_result("e", device="cuda", eager_peak_reserved_mb=10_240)]
    )
    (resnet50,) = select(["timm/resnet50"])
    kin = replace(cuda[1], spec=resnet50)
    plan = _with_expected_memory(Plan(cells=[kin]), store, "cuda")
    assert plan.cells[0].extra[EXPECTED_GIB] == round(expected_gib(10_240), 1) == 12.0
    # How long a cell is expected to hold its memory: its own newest row's wall.
    assert EXPECTED_S not in plan.cells[0].extra
    store.write_results(run.run_id, [make_result(kin.key, device="cuda", wall_s=30.0)])
    time.sleep(0.01)
    store.write_results(run.run_id, [make_result(kin.key, device="cuda", wall_s=42.5)])
    plan = _with_expected_memory(Plan(cells=[kin, cuda[0]]), store, "cuda")
    assert plan.cells[0].extra[EXPECTED_S] == 42.5
    assert EXPECTED_S not in plan.cells[1].extra


def test_a_first_crowded_retry_shares_its_gpu_with_room_kept_and_known_neighbours():
    """A crowded retry's own need is unknown (it ran out before its peak): it is
    expected to take at least 0.3 of what the GPU fills, and it shares the GPU only
    with cells whose needs were recorded. Its second retry, or any where the GPU's
    memory is unknown, runs alone."""
    budget = MemoryBudget(30.0)  # 27 GiB to fill: a retry takes at least 8.1
    known, unknown = _cell("SlowMLP", gib=6.0), _cell("TinyMLP", "aot_eager")
    retry = _cell("CoreRecorder", gib=2.0).crowded_retry()
    assert budget.need(retry) == pytest.approx(8.1)
    assert budget.need(replace(retry, extra={**retry.extra, EXPECTED_GIB: 12.0})) == 12.0
    assert budget.fits(retry, [known]) and budget.fits(known, [retry])
    # Room for the retry is kept: 6 + 8.1 + 13 > 27.
    assert not budget.fits(_cell("SlowMLP", "aot_eager", 13.0), [known, retry])
    # A neighbour of unknown need, however small this run's median says it is.
    assert budget.need(unknown) == 0.0
    assert not budget.fits(retry, [unknown]) and not budget.fits(unknown, [retry])
    assert budget.fits(retry, [])  # an idle GPU
    # Large cells finished in this run set the median an unknown cell is expected to
    # take; not a crowded retry's: two of them still share 27 GiB.
    for peak in (20_480, 20_480):
        budget.learn(
            SimpleNamespace(
                eager_peak_reserved_mb=peak,
                compiled_peak_reserved_mb=None,
                reference_peak_reserved_mb=None,
            )
        )
    assert budget.need(unknown) == expected_gib(20_480) == 23.0
    bare = _cell("TinyMLP", "aot_eager").crowded_retry()
    assert budget.need(bare) == pytest.approx(8.1)
    assert budget.fits(bare, [retry])
    assert not budget.alone(retry) and budget.alone(retry.crowded_retry())
    assert not budget.alone(known)
    assert MemoryBudget(None).alone(retry)


def test_the_feed_keeps_room_for_a_crowded_retry_waiting_to_share(tmp_path):
    """A crowded retry that does not fit beside the cells under way waits; cells of the
    feed start meanwhile only where they leave it room, or it would wait for ever."""
    from collections import deque

    executor = Executor(tmp_path, workers=3, memory_gib=30.0)  # 27 to fill
    beside = [_cell("SlowMLP", gib=15.0)]
    waiting = _cell("CoreRecorder", gib=2.0).crowded_retry()  # needs 8.1: 15 + 8.1 + 5 > 27
    small = _cell("TinyMLP", gib=5.0)
    assert executor._take_fitting(Deferring(_ListFeed([small])), beside, [], deque()) is small
    feed = Deferring(_ListFeed([small]))
    assert executor._take_fitting(feed, beside, [], deque([waiting])) is None
    assert feed.peek() is small


def test_a_crowded_retry_shares_the_gpu_at_once_and_its_second_runs_alone(tmp_path):
    """Real workers on a 30 GiB device whose cells' needs are known: the first retry
    of a cell that ran out of memory beside others starts at once, before the feed's
    next cell (alone, it waited for the feed to end); out of memory again, its second
    retry runs alone, last."""
    slow = _cell("SlowMLP", gib=6.0)
    oom = replace(_cell("OutOfMemoryAbove2", gib=2.0), batch_size=8)
    later = _cell("TinyMLP", gib=2.0)
    events: list[tuple[str, str]] = []
    results: list = []

    def recorded(result) -> None:
        results.append(result)
        events.append(("end", result.cell_key))

    def crowded_twice(cell: Cell, result) -> Cell | None:
        # On the CPU nothing is crowded: every out-of-memory stands for a crowded one.
        return cell.crowded_retry() if result.status == "oom" and cell.crowded_retries < 2 else None

    Executor(tmp_path, workers=2, lock_dir=tmp_path / "locks", memory_gib=30.0).run(
        [slow, oom, later],
        recorded,
        on_start=lambda cell: events.append(("start", cell.key)),
        retry=crowded_twice,
    )
    starts = [key for what, key in events if what == "start"]
    assert starts == [slow.key, oom.key, oom.key, later.key, oom.key]
    assert events[-2:] == [("start", oom.key), ("end", oom.key)]
    by_key = {result.cell_key: result for result in results}
    assert by_key[slow.key].status == by_key[later.key].status == "pass"
    assert by_key[oom.key].status == "oom"
    assert by_key[oom.key].notes.count("an attempt at batch 8 ended oom") == 2


def test_large_cells_are_spread_by_need_and_never_moved_earlier():
    """Cells above a worker's share and the mean need wait until the cells placed before
    leave room for their excess over the mean; none moves earlier, the rest keep their
    order."""
    large = [replace(_cell("SlowMLP", gib=40.0), batch_size=b) for b in (1, 2)]
    small = [replace(_cell("TinyMLP", gib=8.0), batch_size=b) for b in range(1, 7)]
    # A mean of 16 GiB: each small cell leaves 8 of room, each large one takes 24.
    spread = [*small[:3], large[0], *small[3:], large[1]]
    assert spread_by_need([*large, *small], share_gib=10.0) == spread
    assert spread_by_need(spread, share_gib=10.0) == spread  # far enough apart already
    mixed = [small[0], large[0], *small[1:4], large[1], *small[4:]]
    assert spread_by_need(mixed, share_gib=10.0) == spread
    # Held cells with no room before the end come last, in order (a mean of 32).
    wide = replace(small[0], extra={EXPECTED_GIB: 16.0})
    assert spread_by_need([*large, wide], share_gib=10.0) == [wide, *large]
    # Room saved up by many small cells lets one large cell through, not two at once
    # (4 and 40 GiB: a mean of 8.5, each small cell leaves 4.5 of room, a large takes
    # 31.5; fourteen small ones save 63, kept to 31.5).
    tiny = [replace(small[0], batch_size=b, extra={EXPECTED_GIB: 4.0}) for b in range(21)]
    three = [*large, replace(large[0], batch_size=3)]
    assert spread_by_need([*tiny[:14], *three[:2], *tiny[14:], three[2]], 10.0) == [
        *tiny[:14], three[0], *tiny[14:], three[1], three[2]
    ]  # fmt: skip
    # A cell within a worker's share is not held, whatever the mean.
    assert spread_by_need([*large, *small], share_gib=40.0) == [*large, *small]
    # Nothing moves without a share (a CPU run) or with fewer than two needs known.
    assert spread_by_need([*large, *small], None) == [*large, *small]
    unknown = [_cell("CoreRecorder"), large[0], _cell("CoreRecorder", "aot_eager")]
    assert spread_by_need(unknown, share_gib=1.0) == unknown
    # A need not recorded counts as the median of those recorded (8 here).
    bare = [replace(_cell("CoreRecorder"), batch_size=b) for b in (1, 2, 3)]
    assert spread_by_need([*large, *bare, *small[3:]], share_gib=10.0) == [
        *bare, large[0], *small[3:], large[1]
    ]  # fmt: skip


def test_a_workers_share_of_its_gpu():
    budget = MemoryBudget(100.0)  # 90 to fill
    assert budget.share_gib(workers=9, gpus=1) == 10.0
    assert budget.share_gib(workers=9, gpus=3) == 30.0
    assert budget.share_gib(workers=10, gpus=3) == 22.5  # four on the busiest
    assert budget.share_gib(workers=3, gpus=0) == 30.0
    assert MemoryBudget(None).share_gib(workers=3, gpus=1) is None


def test_a_run_spreads_its_large_cells_so_others_run_beside_them(tmp_path, monkeypatch):
    """Real workers, two large cells planned back to back on a 10 GiB device (3 GiB a
    worker's share): each is put after a small one, and the small ones run beside the
    first. Planned in order, the second would wait first in line (at once here, where
    cells wait no time before room is kept for them) and hold the small ones back
    until the first ended."""
    import runner.schedule.memory as memory

    monkeypatch.setattr(memory, "RESERVE_AFTER_S", 0.0)
    big = [_cell("SlowMLP", "eager", 6.0), _cell("SlowMLP", "aot_eager", 6.0)]
    small = [_cell("TinyMLP", "eager", 1.0), _cell("TinyMLP", "aot_eager", 1.0)]
    spans = _spans(tmp_path / "spread", [*big, *small], memory_gib=10.0)
    assert all(_overlap(spans[big[0].key], spans[cell.key]) for cell in small)
    assert not _overlap(spans[big[0].key], spans[big[1].key])


def test_a_cluster_spreads_large_cells_by_its_smallest_share():
    """The Ray driver hands cells out in order, so it spreads them by the smallest
    worker's share among its nodes with GPUs; CPU nodes (or GPUs of unknown memory)
    give none."""
    from runner.cluster.executor import NodeStats, _Node, smallest_share

    def node(name: str, gpus: int, memory_gb: float | None, workers: int = 14) -> _Node:
        info = {"env": {"gpu_memory_gb": memory_gb}, "default_workers": workers}
        return _Node(name, name, None, info, NodeStats(name, name, gpus))

    h200, h100s = node("a", 1, 100.0), node("b", 8, 80.0, workers=16)
    assert smallest_share([h200, h100s], None) == pytest.approx(90.0 / 14)
    assert smallest_share([h200, h100s], 4) == pytest.approx(22.5)  # 90 over 4
    assert smallest_share([h100s, node("c", 0, None)], None) == pytest.approx(36.0)
    assert smallest_share([node("c", 0, None), node("d", 1, None)], None) is None
    assert smallest_share([], None) is None


def test_a_dry_run_lists_cells_in_the_order_a_run_hands_them_out():
    """--dry-run prints the spread order on a GPU of known memory (the executors spread
    a plan's list), the plan's own order on the CPU or a GPU of unknown memory."""
    large = [replace(_cell("SlowMLP", gib=40.0), batch_size=b) for b in (1, 2)]
    small = [replace(_cell("TinyMLP", gib=8.0), batch_size=b) for b in range(1, 7)]
    planned = [*large, *small]
    # 14 workers on one 80 GiB GPU: a share of 72/14 GiB, under the mean need of 16.
    gpu = {"gpu_memory_gb": 80.0}
    assert _run_order(planned, gpu, 14, 1) == [*small[:3], large[0], *small[3:], large[1]]
    assert _run_order(planned, gpu, 14, 0) == planned  # no GPU: nothing moves
    assert _run_order(planned, {}, 14, 1) == planned  # memory unknown
    assert _run_order(planned, gpu, 1, 1) == planned  # one worker: a share of 72 GiB
