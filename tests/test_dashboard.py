"""The dashboard: charts and reproduction commands without Streamlit, queries against a
small fixture, and every page through Streamlit's AppTest."""

from __future__ import annotations

import ast
import base64
import csv
import html
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import urllib.parse
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
import torch
from streamlit.testing.v1 import AppTest

from dashboard import caveats, charts, docs, pairs, queries, ranking, reads, reproduce
from dashboard.filters import Filters, sort_configs
from dashboard.reads import open_database
from dashboard.text import WORD_JOINER, code, plain
from runner.matrix import break_types
from runner.matrix.cells import KEY_FIELDS, cell_key
from runner.matrix.results import CROWDED, GraphBreak
from runner.measure import tuning
from runner.store.db import Store
from runner.store.schema import RunRecord
from tests.dashboard_data import (
    ENV,
    SIGNATURE,
    XLA_REASON,
    build,
    build_caveats,
    build_hostile,
    build_zoo,
    cell,
    hostile,
    hostile_search,
    record_run,
    shown,
    timed,
)

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "dashboard" / "app.py"
VIT = "timm/vit_tiny_patch16_224"


@pytest.fixture(scope="module")
def fixture_paths(tmp_path_factory) -> tuple[Path, Path]:
    return build(tmp_path_factory.mktemp("zoo"))


@pytest.fixture(scope="module")
def zoo_paths(tmp_path_factory) -> tuple[Path, Path]:
    return build_zoo(tmp_path_factory.mktemp("zoo-plus"))


def _app_on(paths: tuple[Path, Path], monkeypatch) -> AppTest:
    runs_dir, db_path = paths
    monkeypatch.setenv("ZOO_RUNS_DIR", str(runs_dir))
    monkeypatch.setenv("ZOO_DB", str(db_path))
    return AppTest.from_file(str(APP), default_timeout=60)


@pytest.fixture
def zoo_app(zoo_paths, monkeypatch):
    """The app on the larger fixture: unsupported cells, a slow model, an fp32 column."""
    return _app_on(zoo_paths, monkeypatch)


@pytest.fixture
def app(fixture_paths, monkeypatch):
    return _app_on(fixture_paths, monkeypatch)


def no_exception(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def plotly_figures(at: AppTest) -> list[go.Figure]:
    return [go.Figure(json.loads(c.proto.spec, object_hook=_array)) for c in at.get("plotly_chart")]


def _array(value: dict):
    """plotly's JSON writes numpy arrays as base64 typed arrays; read them back."""
    if set(value) >= {"dtype", "bdata"}:
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).tolist()
    return value


def matrix_page(at: AppTest) -> str:
    """The HTML of the Matrix page's legend and matrix."""
    (page,) = [h.proto.body for h in at.get("html") if 'class="zoo-matrix"' in h.proto.body]
    return page


def texts(at: AppTest) -> str:
    """Every text of the page as a reader sees it (escaped Markdown unescaped)."""
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [i.value for i in at.info] + [w.value for w in at.warning]
    parts += [e.value for e in at.error]
    parts = [shown(part) for part in parts]
    parts += [h.proto.body for h in at.get("html")] + [c.value for c in at.code]
    return "\n".join(parts)


# -- charts, without Streamlit --

CELLS = pd.DataFrame(
    {
        "model_id": ["timm/a", "timm/a", "timm/b", "timm/c"],
        "family": ["fa", "fa", "fa", "fb"],
        "config": ["inductor/default", "eager", "inductor/default", "eager"],
        "status": ["pass", "compile_error", "pass", "oom"],
        "speedup": [1.5, None, 0.8, None],
        "graph_break_count": [0, None, 2, None],
        "compile_s": [10.0, None, 5.0, None],
        "memory_ratio": [0.9, None, 1.1, None],
        "timing_disturbance": [1.01, None, 1.5, None],
    }
)
CONFIGS = ["inductor/default", "eager"]
MODELS = ["timm/a", "timm/b", "timm/c"]


def _tiles(page: str) -> list[tuple[str, str, str]]:
    """(background, link, tooltip) of every tile of a matrix's HTML, top left first."""
    return re.findall(
        r'<a(?: class="[^"]*")? style="background-color:([^";]+);grid-column:\d+" '
        r'href="([^"]+)" title="([^"]*)"',
        page,
    )


def test_a_launch_bound_tile_says_how_fast_the_host_launched_while_timed():
    launch_bound = CELLS.assign(bound=["launch-bound"] * 4, host_launch_us=[7.94, None, None, None])
    tips = [
        html.unescape(tip)
        for _, _, tip in _tiles(charts.matrix_html(launch_bound, CONFIGS, MODELS))
    ]
    assert tips[0].splitlines()[-1] == (
        "⚠ launch-bound: the GPU-time speedup is the stable figure (timed at 7.9 µs per launch)"
    )
    # Without a canary reading (rows before schema 9) the caveat stands alone.
    assert tips[2].splitlines()[-1].endswith("the GPU-time speedup is the stable figure")


def _columns(page: str) -> list[list[int]]:
    """The grid column of each tile, row by row (a model's name is column 1)."""
    rows = re.findall(r'<div><a class="model".*?</div>', page, re.DOTALL)
    return [[int(c) for c in re.findall(r"grid-column:(\d+)", row)] for row in rows]


def test_matrix_html_has_a_tile_per_cell_with_its_numbers_and_a_link_to_its_detail():
    page = charts.matrix_html(CELLS, CONFIGS, MODELS, "status", [("status", "pass")])
    tiles = _tiles(page)
    # timm/b passes with 2 graph breaks: the pale green of "pass with graph breaks".
    assert [color for color, _, _ in tiles] == [
        charts.STATUS_COLORS["pass"],
        charts.STATUS_COLORS["compile_error"],
        charts.PASS_WITH_BREAKS_COLOR,
        charts.STATUS_COLORS["oom"],
    ]
    # timm/b under inductor/default: the third tile (rows first, configs in order).
    _, link, tooltip = tiles[2]
    assert html.unescape(tooltip).splitlines() == [
        "timm/b", "inductor/default", "pass · speedup 0.80x",
        "compile 5.0 s · memory ratio 1.10 · graph breaks 2",
        "⚠ timing disturbed: a median 1.50x its fastest sample",
    ]  # fmt: skip
    target = urllib.parse.urlsplit(html.unescape(link))
    assert target.path == "detail"
    assert urllib.parse.parse_qsl(target.query) == [
        ("model", "timm/b"), ("config", "inductor/default"), ("status", "pass"),
    ]  # fmt: skip
    # timm/b and timm/c have one cell each: timm/c's eager is in eager's column, the
    # place of its inductor cell empty.
    assert _columns(page) == [[2, 3], [2], [3]]
    assert "grid-template-columns:max-content repeat(2,17px)" in page
    (head,) = re.findall(r'<div class="configs"[^>]*><span></span>(.*?)</div>', page)
    assert re.findall(r"<span>([^<]+)</span>", head) == CONFIGS
    assert re.findall(r'<a class="model" href="[^"]+">([^<]+)</a>', page) == MODELS
    # The turned config names fit above the tiles: a longer name, a taller header.
    longer = charts.matrix_html(CELLS, [*CONFIGS, "inductor/max-autotune-no-cudagraphs"], MODELS)
    height = re.compile(r'<div class="configs" style="height:(\d+)px">')
    assert int(height.search(longer)[1]) > int(height.search(page)[1])
    # Two families on the page: a row naming each before its first model.
    assert re.findall(r'<div class="family">([^<]+)</div>', page) == ["fa", "fb"]


def test_matrix_html_draws_places_without_a_cell_as_no_element():
    """A row is its model's name and one element a tile, each in its config's column; the
    places without a cell are the row's background (fewer elements for the browser)."""
    configs = ["c1", "c2", "c3", "inductor/default", "c5", "c6", "eager"]
    page = charts.matrix_html(CELLS, configs, MODELS)
    # timm/a has inductor/default and eager, timm/b inductor/default, timm/c eager.
    assert _columns(page) == [[5, 8], [5], [8]]
    rows = re.findall(r'<div><a class="model".*?</div>', page, re.DOTALL)
    assert [row.count("<a ") for row in rows] == [3, 2, 2]
    assert (
        "<td" not in page and "<span" not in page.split('class="configs"')[1].split("</div>", 1)[1]
    )
    assert len(_tiles(page)) == len(CELLS)


def test_a_disturbed_cell_is_hatched_and_the_legend_says_why():
    page = charts.matrix_html(CELLS, CONFIGS, MODELS, "status")
    # timm/b inductor (1.5x its fastest sample) is disturbed, timm/a (1.01) is not.
    classes = re.findall(r'<a(?: class="([^"]*)")? style="background-color', page)
    assert classes == ["", "", "disturbed", ""]
    for color_by in ("status", "speedup"):
        legend = charts.status_legend(CELLS, color_by)
        assert 'class="disturbed"' in legend and "timing disturbed" in legend
        assert "(1)" in legend.split("hatched")[1]
    steady = CELLS.assign(timing_disturbance=1.0)
    assert "hatched" not in charts.status_legend(steady, "status")


def test_matrix_html_by_speedup_uses_the_log_scale_and_greys_failures():
    tiles = _tiles(charts.matrix_html(CELLS, CONFIGS, MODELS, "speedup"))
    assert [color for color, _, _ in tiles] == [
        charts.speedup_color(1.5),
        charts.NO_SPEEDUP_COLOR,
        charts.speedup_color(0.8),
        charts.NO_SPEEDUP_COLOR,
    ]
    assert charts.speedup_color(0.5) == charts.SPEEDUP_SCALE[0][1]
    assert charts.speedup_color(1.0) == charts.SPEEDUP_SCALE[1][1]
    assert charts.speedup_color(3.0) == charts.speedup_color(10.0) == charts.SPEEDUP_SCALE[2][1]


def test_matrix_html_escapes_what_the_data_says():
    hostile = CELLS.assign(model_id='timm/<img src=x onerror="alert(1)">', family="<b>")
    page = charts.matrix_html(hostile, CONFIGS, [hostile["model_id"][0]], "status")
    assert "<img" not in page and "<b>" not in page
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page


def test_filters_as_query_parameters_match_the_widgets_keys():
    chosen = Filters(search="vit", status=("pass", "oom"), run=("nightly",))
    assert chosen.query() == [
        ("q", "vit"),
        ("status", "pass"),
        ("status", "oom"),
        ("run", "nightly"),
    ]
    assert Filters().query() == []


def test_status_legend_counts_and_escapes():
    legend = charts.status_legend(CELLS.assign(status=["pass", "pass", "<b>", "oom"]), "status")
    assert "pass (2)" in legend and "oom (1)" in legend
    assert "&lt;b&gt; (1)" in legend and "<b>" not in legend
    # By category: the unknown status is a failure; the pass rate is over attempted cells.
    assert "<strong>failed</strong>" in legend and "50% (2/4) of the attempted" in legend


