"""The dashboard's charts: pure functions from DataFrames to plotly figures.

They know nothing of Streamlit, so tests build them from small frames and look inside.
The matrix is drawn as square scatter markers rather than a plotly heatmap: scatter
points can be clicked and selected (a heatmap cell cannot), and a missing cell simply has
no marker.
"""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from runner.result import STATUSES

STATUS_COLORS = {
    "pass": "#2ca02c",
    "fail_accuracy": "#e6b800",
    "compile_error": "#d62728",
    "eager_error": "#9467bd",
    "build_error": "#8c564b",
    "oom": "#ff7f0e",
    "timeout": "#17becf",
    "crash": "#262626",
    "unsupported": "#bdbdbd",
}
UNKNOWN_STATUS_COLOR = "#f781bf"
NO_SPEEDUP_COLOR = "#d9d9d9"
# Speedup colours run on log2 from 0.5x (red) through 1x (yellow) to 3x (green).
SPEEDUP_SCALE = [[0.0, "#d73027"], [0.387, "#fee08b"], [1.0, "#1a9850"]]
SPEEDUP_RANGE = (-1.0, math.log2(3))
SPEEDUP_TICKS = (0.5, 0.75, 1, 1.5, 2, 3)
PASS_RATE_SCALE = [[0.0, "#d62728"], [0.5, "#fdd835"], [1.0, "#2ca02c"]]
ROW_PX = 22
TILE_PX = 17
HEADER_PX = 190
# The matrix's x categories can be long ("inductor/max-autotune-no-cudagraphs dyn=auto
# bf16"); they sit on top, turned, so they stay visible above a tall page of rows.
_CONFIG_AXIS = dict(side="top", tickangle=-35, showgrid=False, automargin=True, fixedrange=True)
_HOVER = (
    "<b>%{customdata[0]}</b><br>%{customdata[1]}<br>status: %{customdata[2]}"
    "<br>speedup: %{customdata[3]}<br>graph breaks: %{customdata[4]}"
    "<br>compile: %{customdata[5]}<br>memory ratio: %{customdata[6]}"
    "<br>family: %{customdata[7]}<extra></extra>"
)


def _text(value, fmt: str) -> str:
    return "–" if value is None or pd.isna(value) else fmt.format(value)


def _customdata(cells: pd.DataFrame) -> list[list[str]]:
    return [
        [
            row.model_id,
            row.config,
            row.status,
            _text(row.speedup, "{:.2f}x"),
            _text(row.graph_break_count, "{:.0f}"),
            _text(row.compile_s, "{:.1f} s"),
            _text(row.memory_ratio, "{:.2f}"),
            row.family or "–",
        ]
        for row in cells.itertuples()
    ]


def _matrix_layout(fig: go.Figure, configs: list[str], rows: list[str]) -> None:
    fig.update_layout(
        height=HEADER_PX + ROW_PX * max(len(rows), 1),
        margin=dict(l=10, r=10, t=10, b=10),
        plot_bgcolor="white",
        # The page draws the legend above the matrix, where a tall page of rows keeps it
        # in sight; plotly's would sit below the last row.
        showlegend=False,
        dragmode=False,
        hovermode="closest",
        clickmode="event+select",
    )
    fig.update_xaxes(
        type="category",
        categoryorder="array",
        categoryarray=configs,
        range=[-0.5, len(configs) - 0.5],
        **_CONFIG_AXIS,
    )
    fig.update_yaxes(
        type="category",
        categoryorder="array",
        categoryarray=rows,
        range=[len(rows) - 0.5, -0.5],
        showgrid=False,
        automargin=True,
        fixedrange=True,
    )


