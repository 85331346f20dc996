"""Starting cells by GPU memory: a cell starts beside others on a GPU only where the
memory the cells under way there are expected to take, and its own, fit in the GPU.

Without it, workers start cells as they free up, whatever their models take. In run
021ee7b0 (67 HF models of 1-14B parameters after their depth cuts, 14 workers on one
H200) 35 cells ran out of memory beside others in their first minutes; each was retried
alone (``runner.schedule.executor``), one after another, and the run spent 19 of its 25
minutes with one cell under way.

What a cell is expected to take: its model's largest peak recorded on this device for
the same step (``runner.store.db.Store.peak_reserved_mb``, set on the cell by the
planner as ``EXPECTED_GIB``), else its family's largest, with a margin for what moves
between runs and the CUDA context (``PEAK_MARGIN``, ``CONTEXT_GIB``); a family never
recorded is expected to take what this run's finished cells took at their median
(nothing before the first finishes: the first cells start as before). A cell that does not fit waits, first in line, while later cells that fit
start; once it has waited a minute they start only where they leave it room
(``MemoryBudget.kept_room``). It starts once its GPU has room for it, and always on an
idle GPU.

Cells that take more than a worker's share are spread through a run's list
(``spread_by_need``): listed together, each would wait for the ones before while the
other workers stood idle.

A crowded retry (a cell that ran out of memory beside other processes holding most of
the device's) shares its GPU the first time (``SHARED_CROWDED_RETRIES``): it is expected
to take at least ``CROWDED_ROOM_SHARE`` of what the GPU fills, and only cells whose
needs are known from recorded peaks run beside it. A later retry of it runs alone
(``runner.schedule.executor``). Alone, each retry holds every other worker idle, most
of it compiling on the CPU while the GPU stands empty: the headline column's 21 crowded
rows were priced at about 25 minutes one after another (about 70 s each).
"""

from __future__ import annotations

import math
import statistics
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace

from runner.matrix.cells import Cell
from runner.matrix.results import PEAK_COLUMNS, CellResult
from zoo.custom import SUITE as CUSTOM

# Cell.extra's entry: the GiB a cell is expected to take on its GPU.
EXPECTED_GIB = "expected_gib"
# Cell.extra's entry: the wall seconds a cell is expected to take (its newest row's).
EXPECTED_S = "expected_s"
# The share of a GPU's memory that cells are started to fill.
MEMORY_SHARE = 0.9
# A recorded peak (the caching allocator's, reserved, the float64 reference's included
# since schema 7) understates what a worker holds by its CUDA context, and by what moves
# between runs. Read by nvidia-smi beside H100 run 06463b98 (61 cells, 14 workers): a
# process held 0.72 GiB at its least (median; 0.94 at most), the largest 43.8 GiB beside
# its cell's 43.1 GiB peak, and the card never more than 0.86 of what the cells under
# way were expected to take at a margin of 1.0 (benchmarks/memory_margin.py). Over 37
# H200 cells measured twice since schema 7, the newer peak was a median 1.00x the older,
# 1.17x at most. 1.25, the margin before, left the H100 holding 11 cells where 14 fit.
PEAK_MARGIN = 1.1
CONTEXT_GIB = 1.0
# How far past a cell that does not fit the feed is searched for one that does.
LOOKAHEAD = 16
# How many cells that wait for a partner under way may be passed besides: one per cell
# under way at most, so as many as a host's workers.
WAITING_LOOKAHEAD = 256
# A cell passed over this long has the memory it needs kept free for it: later cells
# start beside the cells under way only where they leave it room. Before, they fill in.
RESERVE_AFTER_S = 60.0
# The share of what a GPU fills that a crowded retry sharing it is expected to take at
# least: what its model takes is unknown (it ran out of memory before its peak). The
# headline column's crowded rows held 0-30 GiB of the H200's 139.8 when they ran out,
# beside neighbours holding the rest. 0.3 of the 125.8 GiB filled is 37.7: three retries
# at once, with 12 GiB left for cells of small known needs.
CROWDED_ROOM_SHARE = 0.3
# How many crowded retries of a cell share their GPU; later ones run alone.
SHARED_CROWDED_RETRIES = 1


