"""Compare: two runs, labels or environments cell by cell (dashboard/compare.py decides)."""

from __future__ import annotations

import streamlit as st

from dashboard import reads
from dashboard.filters import pick_two
from dashboard.text import plain

try:
    from dashboard import compare
except ImportError:
    compare = None

view = reads.current_view()
db, chosen = view.db, view.filters
if compare is None:
    st.info(
        "Compare is not available in this installation (dashboard/compare.py is missing). "
        "The other pages work without it."
    )
    st.stop()


@st.cache_data(show_spinner=False, hash_funcs={reads.Database: lambda db: db.token})
def _sides(db: reads.Database) -> dict[str, str]:
    with db.con.cursor() as cursor:
        return {side.name: side.description for side in compare.list_sides(cursor)}


@st.cache_data(show_spinner="Comparing…", hash_funcs={reads.Database: lambda db: db.token})
def _compare(db: reads.Database, a: str, b: str, metric: str):
    with db.con.cursor() as cursor:
        return compare.compare_frames(cursor, a, b, metric=metric), compare.unmatched_counts(
            cursor, compare.resolve_side(cursor, a), compare.resolve_side(cursor, b)
        )


sides = _sides(db)
names = list(sides)
st.caption(
    "Pick a baseline A and a side B: a run, a label (its runs together) or an environment "
    "(e.g. before and after a torch upgrade). Cells match on their key without the "
    "environment; a speed change counts only beyond the measured spread and 5%."
)
a, b, (left, right) = pick_two(names, ("a", "b"), ("A", "B"))
if a is not None:
    left.caption(plain(sides[a]))
if b is not None:
    right.caption(plain(sides[b]))
if a is None or b is None:
    st.info("Choose both sides to compare.")
    st.stop()

metric = st.radio(
    "Speedup by",
    compare.METRICS,
    format_func=lambda name: {
        compare.WALL: "wall-clock time (what a user gets)",
        compare.GPU: "GPU time (kernel busy time: unmoved by the host's speed)",
    }[name],
    horizontal=True,
    key="speedup",
)
frame, (only_a, only_b) = _compare(db, a, b, metric)
# The sidebar filters that the comparison's columns carry.
for name in ("backend", "mode", "step", "dynamic", "precision", "size", "device"):
    if values := getattr(chosen, name):
        frame = frame[frame[name].isin(values)]
if chosen.search:
    frame = frame[frame["model_id"].str.lower().str.contains(chosen.search.lower(), regex=False)]

counts = compare.change_counts(frame)
metrics = st.columns(len(counts))
for column, (change, count) in zip(metrics, counts.items(), strict=True):
    column.metric(change, f"{count:,}")
st.caption(
    f"{len(frame):,} cells compared by {compare.METRIC_TEXT[metric]}; only in A: "
    f"{only_a:,}, only in B: {only_b:,}."
)
changed_only = st.toggle("Changed cells only", value=True)
shown = frame[frame["change"] != compare.SAME] if changed_only else frame
table = shown.assign(config=shown.apply(compare.config_label, axis=1) if len(shown) else "")
reads.show_table(
    table[["model_id", "config", "a_status", "a_speedup", "b_status", "b_speedup", "change"]],
    column_config={
        "model_id": "model",
        "a_status": "A status",
        "b_status": "B status",
        "a_speedup": st.column_config.NumberColumn("A speedup", format="%.2fx"),
        "b_speedup": st.column_config.NumberColumn("B speedup", format="%.2fx"),
    },
)
reads.download_csv("Download the comparison (CSV)", shown, "compare")
