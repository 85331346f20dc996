"""Docs: a section of this checkout's documents, what a caveat's link opens
(``?doc=docs/xla-h200.md&section=fp32-still-the-first-sweeps-protocol``)."""

from __future__ import annotations

import streamlit as st

from dashboard import docs
from dashboard.filters import warn_unknown_choice

documents = docs.documents()
if not documents:
    st.info(f"No documents found in {docs.CHECKOUT}: this install has none of the docs.")
    st.stop()
warn_unknown_choice("doc", documents, "Document")
left, right = st.columns([1, 2])
with left:
    # Bound to the URL without a format_func, so that a link's values pick them.
    path = st.selectbox(
        "Document", documents, index=None, key="doc", bind="query-params", placeholder="README.md"
    )
path = path or documents[0]
marks = docs.headings(path)
anchors = [heading.anchor for heading in marks]
warn_unknown_choice("section", anchors, "Section")
with right:
    anchor = st.selectbox(
        "Section",
        anchors,
        index=None,
        key="section",
        bind="query-params",
        placeholder="the whole document",
        help="Sections by their anchors, as GitHub links them",
    )
st.caption(
    f"{path}" + (f"#{anchor}" if anchor else "") + f" in {docs.CHECKOUT}, as in the repository."
)
if anchor:
    st.markdown(docs.section(path, anchor) or "")
else:
    st.markdown(
        "\n".join(
            f"{'  ' * (heading.level - 1)}- [{heading.text}](docs?doc={path}&section={heading.anchor})"
            for heading in marks
        )
    )
