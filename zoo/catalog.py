"""The catalogue: every model of every suite, and selection from it by glob or name."""

from __future__ import annotations

import difflib
import fnmatch
import importlib
from collections.abc import Iterable

from zoo import custom, selections
from zoo.errors import UsageError
from zoo.spec import SUITES, ModelSpec

# A suite joins the catalogue by naming here the module whose ``list_specs()`` lists it.
# Custom models are not listed: they exist only when the user names their file.
_SUITE_LISTERS = {
    "timm": "zoo.timm_suite",
    "hf": "zoo.hf_suite",
}

SUITE_CHOICES = ("all", *_SUITE_LISTERS)

MAX_SUGGESTIONS = 5


def list_all(suite: str = "all") -> list[ModelSpec]:
    """Every model of one suite, or of all of them, in catalogue order."""
    if suite == "all":
        suites = list(_SUITE_LISTERS)
    elif suite in _SUITE_LISTERS:
        suites = [suite]
    else:
        known = ", ".join(SUITE_CHOICES)
        raise UsageError(f"unknown suite {suite!r}; choose one of: {known}")
    specs = [
        spec
        for name in suites
        for spec in importlib.import_module(_SUITE_LISTERS[name]).list_specs()
    ]
    return _ordered(specs)


def select(
    patterns: list[str] | None, modules: list[str] | None = None, suite: str = "all"
) -> list[ModelSpec]:
    """The models that ``patterns`` name, plus the custom ``modules``, in catalogue order.

    A pattern is a case-insensitive shell glob matched against a model's id
    (``timm/resnet50``) and its bare name (``resnet50``), or a named selection
    (``@core``, ``@headline``: ``zoo.selections``); one string may hold several,
    separated by commas. No patterns (None) and no modules selects every model; patterns
    given but empty (``''``, ``','``) are a ``UsageError``: the whole catalogue is
    asked for with ``'*'``, never by a blank. Each pattern must match something, else a
    ``UsageError`` names the closest models (or, for an unknown selection, the known
    ones).
    """
    wanted = _split(patterns)
    if patterns is not None and not wanted:
        shown = ", ".join(repr(text) for text in patterns)
        raise UsageError(
            f"--models {shown} names no pattern. Give model patterns (e.g. 'resnet*'), or "
            f"'*' for every model (or a named selection: "
            f"{', '.join(selections.PREFIX + name for name in selections.NAMES)})."
        )
    custom_specs = [custom.load_spec(source) for source in modules or []]
    if not wanted:
        return _ordered(custom_specs) if custom_specs else list_all(suite)
    pool = list_all(suite) + custom_specs
    chosen = {spec.id: spec for spec in custom_specs}
    for pattern in wanted:
        matches = _matching(pattern, pool)
        if not matches:
            raise UsageError(_no_match_message(pattern, pool, suite))
        chosen.update((spec.id, spec) for spec in matches)
    return _ordered(chosen.values())


def _split(patterns: list[str] | None) -> list[str]:
    return [part.strip() for text in patterns or [] for part in text.split(",") if part.strip()]


def _matching(pattern: str, pool: list[ModelSpec]) -> list[ModelSpec]:
    if selections.is_selection(pattern):
        members = selections.ids(pattern)
        return [spec for spec in pool if spec.id in members]
    return [spec for spec in pool if _matches(pattern, spec)]


def _matches(pattern: str, spec: ModelSpec) -> bool:
    pattern = pattern.lower()
    return fnmatch.fnmatchcase(spec.id.lower(), pattern) or fnmatch.fnmatchcase(
        spec.name.lower(), pattern
    )


def _ordered(specs: Iterable[ModelSpec]) -> list[ModelSpec]:
    """Suites in ``SUITES`` order, then ids: the order sharding and resume rely on."""
    unique = {spec.id: spec for spec in specs}
    return sorted(unique.values(), key=lambda spec: (_suite_rank(spec.suite), spec.id))


def _suite_rank(suite: str) -> int:
    return SUITES.index(suite) if suite in SUITES else len(SUITES)


def _no_match_message(pattern: str, pool: list[ModelSpec], suite: str) -> str:
    if selections.is_selection(pattern):
        return f"the selection {pattern!r} has no model in suite {suite!r}"
    closest = _closest(pattern, pool)
    hint = f"; closest: {', '.join(closest)}" if closest else ""
    return f"no model matches {pattern!r}{hint} (zoo-list shows them all)"


def _closest(pattern: str, pool: list[ModelSpec]) -> list[str]:
    """Names most like ``pattern``, shown as ids when the pattern names a suite."""
    matcher = difflib.SequenceMatcher(b=pattern.lower())
    scored = []
    for spec in pool:
        score = 0.0
        for candidate in (spec.name, spec.id):
            matcher.set_seq1(candidate.lower())
            # The cheap upper bounds first, as difflib.get_close_matches does.
            if matcher.real_quick_ratio() > score and matcher.quick_ratio() > score:
                score = max(score, matcher.ratio())
        if score >= 0.6:
            scored.append((-score, spec.id, spec))
    scored.sort(key=lambda item: item[:2])
    show_id = "/" in pattern
    return [spec.id if show_id else spec.name for _, _, spec in scored[:MAX_SUGGESTIONS]]
