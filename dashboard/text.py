"""Untrusted text for the places Streamlit reads as Markdown.

Model ids, error messages, run labels, paths and URL values are data: whoever made a
shard or typed an address chose them. Streamlit reads the body of ``st.markdown``,
``st.caption``, ``st.info``/``st.warning``/``st.error`` and the labels of expanders,
page links and help tooltips as Markdown, with images, links, Streamlit's directives
(``:red[...]``, ``:material/icon:``) and math. ``plain`` makes text show as it is there;
``code`` shows it as inline code. Bodies of text are better shown with ``st.code`` or
``st.text``, which read nothing.
"""

from __future__ import annotations

import re

# Every ASCII punctuation mark may be escaped in CommonMark; escaped, none starts
# emphasis, a link, an image, HTML, a heading, a list, a directive or math.
_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
# GitHub's Markdown also links bare URLs, www. names and e-mail addresses, after the
# escapes are resolved: an invisible word joiner where each would start keeps it text.
_AUTOLINK_STARTS = re.compile(r"(?<=:)(?=//)|(?<=www)(?=\.)|(?=@)", re.IGNORECASE)
WORD_JOINER = "\u2060"


def plain(text: object) -> str:
    """``text`` for a Markdown context, shown as it is (None shows as nothing)."""
    if text is None:
        return ""
    joined = _AUTOLINK_STARTS.sub(WORD_JOINER, str(text))
    return _PUNCTUATION.sub(r"\\\1", joined)


def counted(number: int, noun: str) -> str:
    """``"1 model"``, ``"2,342 models"``: a count with its noun (plural by ``s``)."""
    return f"{number:,} {noun}" + ("" if number == 1 else "s")


def code(text: object) -> str:
    """``text`` as inline code: fenced by more backticks than it holds in a row, so it
    cannot close the span (nothing inside a code span is read as Markdown)."""
    text = " ".join(str(text).split())
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {text} {fence}"


class Html:
    """HTML we made (every value in it escaped) for ``st.html``, passed on as it is:
    Streamlit dedents a string's lines first (``textwrap.dedent``: 11 ms on a page of
    500 matrix tiles), and takes an object's ``_repr_html_`` as given."""

    def __init__(self, body: str) -> None:
        self.body = body

    def _repr_html_(self) -> str:
        return self.body
