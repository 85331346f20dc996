"""Streamlit's own static files (its JavaScript, styles and fonts) served from memory.

A cold page load asks the server for about 60 module files before the app can start,
and 30 more when the first page's widgets arrive. Streamlit serves each with Starlette's
``FileResponse``: a stat, an open and reads in worker threads, one file after another on
its event loop; 90 files took 0.7 s on a 2-core machine (0.27-0.29 s with httptools and
uvloop), and 30-50 ms from memory (docs/PERFORMANCE.md, "Dashboard"). The files are read
once, as the server starts, with the headers Streamlit's own handler gives them (type,
length, ETag, its cache rule); a conditional or ranged request, another method, or a
file that is not there is left to that handler.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

# The folder under Streamlit's static directory that holds its hashed bundles.
ASSETS = "static"
# Request headers whose answers depend on the client's copy: the files' own handler.
_CONDITIONAL = (b"range", b"if-none-match", b"if-modified-since", b"if-range")


class AssetCache:
    """The bytes of each file under ``directory/static``, by the path Streamlit's static
    handler is asked for (``static/js/index.abc.js``), and the headers that handler
    would send with it: ``headers_of(file, stat, path)``, asked when the file is first
    served (Streamlit sets the types of .js and .css files as its server starts)."""

    def __init__(
        self, headers_of: Callable[[Path, os.stat_result, str], Iterable[tuple[str, str]]]
    ) -> None:
        self._headers_of = headers_of
        self._files: dict[str, tuple[Path, os.stat_result, bytes]] = {}
        self._headers: dict[str, dict[str, str]] = {}

    def __len__(self) -> int:
        return len(self._files)

    def fill(self, directory: Path) -> None:
        """Read every file under ``directory/static``; one that cannot be read is left to
        the handler."""
        for file in sorted((directory / ASSETS).rglob("*")):
            try:
                if not file.is_file():
                    continue
                stat = file.stat()
                body = file.read_bytes()
            except OSError:
                continue
            self._files[file.relative_to(directory).as_posix()] = (file, stat, body)

    def get(self, path: str, scope) -> tuple[bytes, dict[str, str]] | None:
        """The answer to a plain GET of ``path`` (its bytes and headers), or None: the
        handler answers a revalidation, a range, any other method and any other path."""
        if scope.get("method") != "GET":
            return None
        if any(name in _CONDITIONAL for name, _ in scope.get("headers", ())):
            return None
        found = self._files.get(path)
        if found is None:
            return None
        headers = self._headers.get(path)
        if headers is None:
            headers = self._headers[path] = dict(self._headers_of(*found[:2], path))
        return found[2], headers
