"""The dashboard's charts: pure functions from DataFrames to plotly figures and HTML.

They know nothing of Streamlit, so tests build them from small frames and look inside.
The matrix of models is an HTML table (``matrix_html``); the matrix of families is
drawn as square scatter markers rather than a plotly heatmap: scatter points can be
clicked and selected (a heatmap cell cannot), and a missing cell simply has no marker.
"""

from __future__ import annotations

import collections
import html
import itertools
import math
import urllib.parse
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard import caveats as cell_caveats
from dashboard import pairs
from dashboard import status as categories
from runner.matrix.labels import DISTURBED_RATIO, LAUNCH_BOUND_RATIO, is_disturbed
from runner.matrix.results import CROWDED_COMPILE, PASS, STATUSES, UNSUPPORTED

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
# A passing cell that broke its graph: pale green beside fullgraph's green.
PASS_WITH_BREAKS_COLOR = "#a1d99b"
UNKNOWN_STATUS_COLOR = "#f781bf"
# In speedup colours: a failed cell (no speedup) dark grey, an unsupported one its light
# grey, a place without a cell (not run) white in a thin frame: three greys apart.
NO_SPEEDUP_COLOR = "#737373"
NOT_RUN_FILL = "#ffffff"
NOT_RUN_EDGE = "#c8c8c8"
# Speedup colours run on log2 from 0.5x (red) through 1x (yellow) to 3x (green).
SPEEDUP_SCALE = [[0.0, "#d73027"], [0.387, "#fee08b"], [1.0, "#1a9850"]]
SPEEDUP_RANGE = (-1.0, math.log2(3))
SPEEDUP_TICKS = (0.5, 0.75, 1, 1.5, 2, 3)
PASS_RATE_SCALE = [[0.0, "#d62728"], [0.5, "#fdd835"], [1.0, "#2ca02c"]]
ROW_PX = 22
# A dark corner, top right: a caveat the hatching and the bar do not show.
CORNER_MARK = "linear-gradient(225deg, #212121 0 5px, transparent 5px)"
TILE_PX = 17
# The space between two tiles (the table's border-spacing), and from one tile to the next.
TILE_GAP_PX = 2
TILE_PITCH_PX = TILE_PX + TILE_GAP_PX
HEADER_PX = 190
# The matrix is a CSS grid, one element a tile: a table needed two (a cell and its link),
# and the browser's cost of a page (sanitizing, parsing, laying out) follows its
# elements: a page of 1,000 tiles drew in about 180 ms instead of 215 (docs/PERFORMANCE.md).
# Each model's row is a subgrid of the page's columns; its ::before draws the frame of
# every place of the row, under its tiles, so a place without a cell is no element. The
# frame is a layer of its own (will-change): Streamlit fades the page's elements while a
# rerun runs, and the browser then repainted the whole matrix (40 ms for 1,000 tiles)
# to fade it, where it now fades the layer's pixels.
_NOT_RUN_PLACES = f"""linear-gradient(to right, {NOT_RUN_EDGE} {TILE_PX}px, transparent {TILE_PX}px)
        0 0 / {TILE_PITCH_PX}px 1px repeat-x,
    linear-gradient(to right, {NOT_RUN_EDGE} {TILE_PX}px, transparent {TILE_PX}px)
        0 100% / {TILE_PITCH_PX}px 1px repeat-x,
    linear-gradient(to right, {NOT_RUN_EDGE} 1px, {NOT_RUN_FILL} 1px {TILE_PX - 1}px,
        {NOT_RUN_EDGE} {TILE_PX - 1}px {TILE_PX}px, transparent {TILE_PX}px)
        0 0 / {TILE_PITCH_PX}px 100% repeat-x"""
_HATCH = "repeating-linear-gradient(45deg, rgba(255,255,255,.75) 0 2px, transparent 2px 5px)"
_MATRIX_CSS = f"""
.zoo-matrix-frame {{ overflow-x: auto; will-change: transform; }}
.zoo-matrix {{ display: grid; gap: {TILE_GAP_PX}px; width: max-content; padding: {TILE_GAP_PX}px;
    font-size: 12px; line-height: 1; }}
.zoo-matrix > div {{ display: grid; grid-column: 1 / -1; grid-template-columns: subgrid;
    grid-template-rows: {TILE_PX}px; align-items: center; }}
.zoo-matrix > div::before {{ content: ""; grid-area: 1 / 2 / 2 / -1; align-self: stretch;
    background: {_NOT_RUN_PLACES}; }}
.zoo-matrix > div > a {{ grid-row: 1; align-self: stretch; }}
.zoo-matrix > div > a:hover {{ outline: 2px solid #212121; }}
.zoo-matrix > div > a.model {{ grid-column: 1; align-self: center; text-align: right;
    padding-right: 6px; white-space: nowrap; color: inherit; text-decoration: none; }}
.zoo-matrix > div > a.model:hover {{ outline: none; text-decoration: underline; }}
.zoo-matrix > div.configs {{ grid-template-rows: auto; align-items: end; }}
.zoo-matrix > div.configs::before, .zoo-matrix > div.family::before {{ content: none; }}
.zoo-matrix .configs span {{ grid-row: 1; width: {TILE_PX}px; white-space: nowrap;
    transform: translate(8px, 0) rotate(-55deg); transform-origin: bottom left; }}
.zoo-matrix > div.family {{ display: block; color: #616161; font-size: 11px;
    padding: 6px 0 2px 0; border-top: 1px dotted #9e9e9e; }}
.zoo-matrix a.launch-bound {{ box-shadow: inset 0 -4px 0 #212121; }}
.zoo-matrix a.caveat, .zoo-legend .caveat {{ background-image: {CORNER_MARK}; }}
.zoo-matrix a.disturbed, .zoo-legend .disturbed {{ background-image: {_HATCH}; }}
.zoo-matrix a.disturbed.caveat {{ background-image: {CORNER_MARK}, {_HATCH}; }}
.zoo-legend .not-run {{ background: {NOT_RUN_FILL}; box-shadow: inset 0 0 0 1px {NOT_RUN_EDGE}; }}
"""
# The matrix's x categories can be long ("inductor/max-autotune-no-cudagraphs dyn=auto
# bf16"); they sit on top, turned, so they stay visible above a tall page of rows.
_CONFIG_AXIS = dict(side="top", tickangle=-35, showgrid=False, automargin=True, fixedrange=True)