def matrix_figure(
    cells: pd.DataFrame, configs: list[str], models: list[str], color_by: str = "status"
) -> go.Figure:
    """Models (rows, in the given order) by configs (columns), one marker per cell.

    ``cells`` has model_id, family, config, status, speedup, graph_break_count,
    compile_s and memory_ratio. ``color_by`` is ``status`` (one trace per status, named
    with its count) or ``speedup`` (a log colour scale; cells without a speedup are grey).
    """
    fig = go.Figure()
    marker = dict(symbol="square", size=TILE_PX, line=dict(width=0))
    if color_by == "speedup":
        has_speedup = cells["speedup"].notna() & (cells["speedup"] > 0)
        timed = cells[has_speedup]
        fig.add_trace(
            go.Scatter(
                x=timed["config"],
                y=timed["model_id"],
                mode="markers",
                name="speedup",
                customdata=_customdata(timed),
                hovertemplate=_HOVER,
                marker=dict(
                    marker,
                    color=np.log2(timed["speedup"].to_numpy(dtype=float)),
                    colorscale=SPEEDUP_SCALE,
                    cmin=SPEEDUP_RANGE[0],
                    cmax=SPEEDUP_RANGE[1],
                    colorbar=dict(
                        title=dict(text="speedup"),
                        tickvals=[math.log2(t) for t in SPEEDUP_TICKS],
                        ticktext=[f"{t:g}x" for t in SPEEDUP_TICKS],
                        len=min(1.0, 400 / (HEADER_PX + ROW_PX * max(len(models), 1))),
                        y=1,
                        yanchor="top",
                    ),
                ),
                showlegend=False,
            )
        )
        rest = cells[~has_speedup]
        if not rest.empty:
            fig.add_trace(
                go.Scatter(
                    x=rest["config"],
                    y=rest["model_id"],
                    mode="markers",
                    name="no speedup (failed)",
                    customdata=_customdata(rest),
                    hovertemplate=_HOVER,
                    marker=dict(marker, color=NO_SPEEDUP_COLOR),
                )
            )
    else:
        present = set(cells["status"])
        ordered = [s for s in STATUSES if s in present] + sorted(present - set(STATUSES))
        for status in ordered:
            group = cells[cells["status"] == status]
            fig.add_trace(
                go.Scatter(
                    x=group["config"],
                    y=group["model_id"],
                    mode="markers",
                    name=f"{status} ({len(group)})",
                    customdata=_customdata(group),
                    hovertemplate=_HOVER,
                    marker=dict(marker, color=STATUS_COLORS.get(status, UNKNOWN_STATUS_COLOR)),
                )
            )
    _matrix_layout(fig, configs, models)
    _family_separators(fig, cells, models)
    return fig


def _family_separators(fig: go.Figure, cells: pd.DataFrame, models: list[str]) -> None:
    """A line above each family's first row and its name at the right, when several."""
    family_of = dict(zip(cells["model_id"], cells["family"], strict=False))
    starts = [
        (index, family_of.get(model))
        for index, model in enumerate(models)
        if index == 0 or family_of.get(model) != family_of.get(models[index - 1])
    ]
    if len(starts) < 2:
        return
    # Built as lists and set once: fig.add_hline/add_annotation copy the layout on every
    # call, which took seconds for a page of 50 families.
    line = dict(color="#9e9e9e", width=1, dash="dot")
    shapes = [
        dict(type="line", xref="paper", x0=0, x1=1, yref="y", y0=i - 0.5, y1=i - 0.5, line=line)
        for i, _ in starts[1:]
    ]
    annotations = [
        dict(
            x=1,
            xref="paper",
            xanchor="left",
            y=models[index],
            yref="y",
            yanchor="middle",
            text=family or "–",
            showarrow=False,
            font=dict(size=10, color="#616161"),
        )
        for index, family in starts
    ]
    fig.update_layout(shapes=shapes, annotations=annotations, margin=dict(r=120))


def family_matrix_figure(
    families: pd.DataFrame, configs: list[str], color_by: str = "status"
) -> go.Figure:
    """Families (rows) by configs: pass rate (``status``) or geomean speedup per tile.

    ``families`` has family, config, total, passed, models and geomean_speedup.
    """
    rows = sorted(families["family"].unique().tolist())
    custom = [
        [
            row.family or "–",
            row.config,
            f"{row.passed}/{row.total} pass ({100 * row.passed / row.total:.0f}%)",
            _text(row.geomean_speedup, "{:.2f}x"),
            f"{row.models}",
        ]
        for row in families.itertuples()
    ]
    if color_by == "speedup":
        color = np.log2(families["geomean_speedup"].to_numpy(dtype=float))
        colors = dict(
            colorscale=SPEEDUP_SCALE,
            cmin=SPEEDUP_RANGE[0],
            cmax=SPEEDUP_RANGE[1],
            colorbar=dict(
                title=dict(text="geomean<br>speedup"),
                tickvals=[math.log2(t) for t in SPEEDUP_TICKS],
                ticktext=[f"{t:g}x" for t in SPEEDUP_TICKS],
                len=min(1.0, 400 / (HEADER_PX + ROW_PX * max(len(rows), 1))),
                y=1,
                yanchor="top",
            ),
        )
    else:
        color = (families["passed"] / families["total"]).to_numpy(dtype=float)
        colors = dict(
            colorscale=PASS_RATE_SCALE,
            cmin=0,
            cmax=1,
            colorbar=dict(
                title=dict(text="pass rate"),
                tickformat=".0%",
                len=min(1.0, 400 / (HEADER_PX + ROW_PX * max(len(rows), 1))),
                y=1,
                yanchor="top",
            ),
        )
    fig = go.Figure(
        go.Scatter(
            x=families["config"],
            y=families["family"],
            mode="markers",
            customdata=custom,
            hovertemplate=(
                "<b>%{customdata[0]}</b> (%{customdata[4]} models)<br>%{customdata[1]}"
                "<br>%{customdata[2]}<br>geomean speedup: %{customdata[3]}<extra></extra>"
            ),
            marker=dict(symbol="square", size=TILE_PX, line=dict(width=0), color=color, **colors),
            showlegend=False,
        )
    )
    _matrix_layout(fig, configs, rows)
    return fig


