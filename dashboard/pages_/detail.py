"""Model detail: every config of one model, why it failed or broke, and how to rerun it."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import streamlit as st

from dashboard import caveats, charts, reads, reproduce, status
from dashboard.filters import config_order, warn_unknown_choice
from dashboard.text import plain
from zoo import published

view = reads.current_view()
db, chosen = view.db, view.filters
warn_unknown_choice("model", view.facets.models, "Model")
model = st.selectbox(
    "Model",
    view.facets.models,
    index=None,
    key="model",
    bind="query-params",
    placeholder="Choose a model (type to search), or click a cell on the Matrix page",
)
if model is None:
    st.info("Choose a model above to see every config it was measured in.")
    st.stop()

cells = reads.model_cells(db, model, chosen.run)
if cells.empty:
    st.info(f"No cells of {plain(model)} in the chosen runs ({plain(', '.join(chosen.run))}).")
    st.stop()
order = sorted(range(len(cells)), key=lambda i: config_order(cells.iloc[i]))
cells = cells.iloc[order].reset_index(drop=True)
# Several cell keys can share a config (environments, batch sizes): tell them apart.
cells["matrix_config"] = cells["config"]
repeated = cells["config"].duplicated(keep=False)
cells.loc[repeated, "config"] = [
    f"{row.config} · {row.device} {row.size} · bs{row.batch_size} · torch {row.torch} · "
    f"env {row.env_id[:8]}" + (f" · {row.label}" if isinstance(row.label, str) else "")
    for row in cells[repeated].itertuples()
]
wanted = st.query_params.get("config")
first = cells.iloc[0]
params = first["param_count"]
st.subheader(plain(model))
st.caption(
    plain(f"suite {first['suite']} · family {first['family']} · task {first['task']}")
    + (f" · {params / 1e6:,.1f} M parameters" if pd.notna(params) else "")
    + f" · {len(cells)} configs, {int((cells['status'] == 'pass').sum())} pass. Every config "
    "of the model is shown: of the sidebar filters only the run or label applies here."
)
published_figures = published.for_model(model)
if published_figures:
    sizes = ", ".join(figure.label() for figure in published_figures)
    st.caption(
        plain(f"For comparison, {published.SOURCE}: compiled over eager throughput {sizes}.")
        + " Another GPU, dtype and batch: its ranking, not its values, is what the zoo's "
        "speedups should share, least where timm's two sides ran at different batches "
        "(docs/timm-published.md)."
    )

table = pd.DataFrame(
    {
        "config": cells["config"],
        "status": cells["status"],
        "speedup": cells["speedup"],
        # Beside the speedup it qualifies; Model detail below says why.
        "caveats": cells["caveats"].map(caveats.badges),
        "compile s": cells["compile_s"],
        "eager ms": cells["eager_ms"],
        "compiled ms": cells["compiled_ms"],
        "memory ratio": cells["memory_ratio"],
        "graph breaks": cells["graph_break_count"],
        "recompiles": cells["recompile_count"],
        "accuracy": cells["accuracy_pass"].map({True: "pass", False: "fail"}),
        "batch": cells["batch_size"],
        "torch": cells["torch"],
        "recorded": cells["recorded_at"],
    }
)
reads.show_table(
    table,
    # Every config in sight: a model has tens of them, not thousands.
    height=min(2_000, 35 * (len(table) + 1) + 3),
    column_config={
        **reads.number_columns(
            **{
                "speedup": reads.TIMES,
                "compile s": reads.SECONDS,
                "eager ms": reads.MS,
                "compiled ms": reads.MS,
                "memory ratio": reads.RATIO,
            }
        ),
        "recorded": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm"),
    },
)
reads.download_csv("Download this model's cells (CSV)", cells, model.replace("/", "_"))
st.plotly_chart(charts.latency_figure(cells), config={"displayModeBar": False})

breaks = reads.graph_breaks(
    db, tuple(cells.loc[cells["graph_break_count"].fillna(0) > 0, "result_id"])
)


def _plain(row: pd.Series) -> dict:
    """The row as plain values, missing ones as None (pandas' NA has no truth value)."""
    return {
        name: None if not isinstance(value, list | tuple | np.ndarray) and pd.isna(value) else value
        for name, value in row.items()
    }


def _ms(cell, column: str) -> str:
    median, p25, p75 = cell[column], cell[f"{column}_p25"], cell[f"{column}_p75"]
    if pd.isna(median):
        return "–"
    spread = f"p25 {p25:.3f}, p75 {p75:.3f}" if pd.notna(p25) and pd.notna(p75) else ""
    fastest = _fastest(cell, column)
    if fastest:
        spread += f"{', ' if spread else ''}fastest {fastest:.3f}"
    return f"{median:.3f} ms ({spread})" if spread else f"{median:.3f} ms"


def _fastest(cell, column: str) -> float | None:
    value = cell.get(column.replace("_ms", "_fastest_ms"))
    return None if value is None or pd.isna(value) or value <= 0 else float(value)


def _recorded(row) -> str:
    """A row of the cell's config as a reader tells it apart: env, torch, date, result."""
    speed = "" if pd.isna(row.speedup) else f", {row.speedup:.2f}x"
    return (
        f"env {row.env_id[:8]} (torch {row.torch}, recorded {row.recorded_at:%Y-%m-%d %H:%M}, "
        f"{row.status}{speed})"
    )


def environments_line(cell: dict) -> str:
    """Which of the config's environments this row is, which one the Matrix shows (the
    newest) and the others, as plain text."""
    same = cells[
        (cells["matrix_config"] == cell["matrix_config"])
        & (cells["device"] == cell["device"])
        & (cells["size"] == cell["size"])
    ]
    this = same[same["result_id"] == cell["result_id"]].iloc[0]
    shown = same[same["shown"].fillna(False).astype(bool)]
    others = same[same["env_id"] != cell["env_id"]]
    if cell.get("shown"):
        line = f"This row, {_recorded(this)}, is the newest: the one shown."
    elif not shown.empty:
        line = f"This row is {_recorded(this)}; shown is the newest, {_recorded(shown.iloc[0])}."
    else:
        line = f"This row is {_recorded(this)}; the newest row is not in the chosen runs."
    listed = [_recorded(row) for row in others.itertuples() if not row.shown]
    if listed:
        line += " Also recorded: " + "; ".join(listed) + "."
    return line


def caveat_notes(cell: dict) -> None:
    """Each caveat of the cell: why, in words, and the docs section that explains it."""
    for key in caveats.keys(cell["caveats"]):
        caveat = caveats.BY_KEY[key]
        text = caveat.reason(cell)
        if key == "environments":
            text += " " + plain(environments_line(cell))
        st.warning(text, icon=":material/warning:")
        reads.doc_link(caveat.doc)


def gpu_time_line(cell) -> str:
    """The cell's profiled call of each side, or nothing where it has none."""
    eager, compiled = cell.get("eager_gpu_ms"), cell.get("compiled_gpu_ms")
    kernels = cell.get("eager_kernels")
    if all(v is None or pd.isna(v) for v in (eager, compiled, kernels)):
        return ""
    bound = cell.get("bound")
    verdict = f"; **{plain(bound)}**" if bound is not None and not pd.isna(bound) else ""
    verdict += _where_it_loses(cell.get("speedup"), cell.get("gpu_speedup"))
    return (
        f"- **GPU time** (one profiled call): eager {_number(eager, '{:.3f} ms')} in "
        f"{_number(kernels, '{:.0f}')} kernels, compiled {_number(compiled, '{:.3f} ms')} in "
        f"{_number(cell.get('compiled_kernels'), '{:.0f}')}; GPU-time speedup "
        f"{_number(cell.get('gpu_speedup'), '{:.2f}x')}; host part of the wall time: eager "
        f"{_number(cell.get('eager_host_ms'), '{:.3f} ms')}, compiled "
        f"{_number(cell.get('compiled_host_ms'), '{:.3f} ms')}{verdict}\n"
    )


def _where_it_loses(speedup, gpu_speedup) -> str:
    """For a cell slower compiled than eager: whether its GPU time says the kernels or
    the host lose (docs/zoo-h200.md: most of the zoo's slower cells lose on the host)."""
    if any(v is None or pd.isna(v) for v in (speedup, gpu_speedup)) or speedup >= 1:
        return ""
    if gpu_speedup >= 1:
        return "; **slower on the wall clock, faster on the GPU**: the loss is the host's"
    return "; **slower on the GPU too**: its compiled kernels are slower"


def _mb(value) -> str:
    return "–" if pd.isna(value) else f"{value:,.0f} MB"


def _memory_phases(cell: dict) -> str:
    """The peaks reserved outside the memory pass, where the row has them: the accuracy
    reference's (schema 7), and what the cell held going into its compile and reserved
    through it (schema 10), which the memory planner counts too."""
    parts = [
        f"{what} {_mb(cell[column])} {how}"
        for column, what, how in (
            ("reference_peak_reserved_mb", "accuracy reference", "reserved"),
            ("resident_mb", "into its compile", "allocated"),
            ("compile_peak_reserved_mb", "compile's peak", "reserved"),
        )
        if not _missing(cell.get(column))
    ]
    return "; " + "; ".join(parts) if parts else ""


def _missing(value) -> bool:
    return value is None or pd.isna(value)


def _number(value, fmt: str) -> str:
    return "–" if _missing(value) else fmt.format(value)


def cell_section(cell: dict) -> None:
    if cell["error_type"] or cell["error_message"]:
        where = f" in {cell['error_phase']}" if cell["error_phase"] else ""
        st.error(
            f"**{plain(cell['error_type'] or cell['status'])}**{plain(where)}: "
            f"{plain(cell['error_message'])}"
        )
        if cell["traceback_tail"]:
            st.caption("Traceback (tail)")
            st.code(cell["traceback_tail"], language="text", wrap_lines=True)
        if cell["stderr_tail"]:
            st.caption("Worker stderr (tail)")
            st.code(cell["stderr_tail"], language="text", wrap_lines=True)
    metrics = st.columns(4)
    metrics[0].metric("Speedup", _number(cell["speedup"], "{:.2f}x"))
    metrics[1].metric("Compile", _number(cell["compile_s"], "{:.1f} s"))
    metrics[2].metric("Memory ratio", _number(cell["memory_ratio"], "{:.2f}"))
    metrics[3].metric("Graph breaks", _number(cell["graph_break_count"], "{:.0f}"))
    caveat_notes(cell)
    own = breaks[breaks["result_id"] == cell["result_id"]]
    if not own.empty:
        st.markdown("**Graph breaks** (reason, user frame)")
        reads.show_table(own[["reason", "user_frame", "count"]])
    st.markdown(
        f"- **Timing**: eager {_ms(cell, 'eager_ms')}; compiled {_ms(cell, 'compiled_ms')}"
        f"; first compiled call {_number(cell.get('first_call_s'), '{:.2f} s')}\n"
        + gpu_time_line(cell)
        + f"- **Memory** (peak allocated / reserved): eager {_mb(cell['eager_peak_alloc_mb'])} / "
        f"{_mb(cell['eager_peak_reserved_mb'])}; compiled {_mb(cell['compiled_peak_alloc_mb'])} / "
        f"{_mb(cell['compiled_peak_reserved_mb'])}" + _memory_phases(cell) + "\n"
        f"- **Accuracy**: {'pass' if cell['accuracy_pass'] else 'fail' if cell['accuracy_pass'] is False else '–'}"
        f" · max abs error {_number(cell['max_abs_error'], '{:.3g}')} · RMSE vs "
        f"{plain(cell['accuracy_ref_dtype'] or 'reference')} {_number(cell['rmse'], '{:.3g}')} "
        f"(eager {_number(cell['eager_rmse'], '{:.3g}')})"
        + (f"; failed: {plain(cell['accuracy_failed'])}" if cell.get("accuracy_failed") else "")
        + "\n"
        f"- **Graphs**: {_number(cell['graph_count'], '{:.0f}')} captured, "
        f"{_number(cell['recompile_count'], '{:.0f}')} recompiles"
        + (
            f"; shape probe {plain(cell['probe_shapes'])}: "
            f"{'ran' if cell['probe_ok'] else 'failed'}, "
            f"{_number(cell['probe_recompiles'], '{:.0f}')} recompiles"
            if cell["probe_shapes"]
            else ""
        )
        + f"\n- **Inputs**: {plain(cell['input_shapes'] or '–')} · "
        f"{plain(cell['precision_treatment'] or cell['precision'])}"
        f" · torch {plain(cell['torch'] or '?')} on {plain(cell['gpu'] or cell['device'])} · run "
        f"{plain(cell['run_id'][:8])} {plain(cell['label'])}"
        + (f"\n- **Notes**: {plain(cell['notes'])}" if cell["notes"] else "")
    )
    why = []
    if cell.get("triage_rung"):
        why.append(f"Triage (the backend ladder): {cell['triage_rung']}")
        meaning = status.verdict_meaning(cell["triage_rung"])
        if meaning:
            why.append(f"  what it means: {meaning}")
        if cell.get("triage_detail"):
            why.append(f"  the failing rung: {cell['triage_detail']}")
        if cell.get("triage_bisect"):
            why.append(f"  Inductor's compiler bisector: {cell['triage_bisect']}")
        if cell.get("triage_minify"):
            why.append(f"  dynamo's minifier: {cell['triage_minify']}")
        if cell.get("triage_trace"):
            why.append(f"  structured trace: {cell['triage_trace']}")
    if cell.get("recompile_reasons"):
        why.append("Recompiles, the guard that failed for each:")
        why += [f"  {reason}" for reason in json.loads(cell["recompile_reasons"])]
    if why:
        # Stored text is data: shown as text.
        st.text("\n".join(why))
    st.caption("Reproduce this cell")
    st.code(reproduce.zoo_run_command(cell), language="bash", wrap_lines=True)
    st.code(reproduce.python_snippet(cell), language="python")
    if cell.get("triage_repro"):
        st.caption("The minifier's repro of the failure (run it with python repro.py)")
        st.code(cell["triage_repro"], language="python")


st.markdown("#### Configs")
expand_all = len(cells) <= 2
for _, row in cells.iterrows():
    cell = _plain(row)
    ok = cell["status"] == "pass"
    icon = ":material/check_circle:" if ok else ":material/cancel:"
    title = plain(f"{cell['config']} — {cell['status']}")
    if cell["speedup"] is not None:
        title += f" · {cell['speedup']:.2f}x"
    if badge := caveats.badges(cell["caveats"]):
        title += f" · {badge}"
    expanded = expand_all or cell["matrix_config"] == wanted
    with st.expander(title, icon=icon, expanded=expanded):
        cell_section(cell)

with st.expander("History: every recorded row of this model"):
    reads.show_table(reads.model_history(db, model))
