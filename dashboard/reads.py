"""What the pages read: the loaded database, and every query run and cached per parameters.

The database is loaded once per server (``st.cache_resource``) and shared by every
session; each query runs on its own cursor, since one DuckDB connection must not serve
two threads at once. Query results are cached per data load, filters and page
(``st.cache_data``), so flipping back to a view costs nothing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd
import streamlit as st

from dashboard import queries, status
from dashboard.data import DEFAULT_RUNS_DIR, RUNS_DIR_ENV, Sources, default_paths, load
from dashboard.filters import Facets, Filters, config_order, sort_configs
from dashboard.text import plain

# Results shipped with this checkout: found even when the dashboard starts elsewhere.
CHECKOUT_RUNS_DIR = Path(__file__).resolve().parents[1] / DEFAULT_RUNS_DIR
SPEEDUP_MAX_POINTS = 20_000
FACET_COLUMNS = (
    "suite",
    "family",
    "status",
    "backend",
    "mode",
    "dynamic",
    "precision",
    "step",
    "size",
    "device",
    "gpu",
    "bound",
    "timing",
)


@dataclass(frozen=True)
class Database:
    """The in-memory database of one load; ``token`` tells loads apart in cache keys."""

    con: duckdb.DuckDBPyConnection | None
    sources: Sources
    token: str
    error: str | None = None

    def query(self, sql: str, params: dict | None = None) -> pd.DataFrame:
        with self.con.cursor() as cursor:
            return cursor.execute(sql, params or {}).df()

    def filtered(self, sql: str, filters: Filters, **params) -> pd.DataFrame:
        """A statement over the rows ``filters`` shows (``queries.filtered``)."""
        return self.query(*queries.filtered(sql, filters, **params))


def resolve_paths() -> tuple[Path, Path]:
    """The runs folder and database: env vars, else ./data, else this checkout's data."""
    runs_dir, db_path = default_paths()
    if RUNS_DIR_ENV not in os.environ and not runs_dir.is_dir() and CHECKOUT_RUNS_DIR.is_dir():
        runs_dir = CHECKOUT_RUNS_DIR
    return runs_dir, db_path


def open_database(runs_dir: Path, db_path: Path) -> Database:
    """Load and prepare; a failure becomes ``Database.error``, never an exception."""
    token = f"{runs_dir}|{db_path}|{time.time_ns()}"
    try:
        con, sources = load(runs_dir, db_path)
        for statement in queries.PREPARE:
            con.execute(statement)
    except (duckdb.Error, OSError) as error:
        sources = Sources(runs_dir=runs_dir, db_path=db_path)
        return Database(None, sources, token, f"{type(error).__name__}: {error}")
    return Database(con, sources, token)


@st.cache_resource(show_spinner="Loading results…")
def _database(runs_dir: str, db_path: str) -> Database:
    return open_database(Path(runs_dir), Path(db_path))


def database() -> Database:
    runs_dir, db_path = resolve_paths()
    return _database(str(runs_dir), str(db_path))


def reload() -> None:
    """Read the sources again (after a sweep recorded more cells)."""
    st.cache_resource.clear()
    st.cache_data.clear()


def _cached(function):
    """``st.cache_data`` keyed by the database's load token instead of its connection."""
    return st.cache_data(show_spinner=False, max_entries=512, hash_funcs={Database: _token})(
        function
    )


def _token(db: Database) -> str:
    return db.token


@_cached
def facets(db: Database) -> Facets:
    row = db.query(queries.FACETS).iloc[0]
    values = {name: tuple(row[name]) for name in FACET_COLUMNS}
    runs = db.query(queries.RUNS)
    labels = runs[runs["label"] != ""].groupby("label", sort=False).size()
    options = {label: f"{label} ({count} runs)" for label, count in labels.items()}
    for run in runs.itertuples():
        started = "" if pd.isna(run.started_at) else f" {run.started_at:%Y-%m-%d %H:%M}"
        options[run.run_id] = f"run {run.run_id[:8]}{started} {run.label}".rstrip()
    return Facets(values=values, models=tuple(row["model"]), runs=options)


