"""The code of the first page's kinds of elements, asked for with the page itself.

Streamlit's frontend fetches the code of each kind of element (``st.html``, a
multiselect, a button, ...) only when the first element of that kind arrives over the
websocket, a second or more into a cold load; until it comes, the element is a grey
placeholder, and React shows what waited no sooner than 0.5 s after the latest
placeholder (docs/PERFORMANCE.md, "Dashboard"). Named in the page as
``<link rel="modulepreload">``, that code is fetched while the browser still loads
Streamlit's own, and the matrix is ready to draw the moment it arrives.

The kinds are named (``KINDS``); their files, whose names carry a content hash, are
found in the installed Streamlit's static folder with what they import. A kind not
found there is left out: the page is then as Streamlit serves it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

# The kinds the first matrix tile waits for: st.html (the header and the matrix are
# both one). The widgets' code (35 files) asked for as well read no faster: it delays
# Streamlit's own, which the page needs first (docs/PERFORMANCE.md).
KINDS = ("Html",)
_IMPORT = re.compile(r'(?:from|import)\s*"\./([\w.-]+\.js)"')
_PRELOADED = re.compile(r'(?:href|src)="\./static/js/([\w.-]+\.js)"')


def chunks(js_dir: Path, page: str, kinds: Iterable[str] = KINDS) -> list[str]:
    """The files of ``kinds`` in ``js_dir`` with everything they import, in the order
    to fetch them, less what ``page`` (Streamlit's index.html) already loads."""
    loaded = set(_PRELOADED.findall(page))
    order: list[str] = []
    for kind in kinds:
        found = sorted(js_dir.glob(f"{kind}.*.js"))
        # One file a kind: its name and a hash (Button, not ButtonGroup).
        found = [path for path in found if path.name.count(".") == 2]
        if len(found) == 1:
            _closure(js_dir, found[0].name, loaded, order)
    return order


def _closure(js_dir: Path, name: str, seen: set[str], order: list[str]) -> None:
    if name in seen or not (js_dir / name).is_file():
        return
    seen.add(name)
    order.append(name)
    for imported in _IMPORT.findall((js_dir / name).read_text(encoding="utf-8")):
        _closure(js_dir, imported, seen, order)


def with_preloads(page: str, names: Iterable[str]) -> str:
    """``page`` with a ``<link rel="modulepreload">`` for each file, at the end of its head."""
    links = "".join(
        f'<link rel="modulepreload" crossorigin href="./static/js/{name}">' for name in names
    )
    return page.replace("</head>", f"{links}</head>", 1) if links else page