def rows_of(frame: pd.DataFrame) -> list[tuple]:
    """The frame's rows as named tuples, read a column at a time: ``itertuples`` reads
    pandas' Arrow-backed text columns value by value, which made most of the 0.1 s a page
    of 1,000 matrix cells took to draw."""
    row = collections.namedtuple("Row", frame.columns, rename=True)
    columns = [frame[name].tolist() for name in frame.columns]
    return list(map(row._make, zip(*columns, strict=True)))


def _get(row, name: str, default):
    value = getattr(row, name, default)
    return default if value is None or pd.isna(value) else int(value)


def _text(value, fmt: str) -> str:
    return "–" if value is None or pd.isna(value) else fmt.format(value)


def _label(value) -> str:
    """Data as plotly text: plotly reads tags (<a href>, <b>) in labels and hover text,
    and shows entities as their characters, so escaped text shows as it is."""
    return html.escape(str(value), quote=False)


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
        tickvals=configs,
        ticktext=[_label(config) for config in configs],
        range=[-0.5, len(configs) - 0.5],
        **_CONFIG_AXIS,
    )
    fig.update_yaxes(
        type="category",
        categoryorder="array",
        categoryarray=rows,
        tickvals=rows,
        ticktext=[_label(row) for row in rows],
        range=[len(rows) - 0.5, -0.5],
        showgrid=False,
        automargin=True,
        fixedrange=True,
    )


def speedup_color(speedup: float) -> str:
    """The colour of ``SPEEDUP_SCALE`` for a speedup (log2, clipped to ``SPEEDUP_RANGE``)."""
    low, high = SPEEDUP_RANGE
    position = min(max((math.log2(speedup) - low) / (high - low), 0.0), 1.0)
    for (start, left), (end, right) in itertools.pairwise(SPEEDUP_SCALE):
        if position <= end:
            share = (position - start) / (end - start)
            channels = (
                round(int(left[i : i + 2], 16) * (1 - share) + int(right[i : i + 2], 16) * share)
                for i in (1, 3, 5)
            )
            return "#" + "".join(f"{c:02x}" for c in channels)
    return SPEEDUP_SCALE[-1][1]


def _tooltip(row) -> str:
    """A tile's hover text: what it is, then its numbers, then its caveats. Short: a page
    holds up to 1,000 of them, and the browser reads each one on every redraw (a filter
    change spent about a fifth of its time in the tooltips)."""
    numbers = [
        ("speedup {:.2f}x", row.speedup),
        ("GPU-time speedup {:.2f}x", getattr(row, "gpu_speedup", None)),
    ]
    costs = [
        ("compile {:.1f} s", row.compile_s),
        ("memory ratio {:.2f}", row.memory_ratio),
        ("graph breaks {:.0f}", row.graph_break_count),
    ]
    lines = [
        row.model_id,
        row.config,
        " · ".join([row.status, *_present(numbers)]),
        " · ".join(_present(costs)),
    ]
    for key in _caveat_keys(row):
        detail = {
            "disturbed": f": a median {row.timing_disturbance:.2f}x its fastest sample",
            "launch-bound": ": the GPU-time speedup is the stable figure" + _canary(row),
        }.get(key, "")
        lines.append(f"⚠ {cell_caveats.BY_KEY[key].badge}{detail}")
    return "\n".join(line for line in lines if line)


def _canary(row) -> str:
    """How fast the host launched while a launch-bound cell was timed (its launch
    canary, runner.measure.timing), where the row has it."""
    canary = getattr(row, "host_launch_us", None)
    if canary is None or pd.isna(canary):
        return ""
    return f" (timed at {canary:.1f} µs per launch)"


