"""What kind of graph break a reason is: its type (the first line of dynamo's message)
and its id in torch's graph-break registry (``torch/_dynamo/graph_break_registry.json``,
since torch 2.8: an id like ``GB0124`` per type, with an explanation and hints; since 2.9
the message also links the type's page on the graph-break site). A type the registry
does not know goes into one bucket, ``unregistered``, with its first line as its type."""

from __future__ import annotations

import functools
import json
import os
import re

import torch

UNREGISTERED = "unregistered"
_SITE_ID = re.compile(r"/gb/(gb\d+)\.html", re.IGNORECASE)


@functools.cache
def registry() -> dict[str, tuple[str, list[str]]]:
    """Break type -> (registry id, hints), from the installed torch (empty before 2.8)."""
    path = os.path.join(os.path.dirname(torch._dynamo.__file__), "graph_break_registry.json")
    try:
        with open(path) as file:
            entries = json.load(file)
    except (OSError, ValueError):
        return {}
    known: dict[str, tuple[str, list[str]]] = {}
    for registry_id, versions in entries.items():
        for entry in versions:  # one id may have several wordings over torch versions
            known.setdefault(entry.get("Gb_type", ""), (registry_id, entry.get("Hints") or []))
    return known


def classify(reason: str) -> tuple[str, str, str | None]:
    """(type, registry id or ``unregistered``, the registry's hints as JSON) of a break
    reason as dynamo wrote it."""
    lines = [line.strip() for line in reason.splitlines() if line.strip()]
    first = lines[0] if lines else reason.strip()
    known = registry()
    if first in known:
        registry_id, hints = known[first]
        return first, registry_id, json.dumps(hints) if hints else None
    linked = _SITE_ID.search(reason)
    if linked:
        return first, linked.group(1).upper(), None
    return first, UNREGISTERED, None
