"""Named selections: sets of models a user picks by name (``@core``) beside globs.

A selection is a rule or a list. ``@headline`` is the zoo sweep's headline set, found
from the libraries: every timm model and the HF classes of the headline mappings (one
class per model type and head of the nine tasks the HF suite first listed).
``@core`` is data: ``core.txt`` beside this module, one model id per line, ``#``
starting a comment, each group's source said in its header.

Ids a selection names that this environment's catalogue lacks (other library
versions list other models) select nothing; for the pinned versions a test checks
that every listed id exists.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from importlib import resources

from zoo.errors import UsageError

PREFIX = "@"


def _headline() -> frozenset[str]:
    from zoo import hf_suite, timm_suite

    specs = [*timm_suite.list_specs(), *hf_suite.headline_specs()]
    return frozenset(spec.id for spec in specs)


def _listed(file_name: str) -> Callable[[], frozenset[str]]:
    def ids() -> frozenset[str]:
        return frozenset(listed_ids(file_name))

    return ids


# A selection joins by naming here how its ids are found.
_SELECTIONS: dict[str, Callable[[], frozenset[str]]] = {
    "headline": _headline,
    "core": _listed("core.txt"),
}

NAMES = tuple(_SELECTIONS)


def is_selection(token: str) -> bool:
    return token.startswith(PREFIX)


@functools.cache
def ids(token: str) -> frozenset[str]:
    """The model ids of the selection ``token`` names (``@core``, case-insensitive)."""
    name = token.removeprefix(PREFIX).lower()
    if name not in _SELECTIONS:
        known = ", ".join(PREFIX + known for known in NAMES)
        raise UsageError(f"unknown selection {token!r}; known selections: {known}")
    return _SELECTIONS[name]()


def listed_ids(file_name: str) -> list[str]:
    """The ids of a selection file, in file order, comments and blank lines left out."""
    text = resources.files(__name__).joinpath(file_name).read_text(encoding="utf-8")
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [line for line in lines if line]
