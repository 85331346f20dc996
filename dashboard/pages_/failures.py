"""Failures: failing cells grouped by their normalized error signature."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import reads, status
from dashboard.text import code, counted, plain

GROUPS_SHOWN = 30
NAMES_SHOWN = 40


def _names(values: list[str]) -> str:
    shown = ", ".join(code(v) for v in values[:NAMES_SHOWN])
    more = len(values) - NAMES_SHOWN
    return shown + (f" and {more:,} more" if more > 0 else "")


def unsupported_section(reasons: pd.DataFrame) -> None:
    """Cells that could not run here: not failures, listed with their reason."""
    st.markdown(f"#### Unsupported here: {int(reasons['cells'].sum()):,} cells, not failures")
    st.caption(
        "Their config cannot run on the machine that recorded them (a backend not "
        "installed, a device it does not support): they were not attempted and count in "
        "no pass rate."
    )
    reads.show_table(
        pd.DataFrame(
            {
                "reason": reasons["reason"],
                "cells": reasons["cells"],
                "models": reasons["models"],
                "configs": reasons["configs"].map(", ".join),
            }
        ),
        column_config={"reason": st.column_config.TextColumn(width="large")},
    )


view = reads.current_view()
db, chosen = view.db, view.filters
groups = reads.failure_groups(db, chosen)
reasons = reads.unsupported_reasons(db, chosen)
if groups.empty:
    st.success(f"No failing cells under these filters ({plain(chosen.describe())}).")
    if not reasons.empty:
        unsupported_section(reasons)
    st.stop()

columns = st.columns(4)
columns[0].metric("Failing cells", f"{int(groups['cells'].sum()):,}")
columns[1].metric("Error signatures", f"{len(groups):,}")
columns[2].metric("Models with a failure", f"{len(set().union(*groups['model_ids'])):,}")
columns[3].metric(
    "Unsupported here (not failures)",
    f"{int(reasons['cells'].sum()) if not reasons.empty else 0:,}",
)
by_kind = groups.groupby("status", sort=False)["cells"].sum()
st.caption(
    "Failed, by kind: "
    + plain(", ".join(f"{kind} {int(count):,}" for kind, count in by_kind.items()))
    + "."
)
st.caption(
    "A signature is the error message with numbers, shapes and paths masked, so equal "
    "failures group together; accuracy failures group by where the triage placed them, "
    "other cells without a signature by status. Triage: the stage the backend ladder "
    "placed the group's cells at (zoo-run --triage ladder)."
)
reads.show_table(
    pd.DataFrame(
        {
            "status": groups["status"],
            "signature": groups["signature"],
            "cells": groups["cells"],
            "models": groups["models"],
            "configs": groups["configs"].map(len),
            "phases": groups["phases"].map(", ".join),
            "triage": groups["rungs"].map(", ".join),
        }
    ),
    column_config={"signature": st.column_config.TextColumn(width="large")},
)
reads.download_csv("Download the groups (CSV)", groups, "failures")

st.markdown(f"#### The {min(len(groups), GROUPS_SHOWN)} largest groups")
for index, group in groups.head(GROUPS_SHOWN).iterrows():
    title = plain(f"{group['status']} · {group['cells']:,} cells · {group['signature'][:120]}")
    with st.expander(title, expanded=index == 0):
        st.code(group["signature"], language="text", wrap_lines=True)
        st.markdown(
            f"**{counted(group['models'], 'model')}**: {_names(list(group['model_ids']))}\n\n"
            f"**{counted(len(group['configs']), 'config')}**: {_names(list(group['configs']))}"
        )
        verdicts = [
            f"- {code(rung)}: {plain(meaning)}"
            for rung in group["rungs"]
            if (meaning := status.verdict_meaning(rung))
        ]
        if verdicts:
            st.markdown("**Triage**, where the ladder placed them:\n" + "\n".join(verdicts))
        example = reads.result(db, group["example_result_id"])
        if example is not None:
            st.markdown(f"Example: {code(example['model_id'])} · {plain(example['config'])}")
            if example["traceback_tail"]:
                st.code(example["traceback_tail"], language="text", wrap_lines=True)
            st.page_link(
                "pages_/detail.py",
                label=f"Open {plain(example['model_id'])} in Model detail",
                query_params={"model": example["model_id"], "config": example["config"]},
                icon=":material/open_in_new:",
            )

if not reasons.empty:
    unsupported_section(reasons)
