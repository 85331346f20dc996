"""Graph breaks: the break types across the zoo, by models affected and by breaks."""

from __future__ import annotations

import json
import re

import pandas as pd
import streamlit as st

from dashboard import reads
from dashboard.text import plain
from runner.matrix import break_types

# The graph-break site's page of a registry id (linked from dynamo's messages, 2.9+).
SITE = "https://meta-pytorch.github.io/compile-graph-break-site/gb/{id}.html"
# What torch's registry ids look like ("GB0085"): a stored id of another shape is text
# from a shard, never a part of a link.
REGISTRY_ID = re.compile(r"GB\d{1,6}", re.IGNORECASE)
MODELS_LINKED = 20

view = reads.current_view()
db, chosen = view.db, view.filters
types = reads.break_types(db, chosen)
if types.empty:
    st.success(f"No graph breaks under these filters ({plain(chosen.describe())}).")
    st.stop()

columns = st.columns(3)
columns[0].metric("Break types", f"{len(types):,}")
columns[1].metric("Models with a break", f"{len(set().union(*types['model_ids'])):,}")
columns[2].metric("Break events", f"{int(types['breaks'].sum()):,}")
st.caption(
    "A break type is the first line of dynamo's message, with its id in torch's "
    "graph-break registry (unregistered: a message the registry does not know). Models: "
    "how many of the filtered models break with it; breaks: the break events explain "
    "recorded (a break inside a called module counts from both sides)."
)
reads.show_table(
    pd.DataFrame(
        {
            "break type": types["break_type"],
            "registry id": types["registry_id"],
            "models": types["models"],
            "breaks": types["breaks"],
            "cells": types["cells"],
        }
    ),
    column_config={"break type": st.column_config.TextColumn(width="large")},
)
reads.download_csv("Download the break types (CSV)", types, "graph-breaks")

choice = st.selectbox(
    "A break type", types["break_type"].tolist(), index=0, key="break", bind="query-params"
)
row = types[types["break_type"] == choice].iloc[0]
st.markdown("#### The break")
# Stored text is data: shown as text, never as Markdown.
st.text(row["reason"])
split = break_types.about(row["break_type"])
if split is not None:
    st.markdown("**What this split is** (a reason of dynamo's own, not a registry type)")
    st.text(split)
hints = json.loads(row["hints"]) if isinstance(row["hints"], str) else []
if hints:
    st.markdown("**Hints** (from torch's registry)")
    for hint in hints:
        st.text(f"- {hint}")
if REGISTRY_ID.fullmatch(row["registry_id"]):
    st.link_button(
        f"{plain(row['registry_id'])} on the graph-break site",
        SITE.format(id=row["registry_id"].lower()),
        icon=":material/open_in_new:",
    )
frames = list(row["frames"])[:10]
if frames:
    st.markdown("**Where it happens** (user frames)")
    st.code("\n".join(frames), language="text")
models = list(row["model_ids"])
st.markdown(f"**{len(models):,} models**")
for model in models[:MODELS_LINKED]:
    st.page_link(
        "pages_/detail.py",
        label=plain(model),
        query_params={"model": model},
        icon=":material/search:",
    )
if len(models) > MODELS_LINKED:
    st.caption(f"and {len(models) - MODELS_LINKED:,} more (see the CSV)")
