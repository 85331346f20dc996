"""The dashboard's server: ``streamlit run`` in this process, the results loaded at start.

``zoo-dashboard`` becomes ``python -m dashboard.serve APP [streamlit options]``. A
Streamlit server runs its app script only when a browser asks for a page, so on its own
it would read every result into DuckDB (seconds for 200,000 rows) while the first
visitor waits. Here a thread does that as the server starts, into the same cache the
app reads (``reads.database``, one per process), imports what the pages need, and reads
what every page shows whatever its filters (the header's counts and the filters'
options) and the first page of the unfiltered matrix, the address a first visit opens.
Everything else that depends on a page or its filters is read, and cached, when a
browser first asks for it. The page it serves names the code of the matrix's kind of
element, so the browser fetches it with Streamlit's own (``dashboard.page_code``), and
Streamlit's own files are served from memory (``dashboard.static_cache``).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from pathlib import Path

from dashboard import page_code
from dashboard.static_cache import AssetCache

READY = "zoo-dashboard: results loaded"


def preload() -> None:
    """Import the pages' modules and load the results; print how long it took."""
    start = time.perf_counter()
    from streamlit import runtime

    # The pages' caches bind to the runtime's storage when their module is imported.
    while not runtime.exists():
        time.sleep(0.01)
    import streamlit as st

    from dashboard import charts, reads  # noqa: F401  (imported for the first request)
    from dashboard.filters import Filters

    # Streamlit warns that this thread runs no script; it need not.
    context_log = logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context")
    level = context_log.level
    context_log.setLevel(logging.ERROR)
    try:
        # Streamlit inspects the whole call stack once per process, on the first element
        # any script makes (is this a REPL?): here, rather than in the first page asked.
        st.empty()
        db = reads.database()
        if not db.error:
            # The header and the filters' options: every page asks for them first, whatever
            # its filters, and they depend on the data alone; then the first page of the
            # matrix without filters, what a first visit shows.
            reads.overview(db)
            reads.facets(db)
            reads.matrix_shape(db, Filters())
            reads.matrix_cells(db, Filters(), 1)
    finally:
        context_log.setLevel(level)
    outcome = f"error: {db.error}" if db.error else f"{db.sources.parquet_files} parquet files"
    print(
        f"{READY} in {time.perf_counter() - start:.2f} s ({outcome})", file=sys.stderr, flush=True
    )


def serve_page_code() -> None:
    """Have Streamlit's server name the first page's element code in every page it
    serves (``dashboard.page_code``). Streamlit has no setting for it: this wraps the
    function that makes its static files' handler, and if that is not where this
    Streamlit keeps it, the page stays as Streamlit serves it."""
    try:
        from starlette.responses import FileResponse, HTMLResponse, Response
        from streamlit.web.server.starlette import starlette_static_routes as routes
    except ImportError:
        return
    make_handler = getattr(routes, "create_streamlit_static_handler", None)
    if make_handler is None:
        return

    def create(directory: str, base_url: str | None):
        handler = make_handler(directory=directory, base_url=base_url)
        index = Path(directory) / "index.html"
        try:
            original = index.read_text(encoding="utf-8")
        except OSError:
            return handler
        index = index.resolve()
        names = page_code.chunks(Path(directory) / "static" / "js", original)
        page = page_code.with_preloads(original, names)
        get_response = handler.get_response
        apply_cache_rule = getattr(handler, "_apply_cache_headers", None)

        def headers_of(file: Path, stat, path: str):
            # What Streamlit's handler answers: Starlette's headers for the file, then
            # Streamlit's cache rule for its path.
            response = FileResponse(file, stat_result=stat)
            apply_cache_rule(response, path)
            return response.headers.items()

        assets = AssetCache(headers_of)
        if apply_cache_rule is not None:
            threading.Thread(
                target=assets.fill, args=(Path(directory),), name="zoo-static", daemon=True
            ).start()

        async def get_page(path: str, scope):
            asset = assets.get(path, scope)
            if asset is not None:
                body, headers = asset
                return Response(body, headers=headers)
            response = await get_response(path, scope)
            served = getattr(response, "path", None)
            is_index = served is not None and Path(served).resolve() == index
            if is_index or (response.status_code == 304 and path in ("", ".", "index.html")):
                # No ETag: the browser's copy is never taken for this one.
                return HTMLResponse(page, headers={"Cache-Control": "no-cache"})
            return response

        handler.get_response = get_page
        return handler

    routes.create_streamlit_static_handler = create


def main() -> None:
    serve_page_code()
    threading.Thread(target=preload, name="zoo-preload", daemon=True).start()
    from streamlit.web.cli import main as streamlit

    streamlit(args=["run", *sys.argv[1:]], prog_name="streamlit")


if __name__ == "__main__":
    main()
