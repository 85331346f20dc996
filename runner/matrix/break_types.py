"""What kind of graph break a reason is: its type (the first line of dynamo's message)
and its id in torch's graph-break registry (``torch/_dynamo/graph_break_registry.json``,
since torch 2.8: an id like ``GB0124`` per type, with an explanation and hints; since 2.9
the message also links the type's page on the graph-break site). A type the registry
does not know goes into one bucket, ``unregistered``, with its first line as its type.

Importable without torch (the store re-classifies shipped rows with it): the registry is
read from the installed torch's files, found without importing torch."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re

UNREGISTERED = "unregistered"
# Reasons dynamo gives splits it makes itself, which are no registry type: what each is
# (read from torch/_dynamo/symbolic_convert.py, torch 2.11).
DYNAMO_SPLITS = {
    "step_unsupported": (
        "A split dynamo makes itself: it met a graph break where it cannot resume in place "
        "(inside a try or with block), so it compiled the graph up to the last point "
        "where its stack was empty and went on from there. The break that caused it is "
        "usually listed as a type of its own, at or near the same frame."
    ),
    "comprehension_graph_break": (
        "A split dynamo makes itself (Python 3.12+): the body of a list or dict "
        "comprehension broke the graph, so dynamo ran the comprehension as a function of "
        "its own and resumed after it."
    ),
}
# Split reasons of dynamo's own that always follow one registry type: dynamo names the
# split of a data-dependent jump ``generic_jump <the value's type>`` after raising
# "Data-dependent branching" for it (torch 2.11's ``symbolic_convert.generic_jump``), and
# explain may list the split's reason rather than the break's.
_SPLIT_OF_TYPE = {"generic_jump ": "Data-dependent branching"}
_SITE_ID = re.compile(r"/gb/(gb\d+)\.html", re.IGNORECASE)


@functools.cache
def registry() -> dict[str, tuple[str, list[str]]]:
    """Break type -> (registry id, hints), from the installed torch (empty before 2.8,
    or without torch)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = os.path.join(
        next(iter(spec.submodule_search_locations)), "_dynamo", "graph_break_registry.json"
    )
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
    # Some messages give the type and its explanation on one line ("TYPE: ..."): the
    # longest registered type it starts with.
    if first not in known:
        first = max(
            (kind for kind in known if first.startswith(kind + ":")), key=len, default=first
        )
    for prefix, kind in _SPLIT_OF_TYPE.items():
        if first.startswith(prefix) and kind in known:
            first = kind
    if first in known:
        registry_id, hints = known[first]
        return first, registry_id, json.dumps(hints) if hints else None
    linked = _SITE_ID.search(reason)
    if linked:
        return first, linked.group(1).upper(), None
    return first, UNREGISTERED, None


def about(break_type: str) -> str | None:
    """What a split reason of dynamo's own (``DYNAMO_SPLITS``) means, else None."""
    return DYNAMO_SPLITS.get(break_type)


def reclassify(con) -> int:
    """Gives stored breaks the types ``classify`` gives them now, where they were
    recorded without one (before schema 4: their reason is the first line of dynamo's
    message) or as ``unregistered`` with a registered type and its explanation on one
    line ("TYPE: ...", before ``classify`` read those); their cells' ``break_types``
    follow; so do unregistered types that ``classify`` now files under a registered one
    (``generic_jump ...``). Idempotent: merge and the dashboard's load run it on what they
    read. Returns the break rows changed. ``con``: a DuckDB connection of the store's
    schema."""
    stale = con.execute(
        # An untyped break is classified by its reason, a typed one by its type alone.
        "SELECT DISTINCT break_type, CASE WHEN break_type IS NULL THEN reason END "
        "FROM graph_breaks WHERE break_type IS NULL OR registry_id = ?",
        [UNREGISTERED],
    ).fetchall()
    changed = 0
    touched: set[str] = set()
    for old_type, reason in stale:
        kind, registry_id, hints = classify(old_type if old_type is not None else reason or "")
        if old_type is not None and registry_id == UNREGISTERED:
            continue
        where = "break_type = ?" if old_type is not None else "break_type IS NULL AND reason = ?"
        ids = con.execute(
            f"UPDATE graph_breaks SET break_type = ?, registry_id = ?, hints = ? WHERE {where} "
            "RETURNING result_id",
            [kind, registry_id, hints, old_type if old_type is not None else reason],
        ).fetchall()
        changed += len(ids)
        touched.update(row[0] for row in ids)
    fresh = con.execute(
        "SELECT result_id, list(DISTINCT break_type ORDER BY break_type) FROM graph_breaks "
        "WHERE result_id IN (SELECT unnest(?::VARCHAR[])) AND break_type IS NOT NULL "
        "GROUP BY result_id",
        [sorted(touched)],
    ).fetchall()
    if fresh:
        # One statement for all cells (the two lists unnest side by side, row for row):
        # an UPDATE per cell scanned the results table once each, 41 s for 23,900 cells.
        con.execute(
            "UPDATE results SET break_types = fresh.types FROM (SELECT "
            "unnest(?::VARCHAR[]) AS result_id, unnest(?::VARCHAR[]) AS types) AS fresh "
            "WHERE results.result_id = fresh.result_id",
            [[row[0] for row in fresh], [json.dumps(row[1]) for row in fresh]],
        )
    return changed
