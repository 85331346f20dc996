"""What a run shows a person: a progress bar while it works, a summary at the end.

Model ids, error messages and phases are the models' text, not ours: they reach the
terminal as rich ``Text`` (or through columns with markup off), never as markup, so a
message like ``must end with [/INST]`` prints as it is.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from runner.matrix.axes import NO_MODE
from runner.matrix.cells import Cell
from runner.matrix.results import CROWDED_COMPILE, PASS, STATUSES, CellResult
from runner.measure.tuning import pool_counts, reuse_kind

_STATUS_STYLE = {
    "pass": "green",
    "fail_accuracy": "yellow",
    "compile_error": "red",
    "eager_error": "magenta",
    "build_error": "magenta",
    "oom": "red",
    "timeout": "red",
    "crash": "bold red",
    "unsupported": "dim",
}


def make_progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}", style="progress.description", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("elapsed"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )


class InFlight:
    """The cells running now, for the progress line: the newest phase of a cell still in
    flight, never one already recorded (with many workers the last phase reported is
    often a cell that has finished since)."""

    def __init__(self) -> None:
        self._phases: dict[str, str] = {}  # cell key -> its latest phase, latest last

    def phase(self, key: str, text: str) -> None:
        self._phases.pop(key, None)
        self._phases[key] = text

    def finish(self, key: str) -> bool:
        """Forget a recorded cell; False if it was not in flight here."""
        return self._phases.pop(key, None) is not None

    def line(self) -> str:
        if not self._phases:
            return "waiting for a worker"
        latest = next(reversed(self._phases.values()))
        others = len(self._phases) - 1
        return latest + (f" (+{others} running)" if others else "")


def cell_line(result: CellResult, done: int, total: int) -> Text:
    """One line per finished cell, so logs of non-interactive runs say what happened."""
    mode = "" if result.mode == NO_MODE else f"/{result.mode}"
    before = [
        f"[{done}/{total}]",
        f"{result.model_id}",
        f"{result.backend}{mode} dyn={result.dynamic} {result.precision}"
        + ("" if result.step == "infer" else f" {result.step}"),
    ]
    after = []
    if result.speedup is not None:
        after.append(f"{result.speedup:.2f}x")
    if result.gpu_speedup is not None:
        after.append(f"(GPU time {result.gpu_speedup:.2f}x)")
    if result.batch_size_run is not None and result.batch_size_run != result.batch_size:
        after.append(f"ran at batch {result.batch_size_run} (out of memory at {result.batch_size})")
    if result.graph_break_count:
        after.append(f"{result.graph_break_count} breaks")
    if result.compile_s is not None:
        after.append(f"compile {result.compile_s:.1f}s")
        if (result.compile_beside or 0) >= CROWDED_COMPILE:
            after.append(f"beside {result.compile_beside:.1f} others")
    if result.status != PASS and result.error_signature:
        after.append(f"({_shorten(result.error_signature, 90)})")
    status = Text(result.status, style=_STATUS_STYLE.get(result.status, ""))
    return Text(" ").join(
        [Text(" ".join(before)), status, *([Text(" ".join(after))] if after else [])]
    )


def _shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def geomean(values: Iterable[float]) -> float | None:
    values = [v for v in values if v is not None and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def rank_correlation(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rho of paired values (ties ranked by their order); None below 3 pairs."""
    if len(xs) < 3:
        return None

    def ranks(values: list[float]) -> list[int]:
        order = sorted(range(len(values)), key=values.__getitem__)
        out = [0] * len(values)
        for rank, index in enumerate(order):
            out[index] = rank
        return out

    rx, ry = ranks(xs), ranks(ys)
    n = len(xs)
    return 1 - 6 * sum((a - b) ** 2 for a, b in zip(rx, ry, strict=True)) / (n * (n * n - 1))


def summary_key(device: str, config) -> tuple:
    """A summary row's key: the device and a config's axes (``CellConfig`` or a result)."""
    return (device, config.backend, config.mode, config.dynamic, config.precision, config.step)