def _caveat_keys(row) -> list[str]:
    """The row's caveats (``caveats.CAVEATS``): its ``caveats`` column, or for a frame
    without one, its disturbed timing and launch-bound baseline."""
    if hasattr(row, "caveats"):
        return cell_caveats.keys(row.caveats)
    return [
        key
        for key, on in (
            ("disturbed", _disturbed(row)),
            ("launch-bound", getattr(row, "bound", None) == cell_caveats.LAUNCH_BOUND),
        )
        if on
    ]


def _present(values: list[tuple[str, object]]) -> list[str]:
    """Each (format, value) formatted, those without a value left out."""
    return [fmt.format(value) for fmt, value in values if value is not None and pd.notna(value)]


def _disturbed(row) -> bool:
    """The cell's timing was disturbed (runner.matrix.labels): its speedup is unsure."""
    disturbance = getattr(row, "timing_disturbance", None)
    return disturbance is not None and pd.notna(disturbance) and is_disturbed(disturbance, 1.0)


def _tile_style(row, color_by: str) -> str:
    if color_by == "speedup":
        if pd.notna(row.speedup) and row.speedup > 0:
            return speedup_color(row.speedup)
        if row.status == UNSUPPORTED:
            return STATUS_COLORS[UNSUPPORTED]
        return NO_SPEEDUP_COLOR
    breaks = getattr(row, "graph_break_count", None)
    if row.status == "pass" and breaks is not None and pd.notna(breaks) and breaks > 0:
        return PASS_WITH_BREAKS_COLOR
    return STATUS_COLORS.get(row.status, UNKNOWN_STATUS_COLOR)


def matrix_html(
    cells: pd.DataFrame,
    configs: list[str],
    models: list[str],
    color_by: str = "status",
    link_params: Sequence[tuple[str, str]] = (),
) -> str:
    """Models (rows, in the given order) by configs (columns) as an HTML grid, one
    coloured tile (a link) per cell, for ``st.html``.

    Plain HTML rather than a plotly chart: the browser shows it as soon as Streamlit's
    page is up, while plotly.js takes seconds to start on a small machine (see
    benchmarks/dashboard_speed.py). A tile's tooltip holds the cell's numbers and the
    tile links to Model detail on that config, carrying ``link_params`` (the filters) so
    the sidebar stays as it was; a model's name links to all its configs. With several
    families on the page, a row with the family's name starts each.

    ``cells`` has model_id, family, config, status, speedup, graph_break_count,
    compile_s and memory_ratio; ``color_by`` is ``status`` or ``speedup`` (log scale,
    cells without a speedup grey).
    """
    # A row is a model, or a model on one device and size where the data holds several
    # (``row_id``: "timm/resnet50 · cpu tiny"); its links open the model.
    row_ids = (cells["row_id"] if "row_id" in cells else cells["model_id"]).tolist()
    by_cell = {(row, cell.config): cell for row, cell in zip(row_ids, rows_of(cells), strict=True)}
    family_of = dict(zip(row_ids, cells["family"].tolist(), strict=False))
    model_of = dict(zip(row_ids, cells["model_id"].tolist(), strict=False))
    several_families = len({family_of.get(model) for model in models}) > 1
    # Quoted once per model, config and filter set: 1,000 urlencode calls took 0.1 s.
    keep = html.escape("".join(f"&{urllib.parse.urlencode([pair])}" for pair in link_params))
    model_link = {
        model: f"detail?model={urllib.parse.quote_plus(model_of.get(model, model))}"
        for model in models
    }
    # Each config's column (the model's name is the first) and its part of a tile's link.
    column = {config: index for index, config in enumerate(configs, start=2)}
    config_arg = {config: f"&amp;config={urllib.parse.quote_plus(config)}" for config in configs}

    # The config names stand turned by 55 degrees above their columns: the row is as tall
    # as the longest one needs (about 5.6 px a character at 12 px, times sin 55 degrees).
    header_px = round(20 + 4.6 * max((len(config) for config in configs), default=0))
    head = "".join(f"<span>{html.escape(config)}</span>" for config in configs)
    rows = []
    previous = object()
    for model in models:
        family = family_of.get(model)
        if several_families and family != previous:
            rows.append(f'<div class="family">{html.escape(family or "–")}</div>')
        previous = family
        tiles = []
        for config in configs:
            row = by_cell.get((model, config))
            if row is None:
                continue
            badges = [
                name
                for name, on in (
                    ("launch-bound", getattr(row, "bound", None) == cell_caveats.LAUNCH_BOUND),
                    ("disturbed", _disturbed(row)),
                    ("caveat", bool(set(_caveat_keys(row)) & set(cell_caveats.CORNER))),
                )
                if on
            ]
            badge = f' class="{" ".join(badges)}"' if badges else ""
            # background-color, not background: a class's hatching stays over it.
            tiles.append(
                f'<a{badge} style="background-color:{_tile_style(row, color_by)};'
                f'grid-column:{column[config]}" href="{model_link[model]}{config_arg[config]}'
                f'{keep}" title="{html.escape(_tooltip(row))}"></a>'
            )
        rows.append(
            f'<div><a class="model" href="{model_link[model]}{keep}">{html.escape(model)}</a>'
            + "".join(tiles)
            + "</div>"
        )
    return (
        f"<style>{_MATRIX_CSS}</style>"
        f'<div class="zoo-matrix-frame"><div class="zoo-matrix" style="grid-template-columns:'
        f'max-content repeat({len(configs)},{TILE_PX}px)">'
        f'<div class="configs" style="height:{header_px}px"><span></span>{head}</div>'
        f"{''.join(rows)}</div></div>"
    )