def status_legend(cells: pd.DataFrame, color_by: str) -> str:
    """The matrix's legend as HTML: a coloured square and a count per status (or the
    speedup scale's meaning)."""
    if color_by == "speedup":
        return (
            f'<span style="color:{SPEEDUP_SCALE[0][1]}">■</span> slower than eager · '
            f'<span style="color:{SPEEDUP_SCALE[1][1]}">■</span> about 1x · '
            f'<span style="color:{SPEEDUP_SCALE[-1][1]}">■</span> faster · '
            f'<span style="color:{NO_SPEEDUP_COLOR}">■</span> no speedup (the cell failed)'
        )
    counts = cells["status"].value_counts()
    ordered = [s for s in STATUSES if s in counts] + sorted(set(counts.index) - set(STATUSES))
    return " · ".join(
        f'<span style="color:{STATUS_COLORS.get(s, UNKNOWN_STATUS_COLOR)}">■</span> '
        f"{html.escape(str(s))} ({counts[s]:,})"
        for s in ordered
    )


def _empty(message: str) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(height=250)
    return fig


def speedup_histogram(points: pd.DataFrame) -> go.Figure:
    """How many passing cells reach each speedup (bins of 0.05x), with a line at 1x."""
    if points.empty:
        return _empty("No passing cells with a speedup.")
    speedups = points["speedup"].to_numpy(dtype=float)
    low = math.floor(speedups.min() * 20) / 20
    high = math.ceil(speedups.max() * 20) / 20 + 0.05
    counts, edges = np.histogram(speedups, bins=np.arange(low, high + 1e-9, 0.05))
    fig = go.Figure(
        go.Bar(
            x=(edges[:-1] + edges[1:]) / 2,
            y=counts,
            width=0.05,
            marker_color="#4c78a8",
            customdata=np.stack([edges[:-1], edges[1:]], axis=-1),
            hovertemplate="%{customdata[0]:.2f}x–%{customdata[1]:.2f}x: %{y} cells<extra></extra>",
        )
    )
    fig.add_vline(x=1, line=dict(color="#616161", dash="dash"), annotation_text="1x")
    fig.update_layout(
        xaxis_title="speedup (median eager / median compiled)",
        yaxis_title="cells",
        bargap=0.05,
        height=360,
        margin=dict(t=30),
    )
    return fig


def speedup_vs_compile(points: pd.DataFrame) -> go.Figure:
    """Speedup against compile time, one colour per backend (log compile-time axis)."""
    if points.empty or points["compile_s"].isna().all():
        return _empty("No passing cells with a compile time.")
    fig = go.Figure()
    for backend, group in points.groupby("backend", sort=True):
        fig.add_trace(
            go.Scattergl(
                x=group["compile_s"],
                y=group["speedup"],
                mode="markers",
                name=backend,
                marker=dict(size=7, opacity=0.7),
                customdata=group[["model_id", "config"]].to_numpy(),
                hovertemplate=(
                    "<b>%{customdata[0]}</b><br>%{customdata[1]}<br>speedup %{y:.2f}x"
                    "<br>compile %{x:.1f} s<extra></extra>"
                ),
            )
        )
    fig.add_hline(y=1, line=dict(color="#616161", dash="dash"))
    fig.update_layout(
        xaxis=dict(type="log", title="compile time (s, log scale)"),
        yaxis_title="speedup",
        height=420,
        margin=dict(t=30),
        legend_title_text="backend",
    )
    return fig


def latency_figure(cells: pd.DataFrame) -> go.Figure:
    """Eager and compiled median latency per config, whiskers from p25 to p75."""
    timed = cells[cells["eager_ms"].notna() | cells["compiled_ms"].notna()]
    if timed.empty:
        return _empty("No timings recorded for this model.")
    fig = go.Figure()
    for name, column, color in (
        ("eager", "eager_ms", "#9e9e9e"),
        ("compiled", "compiled_ms", "#4c78a8"),
    ):
        median = timed[column]
        fig.add_trace(
            go.Bar(
                y=timed["config"],
                x=median,
                name=name,
                orientation="h",
                marker_color=color,
                error_x=dict(
                    type="data",
                    symmetric=False,
                    array=(timed[f"{column}_p75"] - median).clip(lower=0),
                    arrayminus=(median - timed[f"{column}_p25"]).clip(lower=0),
                    color="#212121",
                ),
                hovertemplate=f"{name}: %{{x:.3f}} ms<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="group",
        xaxis_title="latency per call, ms (median; whiskers p25–p75)",
        yaxis=dict(autorange="reversed", automargin=True),
        height=140 + 46 * len(timed),
        margin=dict(t=30),
        legend=dict(orientation="h", y=1.02, yanchor="bottom", x=0),
    )
    return fig