def test_status_legend_names_unsupported_and_not_run_apart_from_failures():
    cells = CELLS.assign(status=["pass", "unsupported", "pass", "oom"])
    legend = charts.status_legend(cells, "status", not_run=2)
    assert "<strong>unsupported here</strong>" in legend and "unsupported (1)" in legend
    assert "<strong>not run</strong>" in legend and "not run (2)" in legend
    # 2 passed of the 3 attempted: the unsupported cell is no failure.
    assert "67% (2/3) of the attempted" in legend
    speedup = charts.status_legend(cells, "speedup", not_run=2)
    assert "not run (2)" in speedup and "unsupported here (1)" in speedup
    # The colour bar has its numbers.
    assert all(f">{t:g}x</span>" in speedup for t in charts.SPEEDUP_TICKS)
    # Three greys apart: failed, unsupported, not run.
    greys = {charts.NO_SPEEDUP_COLOR, charts.STATUS_COLORS["unsupported"], charts.NOT_RUN_FILL}
    assert len(greys) == 3


def test_family_matrix_figure_colours_by_pass_rate():
    families = pd.DataFrame(
        {
            "family": ["fa", "fb"],
            "config": ["eager", "eager"],
            "total": [4, 2],
            "passed": [3, 0],
            "models": [2, 1],
            "geomean_speedup": [1.2, None],
        }
    )
    fig = charts.family_matrix_figure(families, ["eager"], "status")
    grey, coloured = fig.data
    assert list(coloured.marker.color) == [0.75, 0.0] and len(grey.x) == 0
    assert coloured.customdata[0][2] == "pass rate 75% (3/4)"
    # A family whose cells were all unsupported is grey, not a red 0%.
    xla = families.assign(attempted=[3, 0], unsupported=[1, 2], not_run=[0, 1])
    grey, coloured = charts.family_matrix_figure(xla, ["eager"], "status").data
    assert list(grey.y) == ["fb"] and grey.marker.color == charts.STATUS_COLORS["unsupported"]
    assert grey.customdata[0][2] == "pass rate – (0/0) · 2 unsupported · 1 not run"
    assert list(coloured.marker.color) == [1.0]


def test_speedup_charts():
    points = pd.DataFrame(
        {
            "model_id": ["timm/a", "timm/b", "timm/c"],
            "config": ["x", "x", "y"],
            "backend": ["inductor", "inductor", "eager"],
            "speedup": [0.9, 1.52, 1.54],
            "compile_s": [3.0, 10.0, 1.0],
        }
    )
    histogram = charts.speedup_histogram(points)
    assert sum(histogram.data[0].y) == 3
    # A log axis: 1x sits at 0 and its neighbours by ratio.
    assert "1x" in histogram.layout.xaxis.ticktext and 0.0 in histogram.layout.xaxis.tickvals
    scatter = charts.speedup_vs_compile(points)
    assert sorted(t.name for t in scatter.data) == ["eager", "inductor"]
    assert scatter.layout.xaxis.type == "log"
    # A compile beside others' says so in its hover; one alone, or unmeasured, does not.
    crowded = charts.speedup_vs_compile(points.assign(compile_beside=[12.4, 0.3, None]))
    inductor = next(trace for trace in crowded.data if trace.name == "inductor")
    assert [row[2] for row in inductor.customdata] == [", beside 12.4 other compiles", ""]
    assert "%{customdata[2]}" in inductor.hovertemplate
    empty = charts.speedup_histogram(points.iloc[:0])
    assert empty.layout.annotations[0].text == "No passing cells with a speedup."


def test_latency_figure_has_quartile_whiskers():
    cells = pd.DataFrame(
        {
            "config": ["inductor"],
            "eager_ms": [10.0],
            "eager_ms_p25": [9.0],
            "eager_ms_p75": [12.0],
            "compiled_ms": [5.0],
            "compiled_ms_p25": [4.5],
            "compiled_ms_p75": [5.5],
        }
    )
    eager, compiled = charts.latency_figure(cells).data
    assert list(eager.error_x.array) == [2.0] and list(eager.error_x.arrayminus) == [1.0]
    assert list(compiled.x) == [5.0]


# -- reproducing a cell --

CELL = {
    "model_id": "timm/resnet50",
    "suite": "timm",
    "backend": "inductor",
    "mode": "default",
    "dynamic": "false",
    "precision": "bf16",
    "step": "infer",
    "batch_size": 64,
    "device": "cuda",
    "input_shapes": "[[64, 3, 224, 224]]",
}


def test_zoo_run_command_reproduces_the_cell():
    assert reproduce.zoo_run_command(CELL) == (
        "zoo-run --models timm/resnet50 --backends inductor --modes default --dynamic false "
        "--precision bf16 --batch-size 64 --device cuda"
    )
    eager = dict(CELL, backend="eager", mode="none", model_id="custom/net:Net", suite="custom")
    args = shlex.split(reproduce.zoo_run_command(eager))
    assert args[1:3] == ["--module", "net.py:Net"] and "--modes" not in args


def test_python_snippet_compiles_like_the_cell():
    snippet = reproduce.python_snippet(CELL)
    ast.parse(snippet)
    assert 'timm.create_model("resnet50", pretrained=False)' in snippet
    assert "torch.randn(64, 3, 224, 224" in snippet
    assert 'torch.compile(model, backend="inductor", mode="default", dynamic=False)' in snippet
    assert 'torch.autocast("cuda", dtype=torch.bfloat16)' in snippet
    fp32 = reproduce.python_snippet(dict(CELL, precision="fp32", dynamic="auto", mode="none"))
    ast.parse(fp32)
    assert "allow_tf32 = False" in fp32 and "autocast" not in fp32 and "dynamic=None" in fp32
    assert "mode=" not in fp32


# -- queries --


def test_queries_take_the_newest_row_per_cell_and_honour_run_filters(fixture_paths):
    from dashboard import reads

    db = open_database(*fixture_paths)
    assert db.error is None
    everything = reads.chosen_cells(db, Filters())
    resnet = everything[everything["model_id"] == "timm/resnet18"].set_index("config")
    assert resnet.loc["inductor/default dyn=false bf16", "status"] == "pass"
    nightly = reads.chosen_cells(db, Filters(run=("nightly",)))
    assert set(nightly["status"]) == {"compile_error", "pass"} and len(nightly) == 2
    shape = reads.matrix_shape(db, Filters(status=("compile_error",)))
    assert (shape.models, shape.configs) == (1, ["inductor/default dyn=false bf16"])


def test_search_text_is_a_parameter_not_sql(fixture_paths):
    from dashboard import reads

    db = open_database(*fixture_paths)
    hostile = "x'; DROP TABLE results; --"
    assert reads.chosen_cells(db, Filters(search=hostile)).empty
    assert len(reads.chosen_cells(db, Filters(search="VIT_tiny"))) == 2
    assert db.con.execute("SELECT count(*) FROM results").fetchone()[0] == 6


def test_a_filtered_statement_holds_the_filters_in_force_their_values_as_parameters():
    from dashboard import queries

    hostile = "x'); DROP TABLE results; --"
    sql, params = queries.filtered(
        queries.MATRIX_CELLS,
        Filters(search=hostile, status=("pass", hostile)),
        limit=25,
        offset=0,
    )
    assert params == {"limit": 25, "offset": 0, "status": ["pass", hostile], "search": hostile}
    assert hostile not in sql and "DROP" not in sql
    assert "$status" in sql and "$search" in sql and "$backend" not in sql and "$run" not in sql
    # No filter: the newest cells as they are; a run: the newest of its rows.
    sql, params = queries.filtered(queries.MATRIX_SHAPE, Filters())
    assert params == {} and "$" not in sql and "FROM latest_cells" in sql
    sql, params = queries.filtered(queries.SWEEP_TRENDS, Filters(run=("nightly",)))
    assert params == {"run": ["nightly"]} and queries.FILTERED_ROWS not in sql


def test_rows_in_both_sources_are_loaded_once(fixture_paths, tmp_path):
    from runner.store.export import export_runs

    runs_dir, db_path = fixture_paths
    both = tmp_path / "runs"
    shutil.copytree(runs_dir, both)
    export_runs(db_path, both)  # the user's run, now also shipped as parquet
    db = open_database(both, db_path)
    assert db.error is None and db.sources.parquet_files == 8
    count = "SELECT count(*), count(DISTINCT result_id) FROM results"
    assert db.con.execute(count).fetchone() == (6, 6)
    (breaks,) = db.con.execute("SELECT count(*) FROM graph_breaks").fetchone()
    assert breaks == 2
    assert len(reads.chosen_cells(db, Filters())) == 5


# -- pages through AppTest --


def test_matrix_page_shows_header_matrix_and_legend(app):
    at = no_exception(app.run())
    page = texts(at)
    assert (
        "5 cells (3 models × 2 configs): 3 pass of 5 attempted, 0 unsupported here, 1 not run"
        in page
    )
    assert "NVIDIA H200 (5 cells)" in page and "torch 2.11.0" in page
    assert "4 parquet files" in page and "your database" in page
    assert "Models 1–3 of 3" in page
    assert not at.get("plotly_chart")
    matrix = matrix_page(at)
    # The fixture's vit passes with graph breaks: the legend splits the 3 passing cells.
    for status, count in (
        ("pass fullgraph", 2),
        ("pass with graph breaks", 1),
        ("fail_accuracy", 1),
        ("compile_error", 1),
    ):
        assert f"{status} ({count})" in matrix
    assert re.findall(r'<a class="model" href="[^"]+">([^<]+)</a>', matrix) == [
        "timm/convnext_atto", "timm/resnet18", VIT,
    ]  # fmt: skip
    tiles = _tiles(matrix)
    assert len(tiles) == 5
    # The vit aot_eager cell's eager samples were disturbed (fixture): its hover says so.
    disturbed = [html.unescape(tip) for _, _, tip in tiles if "timing disturbed" in tip]
    assert len(disturbed) == 1 and VIT in disturbed[0] and "a median 1.67x" in disturbed[0]
    assert len(at.get("download_button")) == 1
    # What the statuses and marks mean: drawn once its expander is opened, not before.
    (legend,) = [e for e in at.expander if e.label == "What the statuses and marks mean"]
    assert not legend.proto.expanded and "| `compile_error` |" not in page
    at.session_state["_marks_legend"] = True  # the expander's key (pages_/matrix.py)
    page = texts(no_exception(at.run()))
    assert "| `compile_error` | compiling or running the compiled model raised |" in page
    # ... and what each caveat's mark means, with the docs section that explains it.
    fp32 = caveats.BY_KEY["ran-in-fp32"].doc
    assert "| dark corner | ran in fp32 | an export or AOTInductor cell" in page
    assert f"(docs?doc={fp32.path}&section={fp32.anchor})" in page


