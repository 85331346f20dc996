"""Summary: pass rate, speedup, compile time and memory per suite and config."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, reads
from dashboard.text import plain

view = reads.current_view()
db, chosen = view.db, view.filters
summary = reads.summary(db, chosen)
if summary.empty:
    st.info(f"No cells match the filters ({plain(chosen.describe())}).")
    st.stop()

passed, total = int(summary["passed"].sum()), int(summary["total"].sum())
columns = st.columns(3)
columns[0].metric("Cells", f"{total:,}")
columns[1].metric(f"Pass ({passed:,} of {total:,})", f"{round(100 * passed / total)}%")
columns[2].metric("Configs", f"{summary['config'].nunique()}")

st.markdown("#### Per suite and config")
st.caption(
    "Geomean speedup over passing cells; medians over the cells that recorded them. "
    "Fullgraph: passing cells with no graph break."
)
st.dataframe(
    summary[
        [
            "suite",
            "config",
            "pass_rate",
            "geomean_speedup",
            "median_compile_s",
            "median_memory_ratio",
            "fullgraph",
        ]
    ],
    hide_index=True,
    column_config={
        "pass_rate": st.column_config.TextColumn("pass rate"),
        "geomean_speedup": st.column_config.NumberColumn("geomean speedup", format="%.2fx"),
        "median_compile_s": st.column_config.NumberColumn("median compile s", format="%.1f"),
        "median_memory_ratio": st.column_config.NumberColumn(
            "median memory ratio", format="%.2f", help="peak compiled / eager allocated"
        ),
    },
)
reads.download_csv("Download this table (CSV)", summary, "summary")

points = reads.speedup_points(db, chosen)
if len(points) >= reads.SPEEDUP_MAX_POINTS:
    st.caption(f"Charts show a repeatable sample of {len(points):,} passing cells.")
left, right = st.columns(2)
with left:
    st.markdown("#### Speedup of passing cells")
    st.plotly_chart(charts.speedup_histogram(points), config={"displayModeBar": False})
with right:
    st.markdown("#### Speedup against compile time")
    st.plotly_chart(charts.speedup_vs_compile(points), config={"displayModeBar": False})