def family_matrix_figure(
    families: pd.DataFrame, configs: list[str], color_by: str = "status"
) -> go.Figure:
    """Families (rows) by configs: pass rate (``status``) or geomean speedup per tile.

    ``families`` has family, config, total, passed, models and geomean_speedup.
    """
    rows = sorted(families["family"].unique().tolist())
    custom = [
        [
            _label(row.family or "–"),
            _label(row.config),
            "pass rate "
            + categories.pass_rate_text(
                row.passed,
                _get(row, "attempted", row.total),
                _get(row, "unsupported", 0),
                _get(row, "not_run", 0),
            ),
            _text(row.geomean_speedup, "{:.2f}x"),
            f"{row.models}",
        ]
        for row in rows_of(families)
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
        # Over the attempted cells: a family that could not run a config is no failure.
        attempted = families.get("attempted", families["total"]).to_numpy(dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            color = families["passed"].to_numpy(dtype=float) / attempted
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
    # Tiles with nothing to colour (all unsupported, or no passing speedup) stay grey.
    colorless = np.isnan(color)
    fig = go.Figure(
        go.Scatter(
            x=families["config"][colorless],
            y=families["family"][colorless],
            mode="markers",
            customdata=[c for c, off in zip(custom, colorless, strict=True) if off],
            hovertemplate=(
                "<b>%{customdata[0]}</b> (%{customdata[4]} models)<br>%{customdata[1]}"
                "<br>%{customdata[2]}<extra></extra>"
            ),
            marker=dict(
                symbol="square", size=TILE_PX, line=dict(width=0), color=STATUS_COLORS[UNSUPPORTED]
            ),
            showlegend=False,
        )
    )
    fig.add_trace(
        go.Scatter(
            x=families["config"][~colorless],
            y=families["family"][~colorless],
            mode="markers",
            customdata=[c for c, off in zip(custom, colorless, strict=True) if not off],
            hovertemplate=(
                "<b>%{customdata[0]}</b> (%{customdata[4]} models)<br>%{customdata[1]}"
                "<br>%{customdata[2]}<br>geomean speedup: %{customdata[3]}<extra></extra>"
            ),
            marker=dict(
                symbol="square",
                size=TILE_PX,
                line=dict(width=0),
                color=color[~colorless],
                **colors,
            ),
            showlegend=False,
        )
    )
    _matrix_layout(fig, configs, rows)
    return fig


def status_legend(cells: pd.DataFrame, color_by: str, not_run: int = 0) -> str:
    """The matrix's legend as HTML: the cells of the page by category (passed, failed by
    kind, unsupported here, not run: ``not_run`` places without a cell) with a coloured
    square and a count each, the pass rate over the attempted cells (or the speedup
    scale with its numbers), then the badges the page's cells carry."""
    counts = cells["status"].value_counts()
    not_run_entry = (
        f'<span class="not-run" style="{_SWATCH_SHAPE}"></span> {categories.NOT_RUN} ({not_run:,})'
    )
    if color_by == "speedup":
        entries = [speedup_colorbar()]
        failed = int(sum(counts[s] for s in counts.index if s not in (PASS, UNSUPPORTED)))
        untimed = int(((cells["status"] == PASS) & ~(cells["speedup"] > 0)).sum())
        if failed or untimed:
            entries.append(
                _legend(NO_SPEEDUP_COLOR, "failed or untimed (no speedup)", failed + untimed)
            )
        if UNSUPPORTED in counts:
            entries.append(
                _legend(STATUS_COLORS[UNSUPPORTED], "unsupported here", counts[UNSUPPORTED])
            )
        entries.append(not_run_entry)
        return " · ".join(entries) + _badge_legend(cells)
    ordered = [s for s in STATUSES if s in counts] + sorted(set(counts.index) - set(STATUSES))
    groups: dict[str, list[str]] = {}
    for status in ordered:
        count = counts[status]
        group = groups.setdefault(categories.category(status), [])
        if status == PASS and "graph_break_count" in cells:
            broken = int(((cells["status"] == PASS) & (cells["graph_break_count"] > 0)).sum())
            if broken:
                group.append(_legend(STATUS_COLORS[PASS], "pass fullgraph", count - broken))
                group.append(_legend(PASS_WITH_BREAKS_COLOR, "pass with graph breaks", broken))
                continue
        group.append(_legend(STATUS_COLORS.get(status, UNKNOWN_STATUS_COLOR), status, count))
    if not_run:
        groups[categories.NOT_RUN] = [not_run_entry]
    passed = int(counts.get(PASS, 0))
    attempted = int(len(cells) - counts.get(UNSUPPORTED, 0))
    rate = categories.pass_rate_text(passed, attempted)
    return (
        " · ".join(
            f"<strong>{name}</strong> " + " ".join(groups[name])
            for name in categories.CATEGORIES
            if name in groups
        )
        + (f" · <strong>pass rate</strong> {rate} of the attempted" if ordered else "")
        + _badge_legend(cells)
        + (" <small>(cells on this page)</small>" if ordered else "")
    )


def speedup_colorbar() -> str:
    """The speedup colours as a bar with its numbers (log2 axis, ``SPEEDUP_TICKS``)."""
    low, high = SPEEDUP_RANGE
    stops = ", ".join(f"{color} {100 * at:.1f}%" for at, color in SPEEDUP_SCALE)
    ticks = "".join(
        f'<span style="position:absolute;left:{100 * (math.log2(t) - low) / (high - low):.1f}%;'
        f'transform:translateX(-50%);top:12px;font-size:10px">{t:g}x</span>'
        for t in SPEEDUP_TICKS
    )
    return (
        '<span class="zoo-colorbar" style="display:inline-block;position:relative;width:220px;'
        'height:26px;vertical-align:middle;margin:0 14px 0 6px">'
        f'<span style="position:absolute;left:0;right:0;top:0;height:11px;'
        f'background:linear-gradient(to right, {stops})"></span>{ticks}</span>'
        "speedup (eager / compiled, log scale; below 0.5x and above 3x at the ends)"
    )


def _legend(color: str, label: str, count: int) -> str:
    return f'<span style="color:{color}">■</span> {html.escape(str(label))} ({count:,})'


_SWATCH_SHAPE = "display:inline-block;width:11px;height:11px;vertical-align:-1px"
_SWATCH = f"{_SWATCH_SHAPE};background-color:#9e9e9e"


def _badge_legend(cells: pd.DataFrame) -> str:
    disturbance = cells.get("timing_disturbance")
    disturbed = 0 if disturbance is None else int((disturbance >= DISTURBED_RATIO).sum())
    launch = int((cells["bound"] == "launch-bound").sum()) if "bound" in cells else 0
    parts = []
    if disturbed:
        parts.append(
            f'<span class="disturbed" style="{_SWATCH}"></span> hatched: timing disturbed, '
            f"the speedup unsure (a median {DISTURBED_RATIO:g}x its fastest sample or more) "
            f"({disturbed:,})"
        )
    if launch:
        parts.append(
            f'<span style="{_SWATCH};box-shadow:inset 0 -3px 0 #212121"></span> bar: '
            f"launch-bound, its fastest eager call {LAUNCH_BOUND_RATIO:g}x its GPU busy time or "
            f"more: the GPU-time speedup is the stable figure ({launch:,})"
        )
    corner = collections.Counter(
        key
        for value in cells.get("caveats", [])
        for key in cell_caveats.keys(value)
        if key in cell_caveats.CORNER
    )
    if corner:
        named = ", ".join(
            f"{cell_caveats.BY_KEY[key].badge} ({count:,})"
            for key, count in sorted(
                corner.items(), key=lambda kv: cell_caveats.CORNER.index(kv[0])
            )
        )
        parts.append(
            f'<span class="caveat" style="{_SWATCH}"></span> corner: {html.escape(named)}; '
            "hover a cell for its caveats, open it for why"
        )
    return "".join(f" · {part}" for part in parts)


def _empty(message: str) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(height=250)
    return fig


HISTOGRAM_BIN_LOG2 = 0.05  # bins 3.5% wide: fine around 1x, few far out
HISTOGRAM_TICKS = (0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 20)


def speedup_histogram(points: pd.DataFrame) -> go.Figure:
    """How many passing cells reach each speedup, on a log axis (bins of equal ratio, so
    0.5x and 2x lie as far from 1x and the 0.5-3x region is not squashed by a 12x
    outlier), with a line at 1x."""
    if points.empty:
        return _empty("No passing cells with a speedup.")
    logs = np.log2(points["speedup"].to_numpy(dtype=float))
    step = HISTOGRAM_BIN_LOG2
    low = math.floor(logs.min() / step) * step
    high = math.ceil(logs.max() / step) * step + step
    counts, edges = np.histogram(logs, bins=np.arange(low, high + 1e-9, step))
    ticks = [t for t in HISTOGRAM_TICKS if low - step <= math.log2(t) <= high + step]
    fig = go.Figure(
        go.Bar(
            x=(edges[:-1] + edges[1:]) / 2,
            y=counts,
            width=step,
            marker_color="#4c78a8",
            customdata=np.stack([2 ** edges[:-1], 2 ** edges[1:]], axis=-1),
            hovertemplate="%{customdata[0]:.2f}x–%{customdata[1]:.2f}x: %{y} cells<extra></extra>",
        )
    )
    fig.add_vline(x=0, line=dict(color="#616161", dash="dash"), annotation_text="1x")
    fig.update_layout(
        xaxis=dict(
            title="speedup (median eager / median compiled), log scale",
            tickvals=[math.log2(t) for t in ticks],
            ticktext=[f"{t:g}x" for t in ticks],
        ),
        yaxis_title="cells",
        bargap=0.05,
        height=360,
        margin=dict(t=30),
    )
    return fig


def _speedups_by_backend(
    points: pd.DataFrame, x: str, x_hover: str, after: pd.Series | None = None
) -> go.Figure:
    """The passing cells' speedups (y) against their column ``x``, a trace (a colour) a
    backend, a cell with a caveat on its numbers hollow (``caveat``, where the frame has
    it); the hover names the model and config, then ``x_hover``, then the cell's text in
    ``after`` (ours, not the data's: it is not escaped)."""
    fig = go.Figure()
    if after is None:
        after = pd.Series("", index=points.index)
    for backend, group in points.groupby("backend", sort=True):
        hollow = group["caveat"].fillna(False) if "caveat" in group else [False] * len(group)
        customdata = group[["model_id", "config"]].map(_label).assign(after=after[group.index])
        fig.add_trace(
            go.Scattergl(
                x=group[x],
                y=group["speedup"],
                mode="markers",
                name=_label(backend),
                marker=dict(
                    size=7,
                    opacity=0.7,
                    symbol=["circle-open" if off else "circle" for off in hollow],
                ),
                customdata=customdata.to_numpy(),
                hovertemplate=(
                    "<b>%{customdata[0]}</b><br>%{customdata[1]}<br>speedup %{y:.2f}x"
                    f"<br>{x_hover}%{{customdata[2]}}<extra></extra>"
                ),
            )
        )
    fig.update_layout(height=420, margin=dict(t=30), legend_title_text="backend")
    return fig


def speedup_vs_compile(points: pd.DataFrame) -> go.Figure:
    """Speedup against compile time, one colour per backend (log compile-time axis)."""
    if points.empty or points["compile_s"].isna().all():
        return _empty("No passing cells with a compile time.")
    # A compile beside other cells' (a parallel sweep's) reads longer than alone.
    beside = points.get("compile_beside")
    after = None
    if beside is not None:
        after = beside.map(
            lambda v: (
                f", beside {v:.1f} other compiles" if pd.notna(v) and v >= CROWDED_COMPILE else ""
            )
        )
    fig = _speedups_by_backend(points, "compile_s", "compile %{x:.1f} s", after)
    fig.add_hline(y=1, line=dict(color="#616161", dash="dash"))
    fig.update_layout(
        xaxis=dict(type="log", title="compile time (s, log scale)"), yaxis_title="speedup"
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
    configs = list(dict.fromkeys(timed["config"]))
    fig.update_layout(
        barmode="group",
        xaxis_title="latency per call, ms (median; whiskers p25–p75)",
        yaxis=dict(
            autorange="reversed",
            automargin=True,
            tickvals=configs,
            ticktext=[_label(config) for config in configs],
        ),
        height=140 + 46 * len(timed),
        margin=dict(t=30),
        legend=dict(orientation="h", y=1.02, yanchor="bottom", x=0),
    )
    return fig


def config_scatter(shared: pd.DataFrame, a: str, b: str) -> go.Figure:
    """Speedup in config ``a`` (x) against config ``b`` (y), one point a model passing in
    both, log axes and the diagonal (same speedup); a point whose timing has a caveat (a
    side disturbed or launch-bound) is hollow.

    ``shared`` has model_id, a_speedup, b_speedup and, optionally, a_timing, b_timing,
    a_bound, b_bound, a_one_region and b_one_region (hollow too where the two differ:
    ``pairs.scoped_apart``).
    """
    if shared.empty:
        return _empty("No model passes with a speedup in both configs.")
    caveat = pairs.scoped_apart(shared)
    for column, flag in (
        ("a_timing", "disturbed"),
        ("b_timing", "disturbed"),
        ("a_bound", "launch-bound"),
        ("b_bound", "launch-bound"),
    ):
        if column in shared:
            caveat |= shared[column] == flag
    fig = go.Figure()
    for name, rows, symbol in (
        ("steady", shared[~caveat], "circle"),
        ("timing caveat", shared[caveat], "circle-open"),
    ):
        if rows.empty:
            continue
        fig.add_trace(
            go.Scatter(
                x=rows["a_speedup"],
                y=rows["b_speedup"],
                mode="markers",
                name=name,
                marker=dict(size=8, symbol=symbol, color="#4c78a8"),
                customdata=rows[["model_id"]].map(_label).to_numpy(),
                hovertemplate=(
                    "<b>%{customdata[0]}</b><br>A %{x:.2f}x<br>B %{y:.2f}x<extra></extra>"
                ),
            )
        )
    values = pd.concat([shared["a_speedup"], shared["b_speedup"]])
    low, high = float(values.min()) / 1.2, float(values.max()) * 1.2
    fig.add_trace(
        go.Scatter(
            x=[low, high],
            y=[low, high],
            mode="lines",
            name="same speedup",
            line=dict(color="#616161", dash="dash"),
            hoverinfo="skip",
        )
    )
    fig.update_layout(
        xaxis=dict(type="log", title=f"A: {_label(a)} (speedup, log scale)"),
        yaxis=dict(type="log", title=f"B: {_label(b)} (speedup, log scale)"),
        height=480,
        margin=dict(t=30),
    )
    return fig


# -- Summary: a config a row (pass rates, distributions) and sweeps over time --


def series_label(config: str, variant: str | None = None) -> str:
    """A config's name, with its device and size where the data holds several."""
    return f"{config} · {variant}" if isinstance(variant, str) and variant else config


def _series(frame: pd.DataFrame) -> list[str]:
    """Each row's config (and variant) as plotly category text: escaped, so that the
    axis and the hover show it as it is (plotly reads tags in category names)."""
    variants = frame["variant"] if "variant" in frame else [None] * len(frame)
    return [
        _label(series_label(config, variant))
        for config, variant in zip(frame["config"], variants, strict=True)
    ]


PANEL_ROW_PX = 28
# A colour a config in the sweeps chart, the same in both its panels.
TREND_COLORS = (
    "#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#eeca3b", "#9d755d",
    "#ff9da6", "#bab0ac",
)  # fmt: skip
# Ticks of log axes, a few a decade: plotly's own label 2 and 5 of every decade.
SPEEDUP_AXIS_TICKS = (0.1, 0.25, 0.5, 1, 2, 4, 8, 16)
COMPILE_AXIS_TICKS = (0.1, 0.3, 1, 3, 10, 30, 100, 300, 1000, 3000)
MEMORY_AXIS_TICKS = (0.1, 0.25, 0.5, 1, 2, 4, 8)


def _log_ticks(frame: pd.DataFrame, name: str, ticks, fmt: str) -> dict:
    """``tickvals``/``ticktext`` of ``ticks`` within the range of ``{name}_min`` to
    ``{name}_max`` (one below and one above, so the data lies between two)."""
    if frame.empty:
        return {}
    low, high = float(frame[f"{name}_min"].min()), float(frame[f"{name}_max"].max())
    return _ticks_between(low, high, ticks, fmt)


def _ticks_between(low: float, high: float, ticks, fmt: str) -> dict:
    below = [t for t in ticks if t <= low][-1:]
    above = [t for t in ticks if t >= high][:1]
    shown = below + [t for t in ticks if low < t < high] + above
    return dict(tickvals=shown, ticktext=[fmt.format(t) for t in shown])


def config_panels(rates: pd.DataFrame, spread: pd.DataFrame) -> go.Figure:
    """A row a config, three panels beside its name: its pass rate as a bar (over its
    attempted cells, the unsupported and not-run named beside it; no bar where nothing
    was attempted), and boxes of its passing cells' speedups and compile times on log
    axes (the box from the first to the third quartile, the line at the median, the
    whiskers to the smallest and the largest).

    ``rates`` has config (and variant), passed, attempted, unsupported and not_run in
    the order to draw; ``spread`` the same configs' quartiles (``speedup_q1``, ...,
    ``compile_max``, ``*_n`` the cells they are over: ``queries.DISTRIBUTIONS``).
    """
    from plotly.subplots import make_subplots

    if rates.empty:
        return _empty("No cells.")
    rows = _series(rates)
    fig = make_subplots(
        rows=1,
        cols=3,
        shared_yaxes=True,
        horizontal_spacing=0.05,
        column_widths=[0.36, 0.32, 0.32],
        subplot_titles=(
            "pass rate (of the attempted cells)",
            "speedup, passing cells (log)",
            "compile time, s (log)",
        ),
    )
    rate = [categories.pass_rate(int(row.passed), int(row.attempted)) for row in rows_of(rates)]
    fig.add_trace(
        go.Bar(
            y=rows,
            x=[0 if r is None else r for r in rate],
            orientation="h",
            text=[
                categories.pass_rate_text(
                    int(row.passed), int(row.attempted), int(row.unsupported), int(row.not_run)
                )
                for row in rows_of(rates)
            ],
            # Inside a long bar, beside a short one (or none: nothing attempted).
            textposition=["inside" if r is not None and r >= 0.5 else "outside" for r in rate],
            insidetextanchor="start",
            cliponaxis=False,
            marker=dict(
                color=[math.nan if r is None else r for r in rate],
                colorscale=PASS_RATE_SCALE,
                cmin=0,
                cmax=1,
            ),
            hovertemplate="%{y}<br>pass rate %{text}<extra></extra>",
            showlegend=False,
        ),
        row=1,
        col=1,
    )
    for col, name, ticks, fmt in (
        (2, "speedup", SPEEDUP_AXIS_TICKS, "{:g}x"),
        (3, "compile", COMPILE_AXIS_TICKS, "{:g}"),
    ):
        timed = spread[spread[f"{name}_n"] > 0]
        fig.add_trace(
            go.Box(
                y=_series(timed),
                q1=timed[f"{name}_q1"],
                median=timed[f"{name}_median"],
                q3=timed[f"{name}_q3"],
                lowerfence=timed[f"{name}_min"],
                upperfence=timed[f"{name}_max"],
                orientation="h",
                marker_color="#4c78a8",
                boxpoints=False,
                name=name,
                showlegend=False,
            ),
            row=1,
            col=col,
        )
        fig.update_xaxes(type="log", **_log_ticks(timed, name, ticks, fmt), row=1, col=col)
    fig.add_vline(x=1, line=dict(color="#616161", dash="dash"), row=1, col=2)
    fig.update_xaxes(range=[0, 1], tickformat=".0%", row=1, col=1)
    fig.update_yaxes(
        type="category",
        categoryorder="array",
        categoryarray=rows,
        autorange="reversed",
        automargin=True,
    )
    fig.update_layout(height=120 + PANEL_ROW_PX * len(rows), margin=dict(t=40, b=30))
    return fig


def _with_one(values: pd.Series) -> tuple[float, float]:
    """The smallest and largest of ``values`` and 1 (the line a log axis is read by)."""
    return min(float(values.min()), 1.0), max(float(values.max()), 1.0)


def _log_range(values: pd.Series) -> list[float]:
    """A log axis's range (log10) over ``values`` and 1, with a margin."""
    low, high = _with_one(values)
    return [math.log10(low) - 0.08, math.log10(high) + 0.08]


def speedup_vs_memory(points: pd.DataFrame) -> go.Figure:
    """Speedup against memory ratio (compiled over eager peak), one colour per backend,
    log axes, lines at 1 on each: above the horizontal line faster, left of the vertical
    one less memory."""
    points = points[points["memory_ratio"] > 0]
    if points.empty:
        return _empty("No passing cells with a memory ratio.")
    fig = _speedups_by_backend(points, "memory_ratio", "memory ratio %{x:.2f}")
    for add in (fig.add_hline, fig.add_vline):
        add(1, line=dict(color="#616161", dash="dash"))
    for x, y, anchor, text in (
        (0.01, 0.99, "left", "faster, less memory"),
        (0.99, 0.01, "right", "slower, more memory"),
    ):
        fig.add_annotation(
            x=x, y=y, xref="paper", yref="paper", xanchor=anchor, showarrow=False, text=text,
            font=dict(color="#616161"),
        )  # fmt: skip
    fig.update_layout(
        xaxis=dict(
            type="log",
            range=_log_range(points["memory_ratio"]),
            title="memory ratio (compiled / eager peak allocated, log scale)",
            **_ticks_between(*_with_one(points["memory_ratio"]), MEMORY_AXIS_TICKS, "{:g}"),
        ),
        yaxis=dict(
            type="log",
            range=_log_range(points["speedup"]),
            title="speedup (log scale)",
            **_ticks_between(*_with_one(points["speedup"]), SPEEDUP_AXIS_TICKS, "{:g}x"),
        ),
    )
    return fig


def sweep_trends(trends: pd.DataFrame) -> go.Figure:
    """Pass rate (top) and geomean speedup (bottom) of each config in each sweep that
    recorded it, a line a config through its sweeps, the sweeps in the order they began;
    a marker's size grows with the sweep's models, and the hover says how many (a sweep
    of other models moves a line too)."""
    from plotly.subplots import make_subplots

    if trends.empty:
        return _empty("No config was recorded by more than one sweep.")
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.1,
        row_heights=[0.4, 0.6],
        subplot_titles=("pass rate (of the attempted cells)", "geomean speedup (passing cells)"),
    )
    trends = trends.assign(series=_series(trends), x=trends["sweep"].map(_label))
    sweeps = list(dict.fromkeys(trends.sort_values("first_recorded", kind="stable")["x"]))
    colors = itertools.cycle(TREND_COLORS)
    for series, group in trends.groupby("series", sort=False):
        color = next(colors)
        rates = [
            categories.pass_rate(int(row.passed), int(row.attempted)) for row in rows_of(group)
        ]
        custom = [
            [
                f"{row.models:,}",
                categories.pass_rate_text(int(row.passed), int(row.attempted)),
                _text(row.geomean_speedup, "{:.2f}x"),
                f"{row.first_recorded:%Y-%m-%d %H:%M}",
            ]
            for row in rows_of(group)
        ]
        hover = (
            f"<b>{series}</b><br>sweep %{{x}}, from %{{customdata[3]}} "
            "(%{customdata[0]} models)<br>pass rate %{customdata[1]}"
            "<br>geomean speedup %{customdata[2]}<extra></extra>"
        )
        sizes = [min(18.0, 5 + 1.2 * math.sqrt(models)) for models in group["models"]]
        for row, values in ((1, rates), (2, group["geomean_speedup"])):
            fig.add_trace(
                go.Scatter(
                    x=group["x"],
                    y=[math.nan if v is None else v for v in values],
                    mode="lines+markers",
                    name=series,
                    legendgroup=series,
                    showlegend=row == 1,
                    line=dict(color=color),
                    marker=dict(color=color, size=sizes),
                    customdata=custom,
                    hovertemplate=hover,
                ),
                row=row,
                col=1,
            )
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=sweeps)
    fig.update_xaxes(tickangle=-30, automargin=True, row=2, col=1)
    fig.update_yaxes(tickformat=".0%", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title="speedup", row=2, col=1)
    fig.update_layout(height=640, margin=dict(t=40), legend=dict(orientation="h", y=-0.3, x=0))
    return fig