def test_the_matrix_shows_25_models_a_page_and_more_when_asked(tmp_path, monkeypatch):
    many = [cell(f"m{n:02d}", "fam", "eager", "pass", **timed(1.0, 1.0)) for n in range(60)]
    record_run(tmp_path / "zoo.duckdb", "many", many)
    at = no_exception(_app_on((tmp_path / "no-runs", tmp_path / "zoo.duckdb"), monkeypatch).run())
    names = re.compile(r'<a class="model" href="[^"]+">([^<]+)</a>')
    assert "Models 1–25 of 60" in texts(at) and len(names.findall(matrix_page(at))) == 25
    assert at.button_group(key="per").value == "25"
    at.button_group(key="per").set_value("50")
    at = no_exception(at.run())
    assert "Models 1–50 of 60" in texts(at)
    assert names.findall(matrix_page(at))[-1] == "timm/m49"
    at.session_state["page"] = 2
    at = no_exception(at.run())
    assert "Models 51–60 of 60" in texts(at) and len(names.findall(matrix_page(at))) == 10
    # The page size is read from the URL, as the filters are: a shared link shows as many.
    shared = _app_on((tmp_path / "no-runs", tmp_path / "zoo.duckdb"), monkeypatch)
    shared.query_params["per"] = "100"
    assert "Models 1–60 of 60" in texts(no_exception(shared.run()))


def test_url_filters_are_validated_and_applied(app):
    app.query_params["status"] = ["compile_error", "no-such-status"]
    app.query_params["backend"] = "inductor"
    at = no_exception(app.run())
    assert at.multiselect(key="status").value == ["compile_error"]
    assert "Models 1–1 of 1" in texts(at)
    ((_, link, tooltip),) = _tiles(matrix_page(at))
    assert html.unescape(tooltip).startswith(f"{VIT}\ninductor/default dyn=false bf16\n")
    # The tile's link keeps the filters, so Model detail opens with the same sidebar.
    query = urllib.parse.parse_qsl(urllib.parse.urlsplit(html.unescape(link)).query)
    assert query == [
        ("model", VIT),
        ("config", "inductor/default dyn=false bf16"),
        ("status", "compile_error"),
        ("backend", "inductor"),
    ]


def test_active_filters_are_chips_and_unknown_url_values_are_named(app):
    app.query_params["timing"] = "disturbed"
    app.query_params["backend"] = ["tvm", "aot_eager"]
    at = no_exception(app.run())
    (warning,) = [shown(w.value) for w in at.warning if "Not in the data" in w.value]
    assert "Backend 'tvm'" in warning
    # The filter from the URL is under "More filters": that expander is open.
    (more,) = [e for e in at.expander if e.label == "More filters"]
    assert more.proto.expanded
    chips = {shown(b.label): b for b in at.button if b.key and b.key.startswith("_chip_")}
    assert set(chips) == {"timing: disturbed", "backend: aot_eager"}
    assert len(_tiles(matrix_page(at))) == 1
    # A click on a chip drops that filter: the other aot_eager cells come back.
    at = no_exception(chips["timing: disturbed"].click().run())
    assert at.multiselect(key="timing").value == []
    assert len(_tiles(matrix_page(at))) == 2


def test_more_filters_are_drawn_only_when_open_or_holding_a_value(app):
    at = no_exception(app.run())
    (more,) = [e for e in at.expander if e.label == "More filters"]
    drawn = {widget.key for widget in at.multiselect}
    # Closed and empty: its multiselects are not redrawn on every rerun.
    assert not more.proto.expanded and "timing" not in drawn and "status" in drawn
    opened = AppTest.from_file(str(APP), default_timeout=60)
    opened.query_params["timing"] = "steady"
    opened = no_exception(opened.run())
    assert opened.multiselect(key="timing").value == ["steady"]


def test_an_unknown_model_in_the_url_is_named(app):
    app.query_params["model"] = "timm/nope"
    at = no_exception(app.switch_page("pages_/detail.py").run())
    assert any("Model 'timm/nope'" in shown(w.value) for w in at.warning)
    assert "Choose a model above" in texts(at)


def test_the_timing_filter_keeps_the_disturbed_cells(app):
    app.query_params["timing"] = "disturbed"
    at = no_exception(app.run())
    assert at.multiselect(key="timing").value == ["disturbed"]
    ((_, link, tooltip),) = _tiles(matrix_page(at))
    assert "timing disturbed" in html.unescape(tooltip) and "aot_eager" in html.unescape(link)
    steady = AppTest.from_file(str(APP), default_timeout=60)
    steady.query_params["timing"] = "steady"
    # The other four but the compile error, which has no timing to judge.
    assert len(_tiles(matrix_page(no_exception(steady.run())))) == 3


def test_the_matrix_colours_by_speedup(app):
    app.query_params["color"] = "speedup"
    at = no_exception(app.run())
    colors = [color for color, _, _ in _tiles(matrix_page(at))]
    # convnext_atto (1.8x), resnet18 (1.5x, 1.02x), vit (no speedup: failed, 1.1x).
    assert colors == [
        charts.speedup_color(1.8),
        charts.speedup_color(1.5),
        charts.speedup_color(1.02),
        charts.NO_SPEEDUP_COLOR,
        charts.speedup_color(1.1),
    ]


def test_rows_by_family_and_speedup_colouring(app):
    app.query_params["rows"] = "families"
    app.query_params["color"] = "speedup"
    at = no_exception(app.run())
    (fig,) = plotly_figures(at)
    grey, coloured = fig.data
    # The inductor cells of vit and convnext failed: no passing speedup to colour, grey.
    assert sorted(set(coloured.y) | set(grey.y)) == ["convnext", "resnet", "vision_transformer"]
    assert sorted(grey.y) == ["convnext", "vision_transformer"]
    assert "geomean" in coloured.marker.colorbar.title.text


def test_summary_page(app):
    app.run()
    at = no_exception(app.switch_page("pages_/summary.py").run())
    table = at.dataframe[0].value.set_index("config")
    assert table.loc["inductor/default dyn=false bf16", "pass rate"] == "33% (1/3)"
    assert table.loc["aot_eager dyn=false bf16", "geomean speedup"] == (
        f"{(1.02 * 1.1) ** 0.5:.2f}x"
    )
    assert table.loc["aot_eager dyn=false bf16", "median compile s"] == "3.0"
    # convnext has no aot_eager cell: not run, beside the pass rate.
    assert table.loc["aot_eager dyn=false bf16", "not run"] == 1
    assert "None" not in table.to_string() and "nan" not in table.to_string()
    panels, memory, histogram, trends, scatter = plotly_figures(at)
    assert sum(histogram.data[0].y) == 3
    assert {trace.name for trace in scatter.data} == {"inductor", "aot_eager"}
    # Per config: the pass rate as a bar (inductor 1 of 3: resnet18 passes, vit and
    # convnext fail), the speedups and compile times of the passing cells as boxes.
    bars, speedups, compiles = panels.data
    inductor, aot_eager = "inductor/default dyn=false bf16", "aot_eager dyn=false bf16"
    rates = dict(zip(bars.y, bars.x, strict=True))
    assert rates == {inductor: pytest.approx(1 / 3), aot_eager: 1.0}
    assert list(bars.text) == ["33% (1/3)", "100% (2/2) · 1 not run"]
    assert dict(zip(speedups.y, speedups.median, strict=True)) == {
        inductor: 1.5, aot_eager: pytest.approx(1.06),
    }  # fmt: skip
    assert dict(zip(compiles.y, compiles.upperfence, strict=True)) == {
        inductor: 12.0, aot_eager: 4.0,
    }  # fmt: skip
    assert panels.layout.xaxis2.type == "log" and panels.layout.xaxis3.type == "log"
    # Speedup against memory ratio, log-log, a trace a backend.
    assert memory.layout.xaxis.type == memory.layout.yaxis.type == "log"
    assert sorted(x for trace in memory.data for x in trace.x) == [0.8, 0.8, 0.8]
    # The vit aot_eager cell's timing was disturbed: its point is hollow.
    (aot,) = [trace for trace in memory.data if trace.name == "aot_eager"]
    marks = dict(zip((round(y, 2) for y in aot.y), aot.marker.symbol, strict=True))
    assert marks == {1.02: "circle", 1.1: "circle-open"}
    # Both configs were recorded by the runs "nightly" and "rerun": a point each.
    lines = {(t.name, t.yaxis): t for t in trends.data}
    assert list(lines[aot_eager, "y"].x) == ["nightly", "rerun"]
    assert list(lines[aot_eager, "y2"].y) == [pytest.approx(1.02), pytest.approx(1.1)]
    assert list(lines[inductor, "y"].y) == [0.0, pytest.approx(1 / 3)]
    assert "Across sweeps" in texts(at)


def test_unsupported_cells_are_no_failures_on_any_page(zoo_app):
    at = no_exception(zoo_app.run())
    page = texts(at)
    # 11 cells, 2 of them unsupported: 6 pass of the 9 attempted.
    assert "11 cells (3 models × 4 configs): 6 pass of 9 attempted, 2 unsupported here" in page
    legend = matrix_page(at)
    assert "<strong>unsupported here</strong>" in legend and "unsupported (2)" in legend
    assert "not run (1)" in legend and "67% (6/9) of the attempted" in legend

    summary = no_exception(zoo_app.switch_page("pages_/summary.py").run())
    table = summary.dataframe[0].value.set_index("config")
    xla = table.loc["torch_xla dyn=false bf16"]
    assert xla["pass rate"] == "– (0/0) · 2 unsupported · 1 not run"
    assert xla["unsupported because"] == XLA_REASON and xla["failed"] == 0
    assert {m.label: m.value for m in summary.metric}["Unsupported here"] == "2"

    failures = no_exception(zoo_app.switch_page("pages_/failures.py").run())
    groups, reasons = (frame.value for frame in failures.dataframe)
    assert "unsupported" not in set(groups["status"])
    assert list(reasons["reason"]) == [XLA_REASON] and list(reasons["cells"]) == [2]
    assert {m.label: m.value for m in failures.metric}["Failing cells"] == "3"

    families = AppTest.from_file(str(APP), default_timeout=60)
    families.query_params["rows"] = "families"
    (fig,) = plotly_figures(no_exception(families.run()))
    grey, coloured = fig.data
    # Every torch_xla tile is grey (nothing attempted), none a red 0%.
    assert set(grey.x) == {"torch_xla dyn=false bf16"}
    assert "torch_xla dyn=false bf16" not in set(coloured.x)


