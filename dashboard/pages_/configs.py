"""Config vs config: two columns of the matrix (e.g. inductor against xla, bf16 against
fp32, static against dynamic, infer against train) over the models both have."""

from __future__ import annotations

import dataclasses

import pandas as pd
import streamlit as st

from dashboard import charts, pairs, reads
from dashboard.filters import pick_two
from dashboard.text import counted, plain

# The axes a config is made of: picking the two configs replaces their filters.
CONFIG_AXES = ("backend", "mode", "dynamic", "precision", "step", "size", "device")

view = reads.current_view()
db, chosen = view.db, view.filters
scope = dataclasses.replace(chosen, **{axis: () for axis in CONFIG_AXES})
configs = reads.matrix_shape(db, scope).configs
if len(configs) < 2:
    st.info(
        f"Fewer than two configs under the filters ({plain(scope.describe())}): nothing "
        "to set against each other."
    )
    st.stop()

st.caption(
    "Pick a config A (the baseline) and B; the page opens on the matrix's first two "
    "columns. The sidebar's filters on models (search, suite, family, status, run) "
    "apply; its filters on config axes do not: the two configs are the choice here."
)
a, b, _ = pick_two(configs, ("config_a", "config_b"), ("Config A", "Config B"), first=(0, 1))
if a is None or b is None:
    st.info("Choose both configs to compare them.")
    st.stop()
if a == b:
    st.warning("A and B are the same config: choose two.")
    st.stop()

pair = reads.config_pair(db, scope, a, b)
both = pair[pair["a_status"].notna() & pair["b_status"].notna()]
shared = pairs.shared_passing(pair)
ratio = pairs.geomean_ratio(pair)
metrics = st.columns(4)
metrics[0].metric("Models with both", f"{len(both):,}", help="Models with a cell in A and in B")
metrics[1].metric("Only in A", f"{int(pair['b_status'].isna().sum()):,}")
metrics[2].metric("Only in B", f"{int(pair['a_status'].isna().sum()):,}")
metrics[3].metric(
    "Geomean B / A speedup",
    "–" if ratio is None else f"{ratio:.2f}x",
    help="The geomean of B's speedup over A's, over the models that pass in both: "
    "the same models on both sides, unlike two geomeans of different sets",
)

st.caption(
    f"The geomean B / A speedup is over the {len(shared):,} models passing with a speedup "
    "in both configs."
)
if apart := int(pairs.scoped_apart(shared).sum()):
    st.warning(
        f"{counted(apart, 'model')} of these {len(shared):,} were timed inside one autocast "
        "region in one config (recorded before 2026-12-05) and per call in the other. Their "
        "B / A ratio holds that change of measurement too: a launch-bound eager side read "
        "faster inside one region (speedups rose a median 1.19-1.28x measured again on "
        "the H200). Until the older side is measured again, compare them with care.",
        icon=":material/warning:",
    )
st.markdown("#### Pass and fail, A against B")
st.caption("Models by their category in A (rows) and in B (columns).")
crossings = pairs.crossings(pair)
reads.show_table(
    crossings.rename_axis(index="A \\ B").reset_index(),
)

st.markdown("#### Speedup in A against speedup in B")
st.caption(
    "Each point a model passing in both (log axes); above the diagonal B is faster. "
    "Hollow: a side's timing disturbed, its eager baseline launch-bound, or the two timed "
    "with autocast's scope apart."
)
st.plotly_chart(charts.config_scatter(shared, a, b), config={"displayModeBar": False})

st.markdown("#### Model by model")
changed = pairs.categories(pair, "a") != pairs.categories(pair, "b")
table = pd.DataFrame(
    {
        "model": pair["model_id"],
        "A status": pair["a_status"],
        "B status": pair["b_status"],
        "A speedup": pair["a_speedup"],
        "B speedup": pair["b_speedup"],
        "B / A": pair["b_speedup"] / pair["a_speedup"],
        "crossing": changed.map({True: "changed", False: ""}),
    }
)
reads.show_table(
    table,
    column_config=reads.number_columns(
        **dict.fromkeys(("A speedup", "B speedup", "B / A"), reads.TIMES)
    ),
)
reads.download_csv("Download the pair (CSV)", pair, "config-pair")
