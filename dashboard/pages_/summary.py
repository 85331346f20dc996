"""Summary: pass rate, speedup, compile time and memory per config (charts first), per
suite and config (a table), and across the sweeps that recorded a config."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, reads, status
from dashboard.text import plain

# A row of st.dataframe is 35 px; the table shows every row rather than scrolling 10.
ROW_PX, TABLE_MAX_PX = 35, 2_000

view = reads.current_view()
db, chosen = view.db, view.filters
summary = reads.summary(db, chosen)
if summary.empty:
    st.info(f"No cells match the filters ({plain(chosen.describe())}).")
    st.stop()

passed, attempted = int(summary["passed"].sum()), int(summary["attempted"].sum())
unsupported, not_run = int(summary["unsupported"].sum()), int(summary["not_run"].sum())
columns = st.columns(5)
rate = status.pass_rate(passed, attempted)
columns[0].metric(
    f"Pass ({passed:,} of {attempted:,} attempted)",
    "–" if rate is None else f"{round(100 * rate)}%",
)
columns[1].metric("Failed", f"{int(summary['failed'].sum()):,}")
columns[2].metric(
    "Unsupported here",
    f"{unsupported:,}",
    help="Cells whose config cannot run on the machine that recorded them (the reason is "
    "in the table): not attempted, so not in the pass rate.",
)
columns[3].metric(
    "Not run (within suites)",
    f"{not_run:,}",
    help="A suite's models without a cell in a config that ran some of that suite (the "
    "header counts every model and config, across suites).",
)
columns[4].metric("Configs", f"{summary['config'].nunique()}")


def _number(fmt: str):
    return lambda value: "–" if value is None or pd.isna(value) else fmt.format(value)


def _chart(title: str, figure, caption: str | None = None) -> None:
    st.markdown(f"#### {title}")
    if caption:
        st.caption(caption)
    st.plotly_chart(figure, config={"displayModeBar": False})


points = reads.speedup_points(db, chosen)
spread = reads.distributions(db, chosen)
_chart(
    "Per config: pass rate, speedup, compile time",
    charts.config_panels(reads.pass_rates(summary), spread),
    "Pass rate over the attempted cells, with the unsupported and not-run cells beside it, "
    "never as failures. Speedup (median eager over median compiled) and compile time of "
    "the passing cells: the box from the first to the third quartile, the line at the "
    "median, the whiskers to the smallest and the largest; hover for the numbers.",
)
left, right = st.columns(2)
with left:
    _chart(
        "Speedup against memory",
        charts.speedup_vs_memory(points),
        "Passing cells; memory ratio: compiled over eager peak allocated memory. Hollow: "
        "a caveat on the cell's numbers (the Leaderboard names it).",
    )
with right:
    _chart("Speedup of passing cells", charts.speedup_histogram(points))
if len(points) >= reads.SPEEDUP_MAX_POINTS:
    st.caption(
        f"The scatter plots and the histogram show a repeatable sample of {len(points):,} "
        "passing cells; the bars, the boxes and the table count every cell."
    )

trends = reads.sweep_trends(db, chosen)
if not trends.empty:
    _chart(
        "Across sweeps",
        charts.sweep_trends(trends),
        "Configs recorded by more than one sweep (a run label, or a run without one), a "
        "point a sweep at its first cell, each model's newest row in it. A sweep covers its "
        "own models (hover for how many): a chunk of other models moves a line as much as "
        "a change of torch does. To compare the same cells, use Compare.",
    )

st.markdown("#### Per suite and config")
st.caption(
    "Pass rate over the attempted cells (passed / attempted), unsupported and not-run "
    "cells beside it. Geomean speedup over passing cells; medians over the cells that "
    "recorded them (–: none did). Fullgraph: passing cells with no graph break."
)
table = pd.DataFrame(
    {
        "suite": summary["suite"],
        "device, size": summary["variant"],
        "config": summary["config"],
        "pass rate": summary["pass_rate"],
        "failed": summary["failed"],
        "unsupported": summary["unsupported"],
        "not run": summary["not_run"],
        "geomean speedup": summary["geomean_speedup"].map(_number("{:.2f}x")),
        "median compile s": summary["median_compile_s"].map(_number("{:.1f}")),
        "median memory ratio": summary["median_memory_ratio"].map(_number("{:.2f}")),
        "fullgraph": summary["fullgraph"],
        "unsupported because": summary["unsupported_reasons"].map("; ".join),
    }
)
if not summary["variant"].astype(bool).any():  # one device and size: nothing to tell apart
    table = table.drop(columns="device, size")
reads.show_table(
    table,
    height=min(TABLE_MAX_PX, ROW_PX * (len(table) + 1) + 3),
    column_config={
        "median memory ratio": st.column_config.TextColumn(help="peak compiled / eager allocated"),
    },
)
reads.download_csv("Download this table (CSV)", summary, "summary")

_chart(
    "Speedup against compile time",
    charts.speedup_vs_compile(points),
    "Passing cells. Hollow: a caveat on the cell's numbers (the Leaderboard names it).",
)
