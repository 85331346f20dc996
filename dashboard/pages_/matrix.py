"""Matrix: models (rows) by configs (columns), coloured by status or speedup.

Clicking a model's cell opens Model detail on that config (a link: the matrix of models
is HTML, shown before plotly.js could start); clicking a family's tile (rows by family)
narrows the filters to that family.
"""

from __future__ import annotations

import math

import streamlit as st

from dashboard import caveats, charts, reads
from dashboard.status import NOT_RUN, category
from dashboard.text import Html, counted, plain
from runner.matrix.results import STATUSES

LEGEND_KEY = "_marks_legend"
# How the matrix marks a tile's caveat: its own mark for two, a corner for the rest.
MARKS = {"disturbed": "hatched", "launch-bound": "bar below"}
STATUS_MEANING = {
    "pass": "eager and compiled ran and the compiled output passed the accuracy rule",
    "fail_accuracy": "compiled ran, but its output failed the accuracy rule (timings kept)",
    "compile_error": "compiling or running the compiled model raised",
    "eager_error": "the model failed in plain eager (or its reference): not the compiler's fault",
    "build_error": "the model could not be built or its inputs made",
    "oom": "out of device memory, anywhere in the cell",
    "timeout": "no result within the cell's timeout",
    "crash": "the worker process died (segfault, abort, killed)",
    "unsupported": "the configuration cannot run here, with the reason",
}


def _open_family() -> None:
    """A family tile was clicked: show that family's models (from their first page: the
    filter changed)."""
    points = st.session_state["family_chart"].selection.points
    if points:
        st.session_state["family"] = [points[0]["y"]]
        st.session_state["rows"] = "models"


def _explain_marks() -> None:
    """What each status and each caveat's mark on a tile means."""
    st.markdown(
        "| category | status | meaning |\n| --- | --- | --- |\n"
        + "\n".join(
            f"| {category(status)} | `{status}` | {STATUS_MEANING[status]} |" for status in STATUSES
        )
        + f"\n| {NOT_RUN} | | no cell was recorded for this model and config |"
    )
    st.caption(
        "Pass rates are over the attempted cells: unsupported ones (the config cannot run "
        "on this machine, e.g. a backend not installed) and places not run are counted "
        "beside them, never as failures."
    )
    st.markdown(
        "| mark on the tile | caveat | meaning | explained in |\n| --- | --- | --- | --- |\n"
        + "\n".join(
            f"| {MARKS.get(caveat.key, 'dark corner')} | {caveat.badge} | {caveat.meaning} | "
            f"[{caveat.doc}](docs?doc={caveat.doc.path}&section={caveat.doc.anchor}) |"
            for caveat in caveats.CAVEATS
        )
    )
    st.caption(
        "A caveat qualifies a cell's numbers, never its status: a pass with a caveat passed."
    )


view = reads.current_view()
db, chosen = view.db, view.filters
shape = reads.matrix_shape(db, chosen)
if not shape.models:
    st.info(
        f"No cells match the filters ({plain(chosen.describe())}). Clear some filters in the "
        "sidebar."
    )
    st.stop()

# No format_func on bound widgets: the URL carries the formatted option.
left, middle, per_page_column, _, download = st.columns(
    [1.4, 1.4, 1.4, 1.0, 1.3], vertical_alignment="bottom"
)
with left:
    color_by = st.segmented_control(
        "Colour by",
        ["status", "speedup"],
        default="status",
        required=True,
        key="color",
        bind="query-params",
    )
with middle:
    # Its first value comes from the session, not a default: a family's tile sets it
    # (above), and a widget with a default set through the session is warned about.
    st.session_state.setdefault("rows", "models")
    rows_by = st.segmented_control(
        "Rows", ["models", "families"], required=True, key="rows", bind="query-params"
    )
# Drawn before the matrix: the browser shows nothing new before it has the code of every
# kind of element on the page, and holds what it has for 0.5 s after the last that made
# it wait (React's fallback throttle), so an element of a new kind below the matrix kept
# the matrix from showing (docs/PERFORMANCE.md, "Dashboard").
with download:
    reads.download_csv(
        "Download CSV",
        lambda: reads.chosen_cells(db, chosen),
        "cells",
        help=f"Every cell under the current filters ({plain(chosen.describe())}), all pages",
    )

if rows_by == "families":
    families = reads.family_matrix(db, chosen)
    st.caption(
        f"{shape.families:,} families × {counted(len(shape.configs), 'config')}, "
        f"{counted(shape.models, 'model')}. "
        "Colour: share of the attempted cells that passed, unsupported ones left out (or "
        "the geomean speedup of the passing ones); grey: nothing to colour (every cell "
        "unsupported, or none passed). Click a tile to see that family's models."
    )
    st.plotly_chart(
        charts.family_matrix_figure(families, shape.configs, color_by),
        key="family_chart",
        on_select=_open_family,
        selection_mode="points",
        config={"displayModeBar": False},
    )
else:
    with per_page_column:
        # 25 models by default, more a click away: a page of 50 holds twice the tiles,
        # and the browser's work on a page follows its tiles (docs/PERFORMANCE.md).
        per_page = int(
            st.segmented_control(
                "Models per page",
                [str(n) for n in reads.MATRIX_PAGE_SIZES],
                default=str(reads.MATRIX_ROWS),
                required=True,
                key="per",
                bind="query-params",
            )
        )
    pages = max(1, math.ceil(shape.models / per_page))
    # A new filter, or a new page size, starts again at the first page; the page number
    # lives in the URL.
    if st.session_state.get("_matrix_filters") != (chosen, per_page):
        st.session_state["_matrix_filters"] = (chosen, per_page)
        if st.session_state.get("page", 1) != 1:
            st.session_state["page"] = 1
    # A row of its own, wide enough to offer the pages around this one.
    page = st.pagination(pages, key="page", bind="query-params") if pages > 1 else 1
    page = min(page, pages)
    cells = reads.matrix_cells(db, chosen, page, per_page)
    models = list(dict.fromkeys(cells["row_id"]))
    first = (page - 1) * per_page + 1
    st.caption(
        f"Models {first:,}–{first + len(models) - 1:,} of {shape.models:,} (by family, then "
        f"id) × {counted(len(shape.configs), 'config')}. Hover a cell for its numbers; **click "
        "it to open its detail** (a model's name: all its configs)."
    )
    # One HTML element for legend and matrix, and Markdown rather than st.table below:
    # each other kind of element has the browser fetch and run more code before it paints.
    st.html(
        Html(
            '<p class="zoo-legend">'
            + charts.status_legend(cells, color_by, len(models) * len(shape.configs) - len(cells))
            + "</p>"
            + charts.matrix_html(cells, shape.configs, models, color_by, chosen.query())
        )
    )

# Its tables are drawn only while it is open: the browser would otherwise parse and draw
# their Markdown, hidden, on every load and filter change (docs/PERFORMANCE.md).
legend = st.expander("What the statuses and marks mean", key=LEGEND_KEY, on_change="rerun")
if legend.open:
    with legend:
        _explain_marks()