def spread_by_need(cells: list[Cell], share_gib: float | None) -> list[Cell]:
    """``cells`` in an order whose memory comes evenly, none moved earlier than planned.

    ``share_gib`` is a worker's even share of its GPU (what the GPU is filled to over
    the workers on it). A cell expected to take more than that, and more than the
    cells' mean need, is held back until the GiB the cells placed before it are
    expected to take, less the mean need per cell placed, leaves room for its excess
    over the mean (room saved up is kept to the largest such excess); the others keep
    their order, and so do the held ones among themselves. So no stretch of the list asks for much more than the mean, and the
    cells under way at once take about as much as the average mix. Held cells left at
    the end come last. A need not recorded counts as the median of those recorded
    (what the run will expect of it until its first cells end). Without a share (CPU
    runs, a GPU of unknown memory) nothing moves.

    Why: the catalogue's order puts families together, and a family of large models
    back to back makes each wait for the ones before (``Deferring``), holding every
    other worker idle once it has waited ``RESERVE_AFTER_S``. An H100 chunk of the
    headline column (run 0697dd20, 14 workers, a card with no rows of its own yet)
    began with timm's 12 aimv2 models, expected to take 10-72 GiB each of the 72 it
    fills, and recorded 8 of them, one or two at a time, in its 505 s."""
    if share_gib is None:
        return list(cells)
    known = [float(c.extra[EXPECTED_GIB]) for c in cells if c.extra.get(EXPECTED_GIB) is not None]
    if len(known) < 2:
        return list(cells)
    default = statistics.median(known)
    needs = {
        id(c): float(c.extra[EXPECTED_GIB]) if c.extra.get(EXPECTED_GIB) is not None else default
        for c in cells
    }
    mean = statistics.fmean(needs.values())
    floor = max(mean, share_gib)
    # Room saved up by a long stretch of small cells lets one large cell through, not a
    # family of them back to back: it is kept to the largest excess over the mean.
    most = max(needs.values()) - mean
    spread: list[Cell] = []
    held: deque[Cell] = deque()
    # The mean need per cell placed, less what the placed cells are expected to take.
    room = 0.0
    for cell in cells:
        if needs[id(cell)] > floor:
            held.append(cell)
        else:
            spread.append(cell)
            room = min(room + mean - needs[id(cell)], most)
        while held and room >= needs[id(held[0])] - mean:
            large = held.popleft()
            spread.append(large)
            room += mean - needs[id(large)]
    spread.extend(held)
    return spread


def recorded_peak_mb(
    cell: Cell,
    peaks: dict[tuple[str, str], float],
    family_peaks: dict[tuple[str, str], float],
) -> float | None:
    """The peak ``cell`` is expected to reach: its model's recorded for its step
    (``peaks``, by model id: ``runner.store.db.peak_reserved_mb``), else its family's
    (``family_peaks``, by family: a family's classes share their layers; their heads
    differ). A user's modules share one family name (custom): no kin of each other."""
    step = cell.config.step
    peak = peaks.get((cell.spec.id, step))
    if peak is None and cell.spec.suite != CUSTOM:
        peak = family_peaks.get((cell.spec.family, step))
    return peak


def with_expected(
    cells: list[Cell],
    peaks: dict[tuple[str, str], float],
    family_peaks: dict[tuple[str, str], float],
) -> list[Cell]:
    """``cells``, each whose peak is recorded (``recorded_peak_mb``) carrying the GiB it is
    expected to take as ``EXPECTED_GIB``."""
    out = []
    for cell in cells:
        peak = recorded_peak_mb(cell, peaks, family_peaks)
        if peak is not None:
            cell = replace(cell, extra={**cell.extra, EXPECTED_GIB: round(expected_gib(peak), 1)})
        out.append(cell)
    return out


