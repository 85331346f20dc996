"""Leaderboard: the filtered cells in one sortable table, with quick views that rank them
(slower than eager, largest speedups, most memory saved, most graph breaks, longest
compiles), each cell's caveats beside its numbers."""

from __future__ import annotations

import streamlit as st

from dashboard import reads
from dashboard.filters import warn_unknown_choice
from dashboard.queries import LEADERBOARD_VIEWS
from dashboard.ranking import FORMATS, HELP, MORE_COLUMNS, WIDTHS, columns_of, table_of
from dashboard.text import plain

VIEW_MEANING = {
    "all cells": "every cell under the filters, by model",
    "slower than eager": (
        "passing cells whose compiled median is slower than eager's, slowest first; a "
        "GPU-time speedup of 1x or more beside one says its kernels are faster and the "
        "loss is the host's (launching, guards, graph breaks)"
    ),
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
    else f"the first {len(cells):,} of {matching:,} cells (the CSV holds all of them)"
)
st.caption(
    f"{shown}. Click a column's name to sort by it; select a row to open its model. "
    "Speedup: median eager / median compiled (wall clock). Memory ratio: peak compiled / "
    "eager allocated. Caveats (⚠): why a number needs a second look (the model's page says "
    "why). –: not recorded."
)
pick, download = st.columns([4, 1], vertical_alignment="bottom")
more = pick.pills(
    "More columns",
    MORE_COLUMNS,
    selection_mode="multi",
    key="columns",
    bind="query-params",
    help="GPU-time speedup: kernel busy time of one profiled call per side, where recorded",
)
# Above the table, not below: an element of a new kind drawn after it would hold the
# table back on a first visit (docs/PERFORMANCE.md, "Dashboard").
with download:
    reads.download_csv(
        "Download CSV",
        lambda: table_of(reads.leaderboard(db, chosen, quick, None)),
        quick.replace(" ", "-"),
        help=f"Every cell of the view {quick!r} under the filters, in its order, every column",
    )
table = table_of(cells, columns_of(quick, more))
picked = reads.show_table(
    table,
    height=min(2_000, 35 * (len(table) + 1) + 3),
    column_config={
        name: st.column_config.NumberColumn(
            format=fmt, width=WIDTHS.get(name, "small"), help=HELP.get(name)
        )
        for name, fmt in FORMATS.items()
    }
    | {
        name: st.column_config.TextColumn(width=width, help=HELP.get(name))
        for name, width in WIDTHS.items()
        if name not in FORMATS
    },
    on_select="rerun",
    selection_mode="single-row",
    key="leaderboard_table",
)
rows = picked.selection.rows if picked is not None else []
# A row picked in another view may be past this one's end.
if rows and rows[0] < len(cells):
    row = cells.iloc[rows[0]]
    st.page_link(
        "pages_/detail.py",
        label=plain(f"Open {row['row_id']} · {row['config']} in Model detail"),
        query_params={"model": row["model_id"], "config": row["config"]},
        icon=":material/search:",
    )