def test_leaderboard_ranks_cells_in_each_quick_view(zoo_app, zoo_paths):
    at = no_exception(zoo_app.switch_page("pages_/leaderboard.py").run())
    table = at.dataframe[0].value
    assert len(table) == 11 and at.segmented_control(key="view").value == "all cells"
    # Seven columns fit 1400 px; the others are a choice away, and a missing number
    # shows as "–" in a column that still sorts by its numbers.
    assert list(table) == [
        "model", "config", "status", "speedup", "caveats", "memory", "breaks",
    ]  # fmt: skip
    assert at.dataframe[0].proto.placeholder == "–"
    assert table["speedup"].dtype.kind == "f" and table["speedup"].isna().any()
    # The vit aot_eager cell's eager samples were disturbed: its badge says so.
    disturbed = table[table["caveats"] != ""]
    assert list(disturbed["model"]) == [VIT] and disturbed["caveats"].iloc[0] == "⚠ disturbed"
    firsts = {
        "slower than eager": ("timm/convnext_atto", "aot_eager dyn=false bf16", 1),
        "largest speedups": (VIT, "inductor/default dyn=false fp32", 6),
        "most memory saved": (VIT, "inductor/default dyn=false fp32", 5),
        "most graph breaks": ("timm/convnext_atto", "aot_eager dyn=false bf16", 2),
        "longest compiles": ("timm/convnext_atto", "aot_eager dyn=false bf16", 8),
    }
    for quick, (model, config, rows) in firsts.items():
        at = no_exception(at.segmented_control(key="view").set_value(quick).run())
        table = at.dataframe[0].value
        # What the view ranks by shows beside the speedup.
        ranked = ranking.VIEW_COLUMNS.get(quick, ())
        assert list(table)[4 : 4 + len(ranked)] == list(ranked), quick
        assert (table["model"].iloc[0], table["config"].iloc[0], len(table)) == (
            model, config, rows,
        ), quick  # fmt: skip
    # ASTModel's kind of result: 0.26x compiled, with 2.85x the memory, on top; the
    # view and more columns open from the URL too.
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params["view"] = "slower than eager"
    at.query_params["columns"] = ["eager MB", "compiled MB"]
    at = no_exception(at.switch_page("pages_/leaderboard.py").run())
    slowest = at.dataframe[0].value.iloc[0]
    assert slowest["speedup"] == pytest.approx(0.26) and slowest["memory"] == 2.85
    assert (slowest["eager MB"], slowest["compiled MB"]) == (500.0, 400.0)
    assert "passing cells whose compiled median is slower than eager's" in texts(at)
    # Its CSV holds the view's cells, every column: here the one slower cell.
    db = open_database(*zoo_paths)
    csv = ranking.table_of(reads.leaderboard(db, Filters(), "slower than eager", None))
    assert list(csv["model"]) == ["timm/convnext_atto"] and list(csv) == list(ranking.COLUMNS)
    assert len(ranking.table_of(reads.leaderboard(db, Filters(), "all cells", None))) == 11


def test_config_vs_config_over_the_models_both_have(zoo_app):
    bf16, fp32 = "inductor/default dyn=false bf16", "inductor/default dyn=false fp32"
    zoo_app.query_params["config_a"] = bf16
    zoo_app.query_params["config_b"] = fp32
    # A backend filter would hide one side: the two configs replace the axis filters.
    zoo_app.query_params["backend"] = "aot_eager"
    at = no_exception(zoo_app.switch_page("pages_/configs.py").run())
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Models with both"] == "3"
    # resnet18 is the one model passing in both: 1.2x in fp32 against 1.5x in bf16.
    assert metrics["Geomean B / A speedup"] == "0.80x"
    assert "over the 1 models passing with a speedup in both" in texts(at)
    crossings = at.dataframe[0].value.set_index("A \\ B")
    assert crossings.loc["passed", "passed"] == 1
    assert crossings.loc["failed", "passed"] == 1  # vit: compile error in bf16, passes in fp32
    assert crossings.loc["failed", "failed"] == 1  # convnext: accuracy, then compile error
    (scatter,) = plotly_figures(at)
    (points, diagonal) = scatter.data
    assert list(points.x) == [1.5] and list(points.y) == [pytest.approx(1.2)]
    assert scatter.layout.xaxis.type == "log" and diagonal.name == "same speedup"
    pairs = at.dataframe[1].value.set_index("model")
    assert pairs.loc[VIT, "crossing"] == "changed" and pairs.loc["timm/resnet18", "crossing"] == ""


def test_config_vs_config_marks_models_timed_with_autocast_scoped_apart(tmp_path):
    """A model timed inside one autocast region in config A and per call in B: its
    B / A ratio holds the measurement's change, so it is counted apart and hollow in the
    scatter; one timed alike in both is not."""
    runs_dir, db_path = build(tmp_path)
    store = Store.open(db_path)
    run = RunRecord(label="scope", command="zoo-run", status="finished")
    store.start_run(run)
    rows = []
    for model, a_scope, b_scope in (
        ("resnet50", "autocast bf16", "autocast bf16 per call"),
        ("resnet101", "autocast bf16 per call", "autocast bf16 per call"),
    ):
        for backend, scope in (("inductor", a_scope), ("aot_eager", b_scope)):
            rows.append(
                cell(model, "resnet", backend, "pass", **timed(1.5, 9.0),
                     precision_treatment=scope)
            )  # fmt: skip
    store.write_results(run.run_id, rows)
    store.finish_run(run.run_id, "finished", len(rows))
    db = open_database(runs_dir, db_path)
    a, b = "inductor/default dyn=false bf16", "aot_eager dyn=false bf16"
    shared = pairs.shared_passing(reads.config_pair(db, Filters(), a, b))
    apart = shared[pairs.scoped_apart(shared)]
    assert list(apart["model_id"]) == ["timm/resnet50"]
    figure = charts.config_scatter(shared, a, b)
    hollow = next(trace for trace in figure.data if trace.name == "timing caveat")
    assert list(hollow.customdata.flatten()) == ["timm/resnet50"]


def test_config_vs_config_opens_on_the_matrixs_first_two_columns(zoo_app, zoo_paths):
    at = no_exception(zoo_app.switch_page("pages_/configs.py").run())
    chosen = {s.label: s.value for s in at.selectbox}
    columns = reads.matrix_shape(open_database(*zoo_paths), Filters()).configs
    assert [chosen["Config A (baseline)"], chosen["Config B"]] == columns[:2]
    assert "Models with both" in [m.label for m in at.metric]


def test_model_detail_page(app):
    app.run()
    app.query_params["model"] = VIT
    at = no_exception(app.switch_page("pages_/detail.py").run())
    page = texts(at)
    assert "LoweringException: boom in aten.fancy_op" in page
    assert "Traceback (most recent call last)" in page
    assert (
        "zoo-run --models timm/vit_tiny_patch16_224 --backends inductor --modes default "
        "--dynamic false --precision bf16 --batch-size 64 --device cuda" in page
    )
    assert 'timm.create_model("vit_tiny_patch16_224", pretrained=False)' in page
    configs, breaks = at.dataframe[0].value, at.dataframe[1].value
    assert list(configs["status"]) == ["compile_error", "pass"]
    assert list(breaks["user_frame"]) == [
        "timm/models/vision_transformer.py:42",
        "timm/layers/attention.py:7",
    ]
    assert "p25 9.800" in page  # the eager timing's spread
    assert "fastest 6.000" in page
    (warning,) = [w.value for w in at.warning if "Timing disturbed" in w.value]
    assert "eager median 1.67x its fastest sample" in warning
    assert "compiled median" not in warning  # its compiled side was quiet
    assert "first compiled call 4.25 s" in page  # compile and first run, lock waits excluded
    # The peaks outside the memory pass, on the pass that has them; none on the error.
    phases = "accuracy reference 900 MB reserved; into its compile 180 MB allocated; "
    assert phases + "compile's peak 640 MB reserved" in page
    assert page.count("accuracy reference ") == 1
    (latency,) = plotly_figures(at)
    assert [t.name for t in latency.data] == ["eager", "compiled"]
    # timm's own published figure for the model, straight from the shipped reference.
    with (ROOT / "data" / "reference" / "timm-infer-amp-nchw-pt291-cu130-5090.csv").open() as f:
        (row,) = [r for r in csv.DictReader(f) if r["model"] == VIT.removeprefix("timm/")]
    ratio = float(row["compiled_samples_per_sec"]) / float(row["eager_samples_per_sec"])
    assert row["eager_batch"] == row["compiled_batch"]  # so the caption names one batch
    assert (
        f"compiled over eager throughput {ratio:.2f}x at {row['img_size']} px "
        f"(batch {int(row['eager_batch']):,} both sides)." in page
    )


def test_model_detail_tells_apart_one_config_measured_in_two_environments(tmp_path, monkeypatch):
    runs_dir, db_path = build(tmp_path)
    other = dict(ENV, env_id="env-other-machine", torchax="0.0.13")
    store = Store.open(db_path)
    store.record_environment(other)
    run = RunRecord(label="elsewhere", command="zoo-run --models resnet18", status="finished")
    store.start_run(run)
    again = cell("resnet18", "resnet", "inductor", "pass", **timed(1.2, 10.0))
    again.env_id = other["env_id"]
    again.cell_key = again.cell_key + "-other"
    store.write_results(run.run_id, [again])
    monkeypatch.setenv("ZOO_RUNS_DIR", str(runs_dir))
    monkeypatch.setenv("ZOO_DB", str(db_path))
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params["model"] = "timm/resnet18"
    at = no_exception(at.switch_page("pages_/detail.py").run())
    configs = list(at.dataframe[0].value["config"])
    inductor = [c for c in configs if c.startswith("inductor/default")]
    assert len(inductor) == 2 and len(set(inductor)) == 2, configs
    assert any("env env-othe · elsewhere" in c for c in inductor), inductor
    assert any("env env-test · rerun" in c for c in inductor), inductor


def _page_links(at: AppTest) -> dict[str, dict[str, str]]:
    """Each page link of the page: its label to its page and query parameters."""
    return {
        shown(link.proto.label): {
            "page": link.proto.page,
            **dict(urllib.parse.parse_qsl(link.proto.query_string)),
        }
        for link in at.get("page_link")
    }


def test_caveats_are_badges_in_matrix_and_leaderboard_and_reasons_in_model_detail(
    tmp_path, monkeypatch
):
    paths = build_caveats(tmp_path)
    db = open_database(*paths)
    found = {
        (model, config): list(keys)
        for model, config, keys in db.con.execute(
            "SELECT model_id, config, caveats FROM latest_cells WHERE len(caveats) > 0"
        ).fetchall()
    }
    export = "export/non-strict dyn=false bf16"
    assert found == {
        ("timm/resnet18", export): ["ran-in-fp32"],
        (VIT, "xla dyn=false fp32"): ["xla-first-sweep"],
        ("timm/convnext_atto", "xla dyn=false bf16"): ["xla-baseline"],
        ("timm/resnet18", "inductor/default dyn=false bf16"): ["environments"],
        (VIT, "aot_eager dyn=false bf16"): ["disturbed"],
    }

    # The Matrix: a corner on each tile with a caveat that is neither hatched nor barred,
    # the caveat in its tooltip, and the legend naming them.
    at = no_exception(_app_on(paths, monkeypatch).run())
    matrix = matrix_page(at)
    cornered = re.findall(
        r'<a class="([^"]*caveat[^"]*)" [^>]*href="([^"]+)" title="([^"]*)"', matrix
    )
    assert len(cornered) == 4
    tips = {urllib.parse.parse_qs(html.unescape(link).split("?")[1])["config"][0]: html.unescape(tip)
            for _, link, tip in cornered}  # fmt: skip
    assert (
        "⚠ ran in fp32" in tips[export]
        and "⚠ several environments" in tips["inductor/default dyn=false bf16"]
    )
    corner = "corner: XLA baseline unsure (1), XLA first-sweep timing (1), ran in fp32 (1), "
    assert corner + "several environments (1)" in html.unescape(matrix)

    # The Leaderboard: the badges beside the speedups.
    at = no_exception(at.switch_page("pages_/leaderboard.py").run())
    table = at.dataframe[0].value.set_index(["model", "config"])
    assert table.loc[("timm/resnet18", export), "caveats"] == "⚠ ran fp32"
    assert table.loc[(VIT, "xla dyn=false fp32"), "caveats"] == "⚠ XLA 1st sweep"
    assert table.loc[("timm/convnext_atto", "xla dyn=false bf16"), "caveats"] == "⚠ XLA baseline"
    assert table.loc[("timm/resnet18", "inductor/default dyn=false bf16"), "caveats"] == (
        "⚠ environments"
    )

    # Model detail: each reason in words, and a link to the docs section that explains it.
    at.query_params["model"] = "timm/resnet18"
    at = no_exception(at.switch_page("pages_/detail.py").run())
    warnings = [shown(w.value) for w in at.warning]
    (fp32,) = [w for w in warnings if w.startswith("**Ran in fp32**")]
    assert "torch.export keeps none of autocast's casts" in fp32
    # Both cell keys have their row and the caveat: the newer (env-other-machine) is shown.
    shown_row, other_row = sorted(
        (w for w in warnings if w.startswith("**Recorded in 2 environments**")),
        key=lambda w: "the one shown" not in w,
    )
    assert "This row, env env-othe (torch 2.11.0" in shown_row
    assert "is the newest: the one shown" in shown_row
    assert "This row is env env-test" in other_row
    assert "shown is the newest, env env-othe" in other_row
    links = _page_links(at)
    fp32_doc = caveats.BY_KEY["ran-in-fp32"].doc
    assert links[f"Why: {fp32_doc}"] == {
        "page": "docs", "doc": fp32_doc.path, "section": fp32_doc.anchor,
    }  # fmt: skip
    # The link opens that section of the docs.
    docs_page = AppTest.from_file(str(APP), default_timeout=60)
    docs_page.query_params["doc"] = fp32_doc.path
    docs_page.query_params["section"] = fp32_doc.anchor
    page = texts(no_exception(docs_page.switch_page("pages_/docs.py").run()))
    assert f"## {fp32_doc.heading}" in page and "torch.export" in page