@_cached
def overview(db: Database) -> dict:
    """The header's counts, and ``devices``: each device name with its cell count."""
    devices = db.query(queries.DEVICES)
    return {
        **db.query(queries.OVERVIEW).iloc[0].to_dict(),
        "devices": list(zip(devices["name"], devices["cells"].astype(int), strict=True)),
    }


@dataclass(frozen=True)
class MatrixShape:
    configs: list[str]
    models: int
    families: int


@_cached
def matrix_shape(db: Database, filters: Filters) -> MatrixShape:
    frame = db.filtered(queries.MATRIX_SHAPE, filters)
    if frame.empty:
        return MatrixShape([], 0, 0)
    return MatrixShape(
        sort_configs(frame.to_dict("records")),
        int(frame["models"].iloc[0]),
        int(frame["families"].iloc[0]),
    )


# Models a page of the matrix shows by default, and the choices (pages_/matrix.py).
MATRIX_ROWS = 25
MATRIX_PAGE_SIZES = (25, 50, 100)


@_cached
def matrix_cells(
    db: Database, filters: Filters, page: int, per_page: int = MATRIX_ROWS
) -> pd.DataFrame:
    offset = (page - 1) * per_page
    return db.filtered(queries.MATRIX_CELLS, filters, limit=per_page, offset=offset)


@_cached
def family_matrix(db: Database, filters: Filters) -> pd.DataFrame:
    return db.filtered(queries.FAMILY_MATRIX, filters)


def chosen_cells(db: Database, filters: Filters) -> pd.DataFrame:
    """Every cell the filters show (for CSV downloads; built only when clicked)."""
    return db.filtered(queries.CHOSEN_CELLS, filters)


@_cached
def summary(db: Database, filters: Filters) -> pd.DataFrame:
    frame = db.filtered(queries.SUMMARY, filters)
    order = sorted(
        range(len(frame)),
        key=lambda i: (frame["suite"][i], frame["variant"][i], config_order(frame.iloc[i])),
    )
    frame = frame.iloc[order].reset_index(drop=True)
    frame["pass_rate"] = [
        status.pass_rate_text(row.passed, row.attempted, row.unsupported, row.not_run)
        for row in frame.itertuples()
    ]
    return frame


@_cached
def speedup_points(db: Database, filters: Filters) -> pd.DataFrame:
    return db.filtered(queries.SPEEDUP_POINTS, filters, max_points=SPEEDUP_MAX_POINTS)