def expected_gib(peak_reserved_mb: float) -> float:
    """What a cell whose model peaked at ``peak_reserved_mb`` is expected to take."""
    return peak_reserved_mb / 1024 * PEAK_MARGIN + CONTEXT_GIB


def observed_peak_mb(result: CellResult) -> float | None:
    peaks = [p for p in (getattr(result, c, None) for c in PEAK_COLUMNS) if p is not None and p > 0]
    return max(peaks) if peaks else None


class MemoryBudget:
    """The memory of one kind of GPU (``capacity_gib`` each) shared out among cells;
    without a capacity (CPU runs, or a GPU whose memory is unknown) every cell fits."""

    def __init__(self, capacity_gib: float | None, share: float = MEMORY_SHARE) -> None:
        self.capacity_gib = capacity_gib
        self.share = share
        self._observed: list[float] = []

    @property
    def limit_gib(self) -> float | None:
        return None if self.capacity_gib is None else self.capacity_gib * self.share

    def share_gib(self, workers: int, gpus: int) -> float | None:
        """A worker's even share of its GPU's memory, ``workers`` spread over ``gpus``
        (none: one host's CPU); None without a capacity (``spread_by_need``)."""
        limit = self.limit_gib
        if limit is None:
            return None
        return limit / math.ceil(workers / max(gpus, 1))

    def alone(self, cell: Cell) -> bool:
        """Whether ``cell`` is a crowded retry that runs alone on its GPU: a later one
        than ``SHARED_CROWDED_RETRIES``, or any where the GPU's memory is unknown."""
        return bool(cell.crowded_retries) and (
            self.limit_gib is None or cell.crowded_retries > SHARED_CROWDED_RETRIES
        )

    def learn(self, result: CellResult) -> None:
        """A finished cell's peak: what cells of families never recorded are expected to take."""
        peak = observed_peak_mb(result)
        if peak is not None:
            self._observed.append(expected_gib(peak))

    def need(self, cell: Cell) -> float:
        """What ``cell`` is expected to take: its recorded peak's ``EXPECTED_GIB``, else
        the median of this run's finished cells. A crowded retry sharing its GPU takes
        at least ``CROWDED_ROOM_SHARE`` of it, and no median: in run 4eb8cbcf (an H200,
        a --retry-failed step) the first three cells to end, two samvit ones whose float64
        references peaked at 119 GiB among them, set the median at 152 GiB, more than
        the 125.8 filled, and the crowded retries after them ran one at a time."""
        known = cell.extra.get(EXPECTED_GIB)
        if cell.crowded_retries and self.limit_gib is not None:
            floor = self.limit_gib * CROWDED_ROOM_SHARE
            return floor if known is None else max(float(known), floor)
        if known is not None:
            return float(known)
        return statistics.median(self._observed) if self._observed else 0.0

    def kept_room(self, waiting: Cell, beside: list[tuple[Cell, float | None]]) -> float:
        """The GiB that cells started beside ``beside`` must leave free for ``waiting``
        (first in line, it does not fit): what it needs, less what the cells under way
        that are expected to end first free before it fits. ``beside``: the cells under
        way on its GPU, each with the seconds it is expected to go on for (None where
        unknown: it holds its memory past any time).

        A cell that leaves that much free fits beside ``waiting`` and the cells that go
        on after it would start, so it does not hold ``waiting`` back, however long it
        runs, where the others end in the expected order (HPC schedulers call this
        backfilling). Before, all of ``waiting``'s need was kept free beside every cell
        under way: while one large cell ran, and the next waited for its end, small
        cells were held back too, though both would have fitted beside them (an H100
        chunk of the headline column, run cabd1898, ran one cell for its last 14 s of
        ``aimv2_1b_patch14_448`` with 10-17 GiB of its card free). Where ``waiting``
        would not fit even once every cell of known end had ended, all of its need is
        kept."""
        need = self.need(waiting)
        limit = self.limit_gib
        if limit is None:
            return need
        free = limit - sum(self.need(cell) for cell, _ in beside)
        if free >= need:
            return need
        freed = 0.0
        for cell, _ in sorted(
            (pair for pair in beside if pair[1] is not None), key=lambda pair: pair[1]
        ):
            freed += self.need(cell)
            if free + freed >= need:
                return max(need - freed, 0.0)
        return need

    def fits(self, cell: Cell, beside: list[Cell], reserve_gib: float = 0.0) -> bool:
        """Whether ``cell`` may start on a GPU where ``beside`` are under way, keeping
        ``reserve_gib`` free (for a cell waiting first in line). On an idle GPU every
        cell starts: it has all there is. Where a crowded retry is one of them, every
        other cell's need must be known (a recorded peak): a guess from this run's
        median is how a retry meets a large neighbour again."""
        limit = self.limit_gib
        if limit is None or not beside:
            return True
        cells = [cell, *beside]
        if any(c.crowded_retries for c in cells) and not all(
            c.crowded_retries or EXPECTED_GIB in c.extra for c in cells
        ):
            return False
        taken = sum(self.need(c) for c in beside)
        return taken + self.need(cell) + reserve_gib <= limit