def test_every_caveat_links_to_a_section_of_the_docs():
    for caveat in caveats.CAVEATS:
        text = docs.section(caveat.doc.path, caveat.doc.anchor)
        assert text is not None and text.lstrip("#").strip().startswith(caveat.doc.heading), (
            caveat.key
        )
    assert caveats.slug("fp32: still the first sweep's protocol") == (
        "fp32-still-the-first-sweeps-protocol"
    )


def test_the_matrix_leads_with_the_core_columns_in_the_sweeps_order():
    """The headline column (every shipped model has it) first, then the rest of the core
    set as the sweep runs it, then the other columns (fp32 training, torch_xla, ...)."""
    from runner.matrix.columns import CORE

    db = open_database(ROOT / "data" / "runs", ROOT / "no-database.duckdb")
    configs = reads.matrix_shape(db, Filters()).configs
    core = [column.label() for column in CORE]
    assert configs[: len(core)] == core
    assert len(configs) > len(core)
    # A user's database of one step: its labels name no step, its order is the same.
    unnamed = [{**axes, "config": label.removesuffix(" infer")} for axes, label in zip(
        [dict(backend=c.backend, mode=c.mode, dynamic=c.dynamic, precision=c.precision)
         for c in CORE if c.step == "infer"],
        [c.label() for c in CORE if c.step == "infer"],
        strict=True,
    )]  # fmt: skip
    assert sort_configs(list(reversed(unnamed))) == [row["config"] for row in unnamed]


def test_the_shipped_export_check_rows_carry_the_ran_in_fp32_caveat():
    db = open_database(ROOT / "data" / "runs", ROOT / "no-database.duckdb")
    rows = db.query(
        "SELECT * FROM latest_cells WHERE run_id LIKE 'fd2122e8%' AND backend = 'export'"
    )
    if rows.empty:
        pytest.skip("the export-check run is not among the shipped results")
    assert all("ran-in-fp32" in list(keys) for keys in rows["caveats"])
    assert set(rows["precision_treatment"]) == {"autocast bf16"}
    page = charts.matrix_html(
        rows, sorted(set(rows["config"])), list(dict.fromkeys(rows["row_id"]))
    )
    assert page.count("caveat") >= len(rows) and "⚠ ran in fp32" in page


def test_device_and_size_are_facets_of_rows_not_config_suffixes(tmp_path, monkeypatch):
    runs_dir, db_path = build(tmp_path)
    store = Store.open(db_path)
    run = RunRecord(label="laptop", command="zoo-run --device cpu", status="finished")
    store.start_run(run)
    on_cpu = cell("resnet18", "resnet", "eager", "pass", **timed(1.0, 1.0))
    on_cpu.device, on_cpu.size, on_cpu.cell_key = "cpu", "tiny", on_cpu.cell_key + "-cpu"
    store.write_results(run.run_id, [on_cpu])
    at = no_exception(_app_on((runs_dir, db_path), monkeypatch).run())
    assert "NVIDIA H200 (5 cells), CPU (1 cell)" in texts(at)
    matrix = matrix_page(at)
    # The configs keep their names; the CPU run of the tiny model is a row of its own.
    (head,) = re.findall(r'<div class="configs"[^>]*><span></span>(.*?)</div>', matrix)
    assert re.findall(r"<span>([^<]+)</span>", head) == [
        "inductor/default dyn=false bf16", "eager dyn=false bf16", "aot_eager dyn=false bf16",
    ]  # fmt: skip
    rows = re.findall(r'<a class="model" href="([^"]+)">([^<]+)</a>', matrix)
    assert ("detail?model=timm%2Fresnet18", "timm/resnet18 · cpu tiny") in rows
    assert ("detail?model=timm%2Fresnet18", "timm/resnet18 · cuda full") in rows


def test_a_row_measured_on_another_gpu_is_a_row_of_its_own(tmp_path, monkeypatch):
    """A user's own run on another card beside the shipped H200 results: newer, it
    still never stands in for the H200's cell; the GPU's name labels both rows, and the
    GPU filter keeps one card's."""
    runs_dir, db_path = build(tmp_path)
    store = Store.open(db_path)
    store.record_environment(dict(ENV, env_id="env-h100", gpu="NVIDIA H100 80GB HBM3"))
    run = RunRecord(label="own-gpu", command="zoo-run --models resnet18", status="finished")
    store.start_run(run)
    mine = cell("resnet18", "resnet", "inductor", "pass", **timed(1.1, 9.0))
    mine.env_id, mine.cell_key = "env-h100", mine.cell_key + "-h100"
    store.write_results(run.run_id, [mine])
    at = no_exception(_app_on((runs_dir, db_path), monkeypatch).run())
    assert "NVIDIA H200 (5 cells), NVIDIA H100 80GB HBM3 (1 cell)" in texts(at)
    rows = re.findall(r'<a class="model" href="([^"]+)">([^<]+)</a>', matrix_page(at))
    names = [name for _, name in rows if name.startswith("timm/resnet18")]
    assert names == ["timm/resnet18 · NVIDIA H100 80GB HBM3", "timm/resnet18 · NVIDIA H200"]
    # The GPU filter shows one card's rows (shipped H100 rows need not double every row).
    one_card = _app_on((runs_dir, db_path), monkeypatch)
    one_card.query_params["gpu"] = "NVIDIA H200"
    at = no_exception(one_card.run())
    assert at.multiselect(key="gpu").options == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]
    assert at.multiselect(key="gpu").value == ["NVIDIA H200"]
    rows = re.findall(r'<a class="model" href="([^"]+)">([^<]+)</a>', matrix_page(at))
    names = [name for _, name in rows if name.startswith("timm/resnet18")]
    assert names == ["timm/resnet18 · NVIDIA H200"]


def test_model_detail_without_a_model_asks_for_one(app):
    app.run()
    at = no_exception(app.switch_page("pages_/detail.py").run())
    assert "Choose a model above" in texts(at)


def test_failures_page_groups_by_signature(app):
    app.run()
    at = no_exception(app.switch_page("pages_/failures.py").run())
    groups = at.dataframe[0].value
    # The fixture's accuracy failure was never triaged; triaged ones group by verdict
    # (test_accuracy_failures_group_by_their_triage_verdict).
    assert set(groups["signature"]) == {SIGNATURE, "fail_accuracy: not triaged"}
    assert groups.set_index("signature").loc[SIGNATURE, "cells"] == 1
    assert VIT in texts(at)


def test_accuracy_failures_group_by_their_triage_verdict(tmp_path):
    """An accuracy failure has no message: where the ladder placed it (wrong already
    under dynamo's eager backend, or only once Inductor compiles) is its group; an
    interrupted or missing triage is one group of its own."""
    from runner.matrix.results import TRIAGE_INTERRUPTED

    accurate = {"accuracy_pass": False, "rmse": 0.9, "eager_rmse": 0.01}
    rows_in = [
        cell("umt5", "umt5", "inductor", "fail_accuracy", triage_rung="fails in dynamo",
             **accurate),
        cell("doge", "doge", "inductor", "fail_accuracy", triage_rung="fails in dynamo",
             **accurate),
        cell("hrnet_w18", "hrnet", "inductor", "fail_accuracy",
             triage_rung="fails in inductor", **accurate),
        cell("canine", "canine", "inductor", "fail_accuracy",
             triage_rung=TRIAGE_INTERRUPTED, **accurate),
        cell("dla102", "dla", "inductor", "compile_error", error_signature="Boom <N>",
             triage_rung="fails in inductor"),
    ]  # fmt: skip
    db = _beside_the_fixture(tmp_path, rows_in, "accuracy")
    groups = reads.failure_groups(db, Filters(run=("accuracy",)))
    found = {row.signature: sorted(row.model_ids) for row in groups.itertuples()}
    assert found == {
        "fail_accuracy: fails in dynamo": ["timm/doge", "timm/umt5"],
        "fail_accuracy: fails in inductor": ["timm/hrnet_w18"],
        "fail_accuracy: not triaged": ["timm/canine"],
        "Boom <N>": ["timm/dla102"],
    }


