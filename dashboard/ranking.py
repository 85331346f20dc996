"""The Leaderboard's table: its columns, what each shows of a quick view's cells (the
frame ``reads.leaderboard`` returns), and their number formats. A module, not the page,
so that the CSV of a view and its tests see the same columns."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from dashboard import caveats, reads

# The table's columns: what each shows of a view's cells. The first ones are shown at
# 1400 px without scrolling; the rest are a click away (More columns) and in the CSV.
COLUMNS = {
    "model": lambda cells: cells["row_id"],
    "config": lambda cells: cells["config"],
    "status": lambda cells: cells["status"],
    "speedup": lambda cells: cells["speedup"],
    # Beside the speedup it qualifies.
    "caveats": lambda cells: cells["caveats"].map(caveats.short_badges),
    "memory": lambda cells: cells["memory_ratio"],
    "breaks": lambda cells: cells["graph_break_count"],
    "compile s": lambda cells: cells["compile_s"],
    "GPU-time speedup": lambda cells: cells["gpu_speedup"],
    "eager ms": lambda cells: cells["eager_ms"],
    "compiled ms": lambda cells: cells["compiled_ms"],
    "eager MB": lambda cells: cells["eager_peak_alloc_mb"],
    "compiled MB": lambda cells: cells["compiled_peak_alloc_mb"],
}
# The first seven fit 1400 px beside the sidebar (WIDTHS); a view also shows what it
# ranks by; the rest are a click away (More columns), and all are in the CSV.
DEFAULT_COLUMNS = tuple(COLUMNS)[:7]
MORE_COLUMNS = tuple(COLUMNS)[7:]
VIEW_COLUMNS = {
    # Whether a slower cell loses on the GPU or on the host.
    "slower than eager": ("GPU-time speedup",),
    "longest compiles": ("compile s",),
    "most memory saved": ("eager MB", "compiled MB"),
}
WIDTHS = {
    "model": 200, "config": 270, "status": 80, "speedup": 72, "caveats": 130, "memory": 72,
    "breaks": 62,
}  # fmt: skip


def columns_of(view: str, more) -> list[str]:
    """The columns the table shows for a quick view and the columns asked for: what the
    view ranks by beside the speedup, where it is seen, the others after the defaults."""
    ranked = [name for name in VIEW_COLUMNS.get(view, ()) if name in MORE_COLUMNS]
    at = DEFAULT_COLUMNS.index("speedup") + 1
    shown = [*DEFAULT_COLUMNS[:at], *ranked, *DEFAULT_COLUMNS[at:]]
    return shown + [name for name in MORE_COLUMNS if name in more and name not in ranked]


FORMATS = {
    "speedup": reads.TIMES,
    "GPU-time speedup": reads.TIMES,
    "compile s": reads.SECONDS,
    "eager ms": reads.MS,
    "compiled ms": reads.MS,
    "eager MB": reads.MB,
    "compiled MB": reads.MB,
    "memory": reads.RATIO,
    "breaks": "%d",
}
HELP = {
    "speedup": "median eager / median compiled latency, wall clock",
    "caveats": "why a number needs a second look; the model's page says why",
    "memory": "memory ratio: peak compiled / eager allocated memory",
    "breaks": "graph breaks",
    "GPU-time speedup": "eager / compiled GPU busy time of one profiled call",
}


def table_of(cells: pd.DataFrame, columns: Iterable[str] = tuple(COLUMNS)) -> pd.DataFrame:
    """A view's cells as the table shows them: ``columns`` of ``COLUMNS`` (all of them,
    as the CSV has them, by default), the view's order kept."""
    return pd.DataFrame({name: COLUMNS[name](cells) for name in columns})