def _in_config_order(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows by device and size, then config in the CLI's axis order."""
    frame = frame.reset_index(drop=True)
    order = sorted(
        range(len(frame)), key=lambda i: (frame["variant"][i], config_order(frame.iloc[i]))
    )
    return frame.iloc[order].reset_index(drop=True)


@_cached
def distributions(db: Database, filters: Filters) -> pd.DataFrame:
    """Per config: quartiles, smallest and largest speedup and compile time of its
    passing cells (``queries.DISTRIBUTIONS``)."""
    return _in_config_order(db.filtered(queries.DISTRIBUTIONS, filters))


@_cached
def sweep_trends(db: Database, filters: Filters) -> pd.DataFrame:
    """Pass rate and geomean speedup per config and sweep, for configs of several sweeps."""
    frame = db.filtered(queries.SWEEP_TRENDS, filters)
    firsts = frame.drop_duplicates(["config", "variant"])
    order = {
        (row["config"], row["variant"]): rank
        for rank, row in enumerate(_in_config_order(firsts).to_dict("records"))
    }
    rank = [order[key] for key in zip(frame["config"], frame["variant"], strict=True)]
    return (
        frame.assign(_rank=rank)
        .sort_values(["_rank", "first_recorded", "sweep"], kind="stable")
        .drop(columns="_rank")
        .reset_index(drop=True)
    )


def pass_rates(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary's rows (per suite and config) added up per config (and device and
    size), in config order."""
    counts = ["passed", "attempted", "unsupported", "not_run"]
    axes = ["variant", "config", "backend", "mode", "dynamic", "precision"]
    added = summary.groupby(axes, sort=False, dropna=False)[counts].sum().reset_index()
    return _in_config_order(added.astype({name: int for name in counts}))


@_cached
def failure_groups(db: Database, filters: Filters) -> pd.DataFrame:
    return db.filtered(queries.FAILURE_GROUPS, filters)


LEADERBOARD_ROWS = 1_000


@_cached
def leaderboard(
    db: Database, filters: Filters, view: str, limit: int | None = LEADERBOARD_ROWS
) -> pd.DataFrame:
    """The first ``limit`` cells (None: all) of a quick view (``queries.LEADERBOARD_VIEWS``),
    each with ``matching``: how many the view holds in all."""
    rows = 2**62 if limit is None else limit
    return db.filtered(queries.LEADERBOARD[view], filters, limit=rows)


@_cached
def config_pair(db: Database, filters: Filters, a: str, b: str) -> pd.DataFrame:
    return db.filtered(queries.CONFIG_PAIR, filters, a=a, b=b)


@_cached
def unsupported_reasons(db: Database, filters: Filters) -> pd.DataFrame:
    return db.filtered(queries.UNSUPPORTED_REASONS, filters)


@_cached
def break_types(db: Database, filters: Filters) -> pd.DataFrame:
    return db.filtered(queries.BREAK_TYPES, filters)


@_cached
def model_cells(db: Database, model: str, run: tuple[str, ...]) -> pd.DataFrame:
    return db.query(queries.MODEL_CELLS, {"model": model, "run": list(run)})


@_cached
def model_history(db: Database, model: str) -> pd.DataFrame:
    return db.query(queries.MODEL_HISTORY, {"model": model})


@_cached
def graph_breaks(db: Database, result_ids: tuple[str, ...]) -> pd.DataFrame:
    return db.query(queries.GRAPH_BREAKS, {"result_ids": list(result_ids)})


@_cached
def result(db: Database, result_id: str) -> dict | None:
    frame = db.query(queries.RESULT, {"result_id": result_id})
    return None if frame.empty else frame.iloc[0].to_dict()


VIEW_KEY = "_zoo_view"


@dataclass(frozen=True)
class View:
    """What app.py prepared for the page it runs: the data, the filters and their options."""

    db: Database
    filters: Filters
    facets: Facets


def current_view() -> View:
    return st.session_state[VIEW_KEY]


# Number formats of the tables: a speedup, seconds, milliseconds, a ratio, megabytes.
TIMES, SECONDS, MS, RATIO, MB = "%.2fx", "%.1f", "%.3f", "%.2f", "%.0f"


def show_table(frame: pd.DataFrame, **options):
    """``st.dataframe`` of ``frame`` without its index, a missing value shown as "–"
    (Streamlit's own is a grey "None") in a column that still sorts by its numbers."""
    return st.dataframe(frame, hide_index=True, placeholder="–", **options)


def doc_link(doc) -> None:
    """A link to ``doc`` (a ``caveats.Doc``: a document and a heading) on the Docs page,
    labelled "Why: <document> § <heading>"."""
    st.page_link(
        "pages_/docs.py",
        label=plain(f"Why: {doc}"),
        query_params={"doc": doc.path, "section": doc.anchor},
        icon=":material/menu_book:",
    )


def number_columns(**formats: str) -> dict:
    """``st.dataframe``'s column_config for numeric columns, by name: its format."""
    return {name: st.column_config.NumberColumn(format=fmt) for name, fmt in formats.items()}


def download_csv(
    label: str,
    frame: pd.DataFrame | Callable[[], pd.DataFrame],
    name: str,
    help: str | None = None,
) -> None:
    """A CSV download of ``frame`` (or of what ``frame()`` returns, built only when
    clicked) as ``zoo-matrix-<name>.csv``; the page does not rerun on the click."""
    st.download_button(
        label,
        data=lambda: (frame() if callable(frame) else frame).to_csv(index=False),
        file_name=f"zoo-matrix-{name}.csv",
        mime="text/csv",
        on_click="ignore",
        icon=":material/download:",
        help=help,
    )