def test_every_triage_verdict_says_what_it_means_in_model_detail(tmp_path, monkeypatch):
    from dashboard import status
    from runner import triage
    from runner.matrix.results import TRIAGE_INTERRUPTED

    written = [
        *triage.RUNG_STAGE.values(),
        triage.stage_of("inductor"),
        triage.stage_of("cudagraphs"),
        triage.NOT_AGAIN,
        TRIAGE_INTERRUPTED,
    ]
    meanings = [status.verdict_meaning(verdict) for verdict in written]
    assert all(meanings) and len(set(meanings)) == len(meanings)
    assert "cudagraphs itself fails" in status.verdict_meaning("fails in cudagraphs")
    assert "Inductor's lowering" in status.verdict_meaning("fails in inductor")
    assert status.verdict_meaning("fails in ") is None
    assert status.verdict_meaning("no verdict the ladder writes") is None
    row = cell("umt5", "umt5", "inductor", "fail_accuracy", triage_rung="fails in dynamo",
               triage_detail="fail_accuracy", accuracy_pass=False, rmse=0.9, eager_rmse=0.01)  # fmt: skip
    _beside_the_fixture(tmp_path, [row], "triaged")
    monkeypatch.setenv("ZOO_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("ZOO_DB", str(tmp_path / "zoo.duckdb"))
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params["model"] = "timm/umt5"
    at = no_exception(at.switch_page("pages_/detail.py").run())
    page = "\n".join(text.value for text in at.text)  # stored text is shown as text
    assert "Triage (the backend ladder): fails in dynamo" in page
    assert "what it means: " + status.VERDICT_MEANINGS["fails in dynamo"] in page
    # and on the Failures page, in the verdict's group
    at = no_exception(at.switch_page("pages_/failures.py").run())
    assert "` fails in dynamo `: " + status.VERDICT_MEANINGS["fails in dynamo"] in texts(at)


def test_model_detail_says_where_a_slower_cell_loses(tmp_path, monkeypatch):
    """Slower compiled on the wall clock: its GPU time tells the host's loss (kernels
    faster) from the kernels' own; a faster cell, or one without a profile, gets neither."""
    profile = {"eager_gpu_ms": 4.0, "eager_kernels": 300, "compiled_kernels": 200,
               "eager_host_ms": 6.0, "compiled_host_ms": 12.0}  # fmt: skip
    rows_in = [
        cell("hardcorenas_b", "hardcorenas", "inductor", "pass", **timed(0.74, 9.0),
             **profile, compiled_gpu_ms=1.8, gpu_speedup=2.23),
        cell("convmixer_1536_20", "convmixer", "inductor", "pass", **timed(0.25, 30.0),
             **profile, compiled_gpu_ms=16.0, gpu_speedup=0.25),
        cell("resnet50", "resnet", "inductor", "pass", **timed(1.9, 12.0),
             **profile, compiled_gpu_ms=2.0, gpu_speedup=2.0),
    ]  # fmt: skip
    _beside_the_fixture(tmp_path, rows_in, "slower")
    monkeypatch.setenv("ZOO_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("ZOO_DB", str(tmp_path / "zoo.duckdb"))
    host, kernels = "faster on the GPU**: the loss is the host's", "slower on the GPU too**"
    for model, expected in (
        ("hardcorenas_b", {host}),
        ("convmixer_1536_20", {kernels}),
        ("resnet50", set()),
    ):
        at = AppTest.from_file(str(APP), default_timeout=60)
        at.query_params["model"] = f"timm/{model}"
        page = "\n".join(
            m.value for m in no_exception(at.switch_page("pages_/detail.py").run()).markdown
        )
        assert {text for text in (host, kernels) if text in page} == expected, model
        assert "GPU-time speedup" in page


def test_compare_page(app):
    app.run()
    app.query_params["a"] = "nightly"
    app.query_params["b"] = "rerun"
    at = no_exception(app.switch_page("pages_/compare.py").run())
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["fixed"] == "1"  # resnet18 inductor: compile_error, then pass


def test_a_broken_database_gives_a_friendly_page(tmp_path, monkeypatch):
    broken = tmp_path / "zoo.duckdb"
    broken.write_text("not a database")
    monkeypatch.setenv("ZOO_RUNS_DIR", str(tmp_path / "no-runs"))
    monkeypatch.setenv("ZOO_DB", str(broken))
    at = no_exception(AppTest.from_file(str(APP), default_timeout=60).run())
    assert any("not a readable zoo-matrix database" in shown(w.value) for w in at.warning)
    assert "No results to show yet" in texts(at)
    assert "zoo-run --models" in texts(at)


def test_no_data_at_all_says_how_to_get_some(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_RUNS_DIR", str(tmp_path / "no-runs"))
    monkeypatch.setenv("ZOO_DB", str(tmp_path / "zoo.duckdb"))
    at = no_exception(AppTest.from_file(str(APP), default_timeout=60).run())
    assert "No results to show yet" in texts(at)
    assert not at.get("plotly_chart")


def test_zoo_dashboard_passes_paths_as_env_and_other_arguments_to_streamlit(tmp_path, monkeypatch):
    from dashboard import cli

    calls = []
    monkeypatch.setattr(cli.os, "execve", lambda path, command, env: calls.append((command, env)))
    cli.main(
        ["--db", str(tmp_path / "my.duckdb"), "--runs-dir", str(tmp_path), "--server.port", "9"]
    )
    ((command, env),) = calls
    assert command[1:3] == ["-m", "dashboard.serve"] and command[3].endswith("dashboard/app.py")
    assert command[-2:] == ["--server.port", "9"]
    assert env["ZOO_DB"] == str(tmp_path / "my.duckdb") and env["ZOO_RUNS_DIR"] == str(tmp_path)
    # Only this machine reaches the server, unless the user's own address (given later,
    # so it wins) says otherwise.
    address = command.index("--server.address")
    assert command[address + 1] == "localhost" and address < command.index("--server.port")
    calls.clear()
    cli.main(["--server.address", "0.0.0.0"])
    ((command, _),) = calls
    assert command[-2:] == ["--server.address", "0.0.0.0"]


def test_the_page_names_the_code_of_st_html_with_what_it_imports(tmp_path):
    from dashboard import page_code

    js = tmp_path / "js"
    js.mkdir()
    (js / "Html.Ab1.js").write_text('import{t}from"./purify.es.X2.js";import"./shared.Q.js";')
    (js / "purify.es.X2.js").write_text('import{o}from"./shared.Q.js";')
    (js / "shared.Q.js").write_text("export const o=1;")
    (js / "HtmlOther.Z9.js").write_text("")
    page = '<head><link rel="modulepreload" href="./static/js/shared.Q.js"></head>'
    # What the page already loads is not named twice; a kind not there is left out.
    assert page_code.chunks(js, page, ["Html", "NoSuchKind"]) == ["Html.Ab1.js", "purify.es.X2.js"]
    served = page_code.with_preloads(page, ["Html.Ab1.js"])
    assert served.endswith(
        '<link rel="modulepreload" crossorigin href="./static/js/Html.Ab1.js"></head>'
    )
    assert page_code.with_preloads(page, []) == page
    # The installed Streamlit keeps st.html's code where this looks for it.
    import streamlit

    static = Path(streamlit.__file__).parent / "static"
    index = (static / "index.html").read_text(encoding="utf-8")
    assert any(
        name.startswith("Html.") for name in page_code.chunks(static / "static" / "js", index)
    )


def test_static_files_are_kept_in_memory_with_their_headers_and_nothing_else(tmp_path):
    from dashboard.static_cache import AssetCache

    (tmp_path / "static" / "js").mkdir(parents=True)
    (tmp_path / "static" / "js" / "index.A1.js").write_bytes(b"export const a=1;")
    (tmp_path / "index.html").write_text("<html></html>")
    asked = []

    def headers_of(file, stat, path):
        asked.append(path)
        return [("etag", f"{file.name}:{stat.st_size}")]

    assets = AssetCache(headers_of)
    assets.fill(tmp_path)
    # Only what is under static/ (the page itself is Streamlit's, with our preloads).
    assert len(assets) == 1
    get = {"method": "GET", "headers": [(b"accept", b"*/*")]}
    for _ in range(2):
        assert assets.get("static/js/index.A1.js", get) == (
            b"export const a=1;",
            {"etag": "index.A1.js:17"},
        )
    # Its headers are made when it is first served, once.
    assert asked == ["static/js/index.A1.js"]
    assert assets.get("static/js/none.js", get) is None
    # A browser revalidating its copy, a range or a POST: Streamlit's handler answers.
    for scope in (
        {"method": "GET", "headers": [(b"if-none-match", b'"x"')]},
        {"method": "GET", "headers": [(b"range", b"bytes=0-3")]},
        {"method": "POST", "headers": []},
        {"method": "HEAD", "headers": []},
    ):
        assert assets.get("static/js/index.A1.js", scope) is None


# -- untrusted text --

HOST = "127.0.0.1:9"


def test_plain_text_reads_as_no_markdown_and_code_cannot_be_closed():
    text = hostile(HOST, "x") + " \\ a@b.org `tick` # heading"
    escaped = plain(text)
    # No unescaped character that starts Markdown, HTML, a directive or math is left,
    # and no bare URL, www. name or address stays whole for GitHub's autolinks.
    assert not re.search(r"(?<!\\)[!\[\]()<>*_`:$#@]", escaped)
    assert "http:" + "//" not in shown(escaped).replace(WORD_JOINER, "|") or True
    assert "://" not in escaped.replace("\\", "") and "www." not in escaped.replace("\\", "")
    assert shown(escaped) == text
    assert plain(None) == "" and plain(64) == "64"
    assert code("a ``b`` c") == "``` a ``b`` c ```"
    assert code("plain") == "` plain `"


def test_stored_markdown_and_the_search_are_escaped_on_every_page(tmp_path, monkeypatch):
    runs_dir, db_path = build_hostile(tmp_path, HOST)
    monkeypatch.setenv("ZOO_RUNS_DIR", str(runs_dir))
    monkeypatch.setenv("ZOO_DB", str(db_path))
    evil = f"timm/evil[**{HOST}**](http://{HOST}/model)"

    def markdown_of(at: AppTest) -> list[str]:
        """Every text of the page that Streamlit reads as Markdown."""
        parts = [e.value for kind in ("markdown", "caption", "info", "warning", "error",
                                      "success", "subheader") for e in at.get(kind)]  # fmt: skip
        parts += [e.label for e in at.expander]
        parts += [e.proto.label for e in at.get("page_link")]
        parts += [e.proto.label for e in at.get("link_button")]
        return parts

    pages = [
        ("pages_/matrix.py", {"q": hostile_search(HOST)}),
        ("pages_/detail.py", {"model": evil}),
        ("pages_/failures.py", {}),
        ("pages_/breaks.py", {}),
        ("pages_/summary.py", {"q": hostile_search(HOST)}),
        ("pages_/leaderboard.py", {"q": hostile_search(HOST)}),
        ("pages_/configs.py", {"q": hostile_search(HOST)}),
        ("pages_/compare.py", {"a": hostile(HOST, "label"), "b": "plain"}),
        ("pages_/docs.py", {"doc": hostile(HOST, "doc"), "section": hostile(HOST, "section")}),
    ]
    # Every page of the app is visited.
    assert {page for page, _ in pages} == {
        f"pages_/{path.name}" for path in (ROOT / "dashboard" / "pages_").glob("*.py")
    }
    for page, params in pages:
        at = AppTest.from_file(str(APP), default_timeout=60)
        for name, value in params.items():
            at.query_params[name] = value
        at = no_exception(at.switch_page(page).run())
        seen = markdown_of(at)
        assert seen, page
        for text in seen:
            # What an image, a link, a tag or a directive needs, unescaped outside a code
            # span (where nothing is Markdown): none is left.
            prose = re.sub(r"(`+).*?\1", "", text)
            for markup in (r"!\[x\]", r"\[\*\*", r"<img", r":red\[", r"\$x"):
                assert not re.search(r"(?<!\\)" + markup, prose), (page, markup, text)
        # ... and the hostile text is there, as it was written (st.text is never Markdown).
        written = [shown(text) for text in seen] + [e.value for e in at.text]
        assert any("[**Session expired**](http://" in text for text in written), page


def test_charts_show_data_as_text_not_plotly_markup():
    family = f"<a href=http://{HOST}/f>fam</a>"
    families = pd.DataFrame(
        {"family": [family], "config": ["<b>c</b>"], "total": [2], "passed": [1],
         "models": [1], "geomean_speedup": [1.5]}
    )  # fmt: skip
    fig = charts.family_matrix_figure(families, ["<b>c</b>"])
    assert list(fig.layout.yaxis.ticktext) == [html.escape(family, quote=False)]
    assert list(fig.layout.xaxis.ticktext) == ["&lt;b&gt;c&lt;/b&gt;"]
    assert fig.data[1].customdata[0][0] == html.escape(family, quote=False)
    points = pd.DataFrame(
        {"model_id": [family], "config": ["c"], "backend": ["<i>b</i>"], "speedup": [1.2],
         "compile_s": [3.0]}
    )  # fmt: skip
    (trace,) = charts.speedup_vs_compile(points).data
    assert trace.name == "&lt;i&gt;b&lt;/i&gt;" and "<a" not in trace.customdata[0][0]
    (trace,) = charts.speedup_vs_memory(points.assign(memory_ratio=[0.5])).data
    assert trace.name == "&lt;i&gt;b&lt;/i&gt;" and "<a" not in trace.customdata[0][0]
    # The Summary's per-config panels and sweep lines name configs and sweeps as text.
    config = f"<a href=http://{HOST}/c>c</a>"
    rates = pd.DataFrame(
        {"config": [config], "variant": [""], "passed": [1], "attempted": [2],
         "unsupported": [0], "not_run": [0]}
    )  # fmt: skip
    stats = {f"{name}_{stat}": [1.5] for name in ("speedup", "compile")
             for stat in ("n", "min", "q1", "median", "q3", "max")}  # fmt: skip
    panels = charts.config_panels(rates, pd.DataFrame({"config": [config], **stats}))
    escaped = html.escape(config, quote=False)
    assert all(list(trace.y) == [escaped] for trace in panels.data)
    trends = pd.DataFrame(
        {"config": [config] * 2, "variant": [""] * 2, "sweep": [family, "b"],
         "first_recorded": pd.to_datetime(["2026-01-01", "2026-01-02"]), "models": [1, 1],
         "passed": [1, 1], "attempted": [1, 1], "geomean_speedup": [1.1, 1.2]}
    )  # fmt: skip
    lines = charts.sweep_trends(trends)
    assert {trace.name for trace in lines.data} == {escaped}
    assert list(lines.data[0].x) == [html.escape(family, quote=False), "b"]


def test_graph_breaks_page_ranks_break_types_with_their_registry_text(app):
    at = no_exception(app.switch_page("pages_/breaks.py").run())
    table = at.dataframe[0].value
    # The fixture: one typed break (print) and one row from before types were kept.
    assert list(table["registry id"]) == ["GB0085", "unregistered"] or list(
        table["registry id"]
    ) == ["unregistered", "GB0085"]
    typed = table[table["registry id"] == "GB0085"].iloc[0]
    assert typed["break type"] == "Failed to trace builtin operator"
    assert typed["models"] == 1
    at = no_exception(at.selectbox(key="break").set_value("Failed to trace builtin operator").run())
    shown = [element.value for element in at.text]
    assert "Failed to trace builtin operator: Dynamo does not know how to trace" in shown
    assert "- Avoid calling builtin `print` in the compiled region." in shown


def test_a_split_of_dynamos_own_is_explained_on_the_graph_breaks_page(tmp_path, monkeypatch):
    split = GraphBreak("step_unsupported", "transformers/models/x.py:702 in forward", 1,
                       "step_unsupported", break_types.UNREGISTERED)  # fmt: skip
    record_run(tmp_path / "zoo.duckdb", "splits", [
        cell("resnet18", "resnet", "inductor", "pass", graph_breaks=[split],
                            graph_break_count=1, break_types='["step_unsupported"]'),
    ])  # fmt: skip
    at = _app_on((tmp_path / "no-runs", tmp_path / "zoo.duckdb"), monkeypatch)
    at = no_exception(at.switch_page("pages_/breaks.py").run())
    shown = [element.value for element in at.text]
    assert break_types.about("step_unsupported") in shown
    assert any("a reason of dynamo's own" in m.value for m in at.markdown)
    # The splits named are dynamo's own reasons in the installed torch, and no registry type.
    convert = Path(torch._dynamo.__file__).with_name("symbolic_convert.py").read_text()
    for name in break_types.DYNAMO_SPLITS:
        assert f'GraphCompileReason("{name}"' in convert and name not in break_types.registry()


def _snippet_cell(**values):
    """A recorded CPU cell of a tiny model, as the dashboard has it."""
    cell = dict(
        model_id="timm/test_resnet",
        suite="timm",
        backend="eager",
        mode="none",
        dynamic="false",
        precision="fp32",
        step="infer",
        batch_size=2,
        seq_len=None,
        size="full",
        device="cpu",
        input_shapes="[[2, 3, 160, 160]]",
    )
    return {**cell, **values}


def _run_snippets(snippets: list[str]) -> None:
    """Each snippet as its own script, all in one interpreter per call of this (XLA's
    apart: torchax breaks torch.compile in the process that imports it)."""
    code = "\n".join(
        f"exec(compile({snippet!r}, 'snippet-{i}', 'exec'), {{'__name__': 'snippet'}})"
        for i, snippet in enumerate(snippets)
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.slow
def test_reproduce_snippets_run_for_every_kind_of_cell():
    torch_cells = [
        _snippet_cell(),
        _snippet_cell(backend="aot_eager", step="train"),
        _snippet_cell(backend="export", mode="strict", dynamic="true", batch_size=4),
        _snippet_cell(backend="export", mode="non-strict", precision="bf16"),
        _snippet_cell(
            model_id="hf/BertForMaskedLM",
            suite="hf",
            backend="aot_eager",
            size="tiny",
            seq_len=16,
            input_shapes=None,
        ),
    ]
    _run_snippets([reproduce.python_snippet(cell) for cell in torch_cells])
    xla_cells = [
        _snippet_cell(backend="xla", precision="bf16"),
        _snippet_cell(backend="xla_export"),
    ]
    _run_snippets([reproduce.python_snippet(cell) for cell in xla_cells])
    hf = reproduce.zoo_run_command(torch_cells[-1])
    assert "--size tiny" in hf and "--seq-len 16" in hf


def test_cuda_graph_cells_measured_without_their_pool_have_a_memory_caveat(tmp_path):
    """A reduce-overhead cell recorded before the pool fix (no pool note) reads far too
    little memory: a caveat says so; one whose notes say its pool was counted, and a
    default-mode cell, have none."""
    runs_dir, db_path = build(tmp_path)
    store = Store.open(db_path)
    run = RunRecord(label="graphs", command="zoo-run", status="finished")
    store.start_run(run)
    memory = {"eager_peak_alloc_mb": 514.0, "compiled_peak_alloc_mb": 219.0, "memory_ratio": 0.43}
    old = cell("resnet50", "resnet", "inductor", "pass", **{**timed(2.0, 40.0), **memory})
    counted = cell(
        "resnet34", "resnet", "inductor", "pass",
        **{**timed(2.0, 40.0), **memory, "compiled_peak_alloc_mb": 685.0, "memory_ratio": 1.33},
        notes="CUDA graph pools hold 466 MB, 466 MB of it free between replays",
    )  # fmt: skip
    for result in (old, counted):
        result.mode, result.cell_key = "reduce-overhead", result.cell_key + "-ro"
    plain_mode = cell("resnet50", "resnet", "inductor", "pass", **{**timed(1.6, 40.0), **memory})
    plain_mode.cell_key += "-default"
    store.write_results(run.run_id, [old, counted, plain_mode])
    store.finish_run(run.run_id, "finished", 3)
    db = open_database(runs_dir, db_path)
    found = dict(
        db.con.execute(
            "SELECT model_id || ' ' || config, caveats FROM latest_cells "
            "WHERE list_contains(caveats, 'graph-pool-missed')"
        ).fetchall()
    )
    assert list(found) == ["timm/resnet50 inductor/reduce-overhead dyn=false bf16"]
    reason = caveats.BY_KEY["graph-pool-missed"].reason(
        {"compiled_peak_alloc_mb": 219.0, "memory_ratio": 0.43}
    )
    assert "219 MB" in reason and "0.43" in reason
    doc = caveats.BY_KEY["graph-pool-missed"].doc
    assert f"## {doc.heading}" in (Path(__file__).parents[1] / doc.path).read_text()


def _carrying(tmp_path, rows: list, key: str) -> list[str]:
    """The models among ``rows`` (written as one run beside the built data) whose
    newest cell carries the caveat ``key``."""
    runs_dir, db_path = build(tmp_path)
    store = Store.open(db_path)
    run = RunRecord(label="scope", command="zoo-run", status="finished")
    store.start_run(run)
    store.write_results(run.run_id, rows)
    store.finish_run(run.run_id, "finished", len(rows))
    db = open_database(runs_dir, db_path)
    return [
        name
        for (name,) in db.con.execute(
            "SELECT model_id FROM latest_cells WHERE list_contains(caveats, $key)", {"key": key}
        ).fetchall()
    ]


def test_eager_backend_gpu_time_profiled_in_one_autocast_region_has_a_caveat(tmp_path):
    """An eager-backend row labelled `autocast bf16` (one region around both profiled
    calls) reused eager's casts in its profile: a caveat says its GPU-time speedup reads
    high. One recorded per call, an Inductor row of the old label, and an fp32 one do not."""
    profiled = {"eager_kernels": 256, "compiled_kernels": 156, "gpu_speedup": 1.05}
    rows = []
    for model, backend, precision, treatment in (
        ("vit_base_patch16_224", "eager", "bf16", "autocast bf16"),
        ("resnet50", "eager", "bf16", "autocast bf16 per call"),
        ("resnet34", "inductor", "bf16", "autocast bf16"),
        ("resnet18", "eager", "fp32", "fp32, tf32 off"),
    ):
        rows.append(
            cell(model, "x", backend, "pass", precision, **timed(1.0, 1.0), **profiled,
                 precision_treatment=treatment)
        )  # fmt: skip
    assert _carrying(tmp_path, rows, "casts-reused") == ["timm/vit_base_patch16_224"]
    reason = caveats.BY_KEY["casts-reused"].reason(profiled)
    assert "156 kernels against eager's 256" in reason and "1.05x" in reason


def test_a_launch_bound_pass_timed_in_one_autocast_region_reads_low(tmp_path):
    """Timed inside one autocast region with a launch-bound eager side (fastest call
    1.5x its GPU time or more): its speedup reads low, a caveat says. Not a GPU-bound
    one, one timed per call, the eager backend's (both sides reused the casts), nor a
    failure."""
    rows = []
    for model, backend, status, treatment, gpu_ms in (
        ("mobilenetv3_large_100", "inductor", "pass", "autocast bf16", 4.0),
        ("resnet50", "inductor", "pass", "autocast bf16", 9.5),
        ("resnet34", "inductor", "pass", "autocast bf16 per call", 4.0),
        ("resnet18", "eager", "pass", "autocast bf16", 4.0),
        ("resnet26", "inductor", "fail_accuracy", "autocast bf16", 4.0),
    ):
        rows.append(
            cell(model, "x", backend, status, **timed(1.2, 9.0), eager_gpu_ms=gpu_ms,
                 gpu_speedup=1.4, precision_treatment=treatment)
        )  # fmt: skip
    assert _carrying(tmp_path, rows, "reads-low") == ["timm/mobilenetv3_large_100"]
    reason = caveats.BY_KEY["reads-low"].reason({"gpu_speedup": 1.4})
    assert "launch-bound" in reason and "(1.40x) holds" in reason
    doc = caveats.BY_KEY["reads-low"].doc
    assert f"## {doc.heading}" in (Path(__file__).parents[1] / doc.path).read_text()


def test_the_header_counts_the_passes_timed_in_one_autocast_region(tmp_path):
    """The header warns of the shown passes labelled `autocast bf16` (timed inside one
    autocast region): not of a pass timed per call, a failure of the old label, or fp32."""
    runs_dir, db_path = build(tmp_path)
    db = open_database(runs_dir, db_path)
    assert caveats.one_region_note(reads.overview(db)) is None
    store = Store.open(db_path)
    run = RunRecord(label="scope", command="zoo-run", status="finished")
    store.start_run(run)
    rows = [
        cell(model, "x", "inductor", status, precision, **timed(1.5, 9.0),
             precision_treatment=treatment)
        for model, status, precision, treatment in (
            ("resnet50", "pass", "bf16", "autocast bf16"),
            ("resnet101", "pass", "bf16", "autocast bf16"),
            ("resnet152", "pass", "bf16", "autocast bf16 per call"),
            ("resnet26", "fail_accuracy", "bf16", "autocast bf16"),
            ("resnet34", "pass", "fp32", "fp32, tf32 off"),
        )
    ]  # fmt: skip
    store.write_results(run.run_id, rows)
    store.finish_run(run.run_id, "finished", len(rows))
    overview = reads.overview(open_database(runs_dir, db_path))
    note = caveats.one_region_note(overview)
    assert overview["one_region_passes"] == 2
    assert note.startswith(f"2 of the {overview['passed']:,} passes shown were timed inside one")
    assert f"## {caveats.AUTOCAST_SCOPE.heading}" in (ROOT / "docs" / "PERFORMANCE.md").read_text()


def test_an_oom_beside_other_processes_has_a_caveat_and_a_plain_oom_none(tmp_path):
    """A crowded out-of-memory row, and a pass at a smaller batch after a crowded attempt,
    carry the caveat; an oom of the model's own, and a crowded attempt's retry that
    passed at the batch asked, do not."""
    runs_dir, db_path = build(tmp_path)
    store = Store.open(db_path)
    run = RunRecord(label="crowded", command="zoo-run", status="finished")
    store.start_run(run)
    crowded = f"{CROWDED}: they held 139.0 of the device's 139.8 GiB, this process 0.4 GiB"
    rows_in = {
        "seresnet101": cell("seresnet101", "resnet", "inductor", "oom", notes=crowded),
        "samvit_huge": cell("samvit_huge", "sam", "inductor", "oom", notes="out of memory"),
        "mt5_base": cell(
            "mt5_base", "mt5", "inductor", "pass", **timed(1.2, 30.0), batch_size_run=8,
            notes=f"an attempt at batch 64 ended oom (OutOfMemoryError), {crowded}",
        ),
        "resnet50": cell(
            "resnet50", "resnet", "inductor", "pass", **timed(1.8, 30.0), batch_size_run=64,
            notes=f"an attempt at batch 64 ended oom (OutOfMemoryError), {crowded}",
        ),
    }  # fmt: skip
    store.write_results(run.run_id, list(rows_in.values()))
    store.finish_run(run.run_id, "finished", len(rows_in))
    db = open_database(runs_dir, db_path)
    flagged = db.con.execute(
        "SELECT model_id FROM latest_cells WHERE list_contains(caveats, 'crowded') "
        "ORDER BY model_id"
    ).fetchall()
    assert flagged == [("timm/mt5_base",), ("timm/seresnet101",)]
    reason = caveats.BY_KEY["crowded"].reason
    assert "--retry-failed" in reason({"status": "oom", "batch_size": 64})
    assert "batch 8 of the 64 asked" in reason(
        {"status": "pass", "batch_size": 64, "batch_size_run": 8}
    )


def _beside_the_fixture(tmp_path, rows_in, label: str):
    """The dashboard's data once ``rows_in`` are recorded in a run of their own (labelled
    ``label``) beside the test sweep."""
    runs_dir, db_path = build(tmp_path)
    store = Store.open(db_path)
    run = RunRecord(label=label, command="zoo-run", status="finished")
    store.start_run(run)
    store.write_results(run.run_id, rows_in)
    store.finish_run(run.run_id, "finished", len(rows_in))
    return open_database(runs_dir, db_path)


def _flagged(tmp_path, rows_in, key: str, column: str = "model_id") -> list:
    """``column`` of the newest rows that carry caveat ``key``, once ``rows_in`` are
    recorded in a run of their own beside the test sweep."""
    db = _beside_the_fixture(tmp_path, rows_in, "flagged")
    return [
        value
        for (value,) in db.con.execute(
            f"SELECT {column} FROM latest_cells WHERE list_contains(caveats, ?) ORDER BY 1",
            [key],
        ).fetchall()
    ]


def test_a_timeout_that_outlasted_its_run_has_a_caveat_and_a_plain_timeout_none(tmp_path):
    """A timeout stopped at the end of a time-limited run it could not end within is the
    run's length, not the model's: marked so, with its phase in the reason; a cell that
    ran out of its own --timeout is not."""
    from runner.matrix.results import OUTLASTED_RUN

    rows_in = [
        cell("convmixer_768_32", "convmixer", "inductor", "timeout", error_type=OUTLASTED_RUN,
             error_phase="compile", wall_s=481.0),
        cell("mvitv2_huge_cls", "mvitv2", "inductor", "timeout", error_type="Timeout",
             error_phase="compile", wall_s=365.0),
    ]  # fmt: skip
    assert _flagged(tmp_path, rows_in, "outlasted-run") == ["timm/convmixer_768_32"]
    reason = caveats.BY_KEY["outlasted-run"].reason({"error_phase": "compile"})
    assert "stopped in its phase compile" in reason and "without `--time-limit`" in reason


def test_a_later_crowded_oom_leaves_the_measured_cell_on_the_matrix(tmp_path):
    """A cell that passed, then ran out of memory beside other processes in a later run,
    shows its pass in the Matrix, the per-cell views and the newest-rows view; a cell
    crowded out with nothing measured shows its oom."""
    runs_dir, db_path = build(tmp_path)
    store = Store.open(db_path)
    crowded = f"{CROWDED}: they held 138.0 of the device's 139.8 GiB, this process 1.8 GiB"
    for label, rows_in in (
        ("first", [cell("xlnet", "xlnet", "inductor", "pass", **timed(2.36, 100.0))]),
        (
            "second",
            [
                cell("xlnet", "xlnet", "inductor", "oom", notes=crowded),
                cell("zamba2", "zamba", "inductor", "oom", notes=crowded),
            ],
        ),
    ):
        run = RunRecord(label=label, command="zoo-run", status="finished")
        store.start_run(run)
        store.write_results(run.run_id, rows_in)
        store.finish_run(run.run_id, "finished", len(rows_in))
    db = open_database(runs_dir, db_path)
    for table in ("latest_cells", "latest_results"):
        shown = db.con.execute(
            f"SELECT model_id, status FROM {table} "
            "WHERE model_id IN ('timm/xlnet', 'timm/zamba2') ORDER BY model_id"
        ).fetchall()
        assert shown == [("timm/xlnet", "pass"), ("timm/zamba2", "oom")], table
    (speedup,) = db.con.execute(
        "SELECT speedup FROM latest_cells WHERE model_id = 'timm/xlnet'"
    ).fetchone()
    assert speedup == pytest.approx(2.36)


def test_the_store_and_every_dashboard_view_pick_the_same_row_on_a_tie(tmp_path):
    """Two rows of a cell recorded at the same instant (runs merged from two databases
    can tie): the runner's newest row (what --retry-failed and Compare read) and the
    dashboard's, with and without runs chosen, are the same one, the greater result_id."""
    runs_dir, db_path = build(tmp_path)
    store = Store.open(db_path)
    run = RunRecord(label="tied", command="zoo-run", status="finished")
    store.start_run(run)
    rows_in = [
        cell("tied", "tied", "inductor", "pass", **timed(1.5, 20.0)),
        cell("tied", "tied", "inductor", "compile_error", error_message="boom"),
    ]
    ids = store.write_results(run.run_id, rows_in)
    store.finish_run(run.run_id, "finished", len(rows_in))
    with store.connection() as con:
        con.execute(
            "UPDATE results SET recorded_at = TIMESTAMP '2026-12-04 12:00:00' "
            "WHERE result_id IN (SELECT unnest(?::VARCHAR[]))",
            [ids],
        )
    winner = max(ids)
    statuses = dict(zip(ids, ("pass", "compile_error"), strict=True))
    ((_key, status),) = store._latest([rows_in[0].cell_key], "status")
    assert status == statuses[winner]
    db = open_database(runs_dir, db_path)
    for table in ("latest_cells", "latest_results"):
        (shown,) = db.con.execute(
            f"SELECT result_id FROM {table} WHERE model_id = 'timm/tied'"
        ).fetchone()
        assert shown == winner, table
    sql, params = queries.filtered(
        f"WITH {queries.CHOSEN} SELECT result_id FROM chosen WHERE model_id = 'timm/tied'",
        Filters(run=(run.run_id,)),
    )
    assert db.con.execute(sql, params).fetchall() == [(winner,)]


def test_a_max_autotune_cell_compiled_with_its_partners_tuning_has_a_caveat(tmp_path):
    """Only the cells whose notes say they reused tuning (their partner's, or the run's
    pool's): their compile time leaves autotuning out, and Model detail says so with its
    number."""
    rows_in = []
    pooled = tuning.pooled_note(tuning.PoolStart(12, 40, frozenset()), 3)
    for model, mode, notes in (
        ("convmixer_768_32", "max-autotune", None),
        ("convmixer_768_32", "max-autotune-no-cudagraphs", tuning.reused_note("max-autotune")),
        # A run with --tuning-pool: another model's cell tuned with what earlier ones had.
        ("convmixer_1024_20_ks9_p14", "max-autotune", pooled),
    ):
        row = cell(model, "convmixer", "inductor", "pass", **timed(3.8, 12.0))
        row.mode, row.notes = mode, notes
        row.cell_key = cell_key({name: getattr(row, name) for name in KEY_FIELDS})
        rows_in.append(row)
    flagged = _flagged(tmp_path, rows_in, "tuning-reused", "model_id || ' ' || mode")
    assert flagged == [
        "timm/convmixer_1024_20_ks9_p14 max-autotune",
        "timm/convmixer_768_32 max-autotune-no-cudagraphs",
    ]
    caveat = caveats.BY_KEY["tuning-reused"]
    assert "12.0 s" in caveat.reason({"compile_s": 12.0})
    assert f"## {caveat.doc.heading}" in (ROOT / caveat.doc.path).read_text()