class Deferring:
    """A feed whose cells may be put back in front, in their order: cells taken that did
    not fit their GPU's memory then."""

    def __init__(
        self,
        feed,
        reserve_after_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``clock``: seconds, for how long a cell has waited (a replay of the rule over
        recorded cells passes its own: ``benchmarks/memory_order.py``)."""
        self.feed = feed
        self.back: deque[Cell] = deque()
        self.reserve_after_s = RESERVE_AFTER_S if reserve_after_s is None else reserve_after_s
        self.clock = clock
        # The cells passed over for want of memory, by key: when first.
        self.first_passed: dict[str, float] = {}

    @property
    def passed_over(self) -> set[str]:
        return set(self.first_passed)

    def take(self) -> Cell | None:
        return self.back.popleft() if self.back else self.feed.take()

    def peek(self) -> Cell | None:
        if self.back:
            return self.back[0]
        peek = getattr(self.feed, "peek", None)
        return peek() if peek is not None else None

    def exhausted(self) -> bool:
        return not self.back and self.feed.exhausted()

    def take_fitting(
        self,
        fits: Callable[[Cell, float], bool],
        keep: Callable[[Cell], float],
        waits: Callable[[Cell], bool] = lambda cell: False,
    ) -> Cell | None:
        """The first cell that ``fits``, searching ``LOOKAHEAD`` cells (and up to
        ``WAITING_LOOKAHEAD`` that wait, besides); the others are put
        back in front, in order. Past the first cell passed over for memory, a cell must
        leave the room ``keep`` says for it (``MemoryBudget.kept_room``; its need, say)
        once it has waited ``reserve_after_s``. A cell that ``waits``
        (for another cell under way: ``runner.measure.tuning``) is passed over too, but
        neither reserves memory nor counts as waiting for it. None when none fits (or
        the feed has none for now)."""
        passed: list[Cell] = []
        first: Cell | None = None
        found = None
        now = self.clock()
        waiting = 0
        while len(passed) - waiting <= LOOKAHEAD and waiting <= WAITING_LOOKAHEAD:
            cell = self.take()
            if cell is None:
                break
            if waits(cell):
                passed.append(cell)
                waiting += 1
                continue
            reserve = 0.0
            if first is not None and now - self.first_passed[first.key] >= self.reserve_after_s:
                reserve = keep(first)
            if fits(cell, reserve):
                found = cell
                break
            passed.append(cell)
            self.first_passed.setdefault(cell.key, now)
            first = first or cell
        self.back.extendleft(reversed(passed))
        return found