def summary_table(results: list[CellResult], order: Iterable[tuple] = ()) -> Table:
    """Per config: passed/total, the other statuses, geomean speedup, median compile.
    Rows in ``order`` (``summary_key``s: the plan's, so that a run's columns read as
    it ran them), then any others sorted."""
    by_config: dict[tuple, list[CellResult]] = defaultdict(list)
    for result in results:
        by_config[summary_key(result.device, result)].append(result)
    rank = {key: index for index, key in enumerate(dict.fromkeys(order))}
    table = Table(title="zoo-run summary")
    table.add_column("config")
    table.add_column("passed", justify="right")
    table.add_column("other statuses")
    table.add_column("geomean speedup", justify="right")
    table.add_column("median compile s", justify="right")
    table.add_column("graph breaks", justify="right")
    for key in sorted(by_config, key=lambda key: (rank.get(key, len(rank)), key)):
        device, backend, mode, dynamic, precision, step = key
        rows = by_config[key]
        passed = [r for r in rows if r.status == PASS]
        others = Counter(r.status for r in rows if r.status != PASS)
        other_text = ", ".join(f"{others[s]} {s}" for s in STATUSES if others.get(s))
        speedup = geomean(r.speedup for r in passed)
        compiles = [r.compile_s for r in rows if r.compile_s is not None]
        breaks = sum(r.graph_break_count or 0 for r in rows)
        mode_text = "" if mode == NO_MODE else f"/{mode}"
        table.add_row(
            Text(
                f"{backend}{mode_text} dyn={dynamic} {precision}"
                + ("" if step == "infer" else f" {step}")
                + f" {device}"
            ),
            f"{len(passed)}/{len(rows)}",
            Text(other_text or "-"),
            f"{speedup:.2f}x" if speedup else "-",
            f"{statistics.median(compiles):.1f}" if compiles else "-",
            str(breaks),
        )
    return table


def reuse_line(results: list[CellResult]) -> str | None:
    """How many of the run's max-autotune cells compiled with tuning another cell did
    (their compile times leave it out), and what the run's pool handed on; None where
    none did."""
    pooled = [c for r in results if (c := pool_counts(r.notes)) is not None]
    partner = sum(reuse_kind(r.notes) == "partner" for r in results)
    if not pooled and not partner:
        return None
    line = f"autotuning reused (compile times leave it out): {partner} cell(s) from their partner"
    if pooled:
        shapes, tuned = sum(c[0] for c in pooled), sum(c[2] for c in pooled)
        line += (
            f", {len(pooled)} from the run's pool ({shapes} GEMM/convolution shapes at hand "
            f"in all; they benchmarked {tuned} themselves)"
        )
    return line


def crowd_line(results: list[CellResult]) -> str | None:
    """How crowded the run's compiles were (``CellResult.compile_beside``): their median,
    and how many compiled beside one other cell or more; None where none did."""
    beside = [r.compile_beside for r in results if r.compile_beside is not None]
    crowded = sum(value >= CROWDED_COMPILE for value in beside)
    if not crowded:
        return None
    return (
        f"compile times are a crowded host's: {crowded} of {len(beside)} cell(s) compiled "
        f"beside one other cell or more (over all {len(beside)}, a median of "
        f"{statistics.median(beside):.1f} others beside a compile); alone, a compile takes "
        "less (--workers 1)"
    )


def host_line(results: list[CellResult]) -> str | None:
    """How busy and how fast the host was while the run's cells were timed
    (``timing_beside``, ``host_launch_us``): the launch canary's spread, its slowest
    reading's cell, and the median of other cells busy beside a timing; None where
    fewer than two cells were timed (one reading has no spread)."""
    timed = [r for r in results if r.host_launch_us]
    if len(timed) < 2:
        return None
    canary = sorted(r.host_launch_us for r in timed)
    slowest = max(timed, key=lambda r: r.host_launch_us)
    line = (
        f"host while timed: the launch canary read {statistics.median(canary):.1f} µs per "
        f"call at the median of {len(timed)} cells ({canary[0]:.1f} fastest, "
        f"{slowest.host_launch_us:.1f} slowest, {slowest.model_id})"
    )
    beside = [r.timing_beside for r in timed if r.timing_beside is not None]
    if beside:
        line += f"; a median of {statistics.median(beside):.1f} other cells busy beside a timing"
    return line


def plan_lines(cells: list[Cell]) -> list[str]:
    return [f"{cell.describe()} · batch {cell.batch_size or 'model-defined'}" for cell in cells]


def node_table(nodes: list) -> Table:
    """A cluster run per node (``runner.cluster.executor.NodeStats``): its GPUs and
    workers, its cells by status, its pace, and whether it was lost."""
    table = Table(title="per node")
    table.add_column("node")
    table.add_column("GPUs", justify="right")
    table.add_column("workers", justify="right")
    table.add_column("cells", justify="right")
    table.add_column("passed", justify="right")
    table.add_column("other statuses")
    table.add_column("cells/hour", justify="right")
    table.add_column("lost")
    for node in nodes:
        others = ", ".join(
            f"{node.statuses[s]} {s}" for s in STATUSES if s != PASS and node.statuses.get(s)
        )
        rate = node.cells_per_hour()
        table.add_row(
            node.name,
            str(node.gpus),
            str(node.workers),
            str(node.cells),
            str(node.statuses.get(PASS, 0)),
            others or "-",
            f"{rate:.0f}" if rate else "-",
            node.lost or "-",
        )
    return table


def node_lines(nodes: list) -> list[str]:
    """What bounded each node of a cluster run (``runner.schedule.usage.Usage``)."""
    return [
        f"{node.name}: {summary}"
        for node in nodes
        if node.usage is not None and (summary := node.usage.summary())
    ]
