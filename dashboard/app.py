"""The zoo-matrix dashboard: ``zoo-dashboard`` or ``streamlit run dashboard/app.py``.

Shows the results shipped under ``data/runs/`` together with the user's database
(``data/zoo.duckdb``, or ``ZOO_RUNS_DIR`` / ``ZOO_DB``); it never writes to either. This
script is the frame around every page: header, filters, navigation.
"""

from __future__ import annotations

import html
import sys
from pathlib import Path

# `streamlit run dashboard/app.py` puts dashboard/ on sys.path, not the checkout, so a
# checkout that was never pip-installed could not import its own package.
_CHECKOUT = str(Path(__file__).resolve().parents[1])
if _CHECKOUT not in sys.path:
    sys.path.insert(0, _CHECKOUT)

import streamlit as st  # noqa: E402

from dashboard import caveats, filters, reads  # noqa: E402
from dashboard.text import counted, plain  # noqa: E402

PAGES = Path(__file__).resolve().parent / "pages_"
GET_DATA = """
**No results to show yet.** Record some on this machine (needs the `runner` extra:
`pip install -e '.[runner]'`):

```
zoo-run --models 'resnet*' --device cpu
```

They land in `data/zoo.duckdb`; press **Reload data** in the sidebar. Or point the
dashboard at results you have:

```
zoo-dashboard --db path/to/zoo.duckdb --runs-dir path/to/runs
```

(the same as the environment variables `ZOO_DB` and `ZOO_RUNS_DIR`).
"""


def _list(values) -> str:
    values = list(values) if values is not None else []
    return ", ".join(values) if values else "unknown"


def _devices(devices: list[tuple[str, int]]) -> str:
    """``"NVIDIA H200 (40 cells), CPU (8 cells)"``: where the shown cells ran."""
    return ", ".join(f"{name} ({counted(cells, 'cell')})" for name, cells in devices) or "no device"


def header(db: reads.Database, overview: dict) -> None:
    first, last = (f"{overview[k]:%Y-%m-%d}" for k in ("first_recorded", "last_recorded"))
    dates = first if first == last else f"{first} – {last}"
    # HTML rather than Markdown: the matrix is an HTML element too, and the first one on
    # a page has the browser fetch the code that shows them while the matrix is queried.
    attempted = overview["cells"] - overview["unsupported"]
    not_run = overview["models"] * overview["configs"] - overview["cells"]
    st.html(
        f"<p><b>zoo-matrix</b> · {overview['cells']:,} cells ({overview['models']:,} models × "
        f"{overview['configs']} configs): {overview['passed']:,} pass of {attempted:,} "
        f"attempted, {overview['unsupported']:,} unsupported here, {not_run:,} not run · "
        f"{html.escape(_devices(overview['devices']))} · "
        f"torch {html.escape(_list(overview['torch_versions']))} · recorded {dates}</p>"
    )
    st.caption(
        f"Sources: {plain(_sources(db.sources))} · {overview['result_rows']:,} result rows from "
        f"{overview['runs']} runs; each cell shows its newest row."
    )
    if note := caveats.one_region_note(overview):
        st.warning(note, icon=":material/warning:")
        reads.doc_link(caveats.AUTOCAST_SCOPE)


def _sources(sources) -> str:
    shipped = (
        f"{sources.parquet_files} parquet files under {sources.runs_dir}"
        if sources.parquet_files
        else f"no shipped results under {sources.runs_dir}"
    )
    if sources.db_path is None:
        return shipped
    if sources.db_loaded:
        return f"{shipped} + your database {sources.db_path}"
    if sources.db_path.exists():
        return f"{shipped} ({sources.db_path} unreadable, see above)"
    return f"{shipped} (no database at {sources.db_path} yet)"


def main() -> None:
    st.set_page_config(page_title="zoo-matrix", page_icon=":material/grid_on:", layout="wide")
    page = st.navigation(
        [
            st.Page(PAGES / "matrix.py", title="Matrix", icon=":material/grid_on:", default=True),
            st.Page(PAGES / "summary.py", title="Summary", icon=":material/bar_chart:"),
            st.Page(PAGES / "leaderboard.py", title="Leaderboard", icon=":material/leaderboard:"),
            st.Page(PAGES / "configs.py", title="Config vs config", icon=":material/join_inner:"),
            st.Page(PAGES / "detail.py", title="Model detail", icon=":material/search:"),
            st.Page(PAGES / "failures.py", title="Failures", icon=":material/error:"),
            st.Page(PAGES / "breaks.py", title="Graph breaks", icon=":material/link_off:"),
            st.Page(PAGES / "compare.py", title="Compare", icon=":material/compare_arrows:"),
            st.Page(PAGES / "docs.py", title="Docs", icon=":material/menu_book:"),
        ]
    )
    db = reads.database()
    with st.sidebar:
        st.button(
            "Reload data", on_click=reads.reload, help="Read the sources again", width="stretch"
        )
    for problem in db.sources.problems:
        st.warning(plain(problem), icon=":material/warning:")
    if db.error:
        st.error(
            f"The results could not be read: {plain(db.error)}. Check the paths (`--runs-dir`, "
            "`--db`, or `ZOO_RUNS_DIR` / `ZOO_DB`) and press Reload data.",
            icon=":material/error:",
        )
        return
    overview = reads.overview(db)
    if not overview["cells"]:
        st.info(GET_DATA, icon=":material/info:")
        st.caption(f"Looked in: {plain(_sources(db.sources))}.")
        return
    header(db, overview)
    facets = reads.facets(db)
    # Before the widgets are drawn: drawing them drops the values they do not offer.
    unknown = filters.unknown_url_values(
        facets, {name: filters.url_values(name) for name in st.query_params}
    )
    chosen = filters.sidebar(facets)
    filters.warn_unknown(unknown)
    filters.chips(chosen, facets)
    st.session_state[reads.VIEW_KEY] = reads.View(db, chosen, facets)
    page.run()


main()
