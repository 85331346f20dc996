"""Leaderboard: the filtered cells in one sortable table, with quick views that rank them
(slower than eager, largest speedups, most memory saved, most graph breaks, longest
compiles), each cell's caveats beside its numbers."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import caveats, reads
from dashboard.filters import warn_unknown_choice
from dashboard.queries import LEADERBOARD_VIEWS
from dashboard.text import plain

VIEW_MEANING = {
    "all cells": "every cell under the filters, by model",
    "slower than eager": "passing cells whose compiled median is slower than eager's, slowest first",
    "largest speedups": "passing cells, fastest compiled against eager first",
    "most memory saved": "passing cells whose compiled peak is below eager's, the lowest ratio first",
    "most graph breaks": "cells with graph breaks, the most first",
    "longest compiles": "cells with a compile time, the longest first",
}


view = reads.current_view()
db, chosen = view.db, view.filters
warn_unknown_choice("view", LEADERBOARD_VIEWS, "Quick view")
quick = st.segmented_control(
    "Quick view",
    LEADERBOARD_VIEWS,
    default=LEADERBOARD_VIEWS[0],
    required=True,
    key="view",
    bind="query-params",
)
cells = reads.leaderboard(db, chosen, quick)
st.caption(plain(f"{quick}: {VIEW_MEANING[quick]}."))
if cells.empty:
    st.info(f"No cells in this view under the filters ({plain(chosen.describe())}).")
    st.stop()

matching = int(cells["matching"].iloc[0])
shown = (
    f"{matching:,} cells"
    if matching <= len(cells)
    else f"the first {len(cells):,} of {matching:,} cells (the CSV: every cell under the filters)"
)
st.caption(
    f"{shown}. Click a column's name to sort by it. Speedup: median eager / median "
    "compiled (wall clock); GPU-time speedup: kernel busy time of one profiled call, "
    "where recorded. Memory: peak allocated MB and compiled / eager. Caveats (⚠): why a "
    "number needs a second look; open the cell's model below for the reason."
)
table = pd.DataFrame(
    {
        "model": cells["row_id"],
        "config": cells["config"],
        "status": cells["status"],
        # Beside the speedup it qualifies, where a wide table still shows it.
        "caveats": cells["caveats"].map(caveats.badges),
        "speedup": cells["speedup"],
        "GPU-time speedup": cells["gpu_speedup"],
        "compile s": cells["compile_s"],
        "eager ms": cells["eager_ms"],
        "compiled ms": cells["compiled_ms"],
        "eager MB": cells["eager_peak_alloc_mb"],
        "compiled MB": cells["compiled_peak_alloc_mb"],
        "memory ratio": cells["memory_ratio"],
        "graph breaks": cells["graph_break_count"],
    }
)
# A column nothing in the view has (GPU time on a CPU run) would only say "None".
table = table[[c for c in table if c in ("model", "config", "status") or table[c].notna().any()]]
st.dataframe(
    table,
    hide_index=True,
    height=min(2_000, 35 * (len(table) + 1) + 3),
    column_config={
        **reads.number_columns(
            **{
                "speedup": reads.TIMES,
                "GPU-time speedup": reads.TIMES,
                "compile s": reads.SECONDS,
                "eager ms": reads.MS,
                "compiled ms": reads.MS,
                "eager MB": reads.MB,
                "compiled MB": reads.MB,
                "graph breaks": "%d",
            }
        ),
        "memory ratio": st.column_config.NumberColumn(
            format=reads.RATIO, help="peak compiled / eager allocated"
        ),
    },
)
reads.download_csv(
    "Download this view (CSV)",
    lambda: reads.chosen_cells(db, chosen),
    "leaderboard",
    help="Every cell under the filters, all columns",
)
st.caption("Open a cell's model for its timings, errors and how to reproduce it:")
for model in list(dict.fromkeys(cells["model_id"]))[:10]:
    row = cells[cells["model_id"] == model].iloc[0]
    st.page_link(
        "pages_/detail.py",
        label=plain(f"{model} · {row['config']}"),
        query_params={"model": model, "config": row["config"]},
        icon=":material/search:",
    )
