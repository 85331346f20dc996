"""Sections of this checkout's documents (README.md, docs/*.md, data/runs/README.md), for
the Docs page a caveat links to: the dashboard runs offline, so its links to the docs
open them in the dashboard rather than on a website.

The documents are this project's own text; a path or anchor from the URL only picks
one of them (``documents``, ``headings``), never names a file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dashboard.caveats import slug

CHECKOUT = Path(__file__).resolve().parents[1]
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
# A link to another of the documents, relative to the checkout: it opens on this page.
_DOC_LINK = re.compile(r"\]\(((?:docs/[\w.-]+|README|data/runs/README)\.md)(?:#([\w-]+))?\)")


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    anchor: str
    line: int


def documents(root: Path = CHECKOUT) -> list[str]:
    """The documents of the checkout at ``root``, as paths relative to it."""
    found = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    found.append(root / "data" / "runs" / "README.md")
    return [path.relative_to(root).as_posix() for path in found if path.is_file()]


def _lines(path: str, root: Path) -> list[str]:
    return (root / path).read_text(encoding="utf-8").splitlines()


def headings(path: str, root: Path = CHECKOUT) -> list[Heading]:
    """The headings of a document (not those inside code blocks), anchors made unique
    as GitHub makes them (a second "Usage" is "usage-1")."""
    found, seen, fenced = [], {}, False
    for number, line in enumerate(_lines(path, root)):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else _HEADING.match(line)
        if match:
            text = match[2].replace("`", "")
            anchor = slug(text)
            count = seen.get(anchor, 0)
            seen[anchor] = count + 1
            found.append(
                Heading(len(match[1]), text, anchor if not count else f"{anchor}-{count}", number)
            )
    return found


def section(path: str, anchor: str, root: Path = CHECKOUT) -> str | None:
    """The Markdown of a document's section: its heading through the line before the
    next heading of the same or a higher level; None where there is no such heading.
    Comments are dropped, and links to the other documents open on the Docs page."""
    marks = headings(path, root)
    for index, heading in enumerate(marks):
        if heading.anchor == anchor:
            end = next(
                (later.line for later in marks[index + 1 :] if later.level <= heading.level),
                None,
            )
            text = "\n".join(_lines(path, root)[heading.line : end])
            return _DOC_LINK.sub(_docs_link, _COMMENT.sub("", text))
    return None


def _docs_link(match: re.Match) -> str:
    target = f"docs?doc={match[1]}"
    return f"]({target}&section={match[2]})" if match[2] else f"]({target})"
