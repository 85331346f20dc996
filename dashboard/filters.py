"""The filters every page applies, bound to the URL so a view can be shared by its address.

Each filter is a sidebar widget bound to a query parameter of the same name
(``?status=compile_error&backend=inductor&q=resnet``). Streamlit drops URL values that
are not among a widget's options, and the queries take the chosen values as parameters
(lists), so nothing typed into an address reaches SQL as text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import streamlit as st

from dashboard.text import plain
from runner.backends.registry import names as backend_names
from runner.matrix.axes import DYNAMIC, MODES, NO_MODE, PRECISIONS
from runner.matrix.columns import CORE
from runner.matrix.labels import DISTURBED_RATIO
from runner.matrix.results import STATUSES
from runner.steps.registry import INFER

SEARCH_KEY = "q"
MORE_KEY = "_more_filters"
SEARCH_MAX_CHARS = 100
# Shown first in the sidebar; the rest sit under "More filters".
MAIN_FILTERS = ("status", "family", "backend", "mode")
MORE_FILTERS = (
    "suite", "step", "dynamic", "precision", "size", "device", "gpu", "bound", "timing", "run",
)  # fmt: skip
LABELS = {
    "status": "Status",
    "family": "Family",
    "backend": "Backend",
    "mode": "Mode (inductor)",
    "suite": "Suite",
    "step": "Step (infer, train)",
    "dynamic": "Dynamic shapes",
    "precision": "Precision",
    "size": "Size",
    "device": "Device",
    "gpu": "GPU (the card a CUDA cell ran on)",
    "bound": "Launch- or GPU-bound (eager wall vs GPU busy time)",
    "timing": f"Timing disturbed (a median {DISTURBED_RATIO:g}x its fastest sample or more)",
    "run": "Run or label",
}
# The order a reader expects (the CLI's), not the alphabet; unknown values go last.
_ORDER = {
    "status": STATUSES,
    "backend": backend_names(),
    "mode": (*MODES, NO_MODE),
    "dynamic": DYNAMIC,
    "precision": PRECISIONS,
}


@dataclass(frozen=True)
class Filters:
    """What the user chose; an empty tuple accepts every value."""

    search: str = ""
    run: tuple[str, ...] = ()
    suite: tuple[str, ...] = ()
    family: tuple[str, ...] = ()
    status: tuple[str, ...] = ()
    backend: tuple[str, ...] = ()
    mode: tuple[str, ...] = ()
    dynamic: tuple[str, ...] = ()
    precision: tuple[str, ...] = ()
    step: tuple[str, ...] = ()
    size: tuple[str, ...] = ()
    device: tuple[str, ...] = ()
    gpu: tuple[str, ...] = ()
    bound: tuple[str, ...] = ()
    timing: tuple[str, ...] = ()

    def query(self) -> list[tuple[str, str]]:
        """The filters as the URL's query parameters, for links that keep them."""
        pairs = [(SEARCH_KEY, self.search)] if self.search else []
        return pairs + [
            (name, value)
            for name in (*MAIN_FILTERS, *MORE_FILTERS)
            for value in getattr(self, name)
        ]

    def describe(self) -> str:
        """The active filters in words, as plain text: the search and the values are
        the user's and the data's (``dashboard.text.plain`` before Markdown)."""
        parts = [f"search '{self.search}'"] if self.search else []
        parts += [
            f"{name} {', '.join(values)}"
            for name in (*MAIN_FILTERS, *MORE_FILTERS)
            if (values := getattr(self, name))
        ]
        return "; ".join(parts) or "no filters"


@dataclass(frozen=True)
class Facets:
    """The values each filter offers, from the data; ``runs`` maps a run option to its text."""

    values: dict[str, tuple[str, ...]]
    models: tuple[str, ...]
    runs: dict[str, str] = field(default_factory=dict)

    def options(self, name: str) -> tuple[str, ...]:
        if name == "run":
            return tuple(self.runs)
        values = self.values.get(name, ())
        order = _ORDER.get(name)
        if order is None:
            return values
        rank = {value: i for i, value in enumerate(order)}
        return tuple(sorted(values, key=lambda value: (rank.get(value, len(rank)), value)))


# The zoo sweep's core columns (``--configs @core``) lead, in its order: the headline
# column first, the column every shipped model has.
_CORE_RANK = {
    (c.backend, c.mode, c.dynamic, c.precision, c.step): rank for rank, c in enumerate(CORE)
}


def _step(config: Mapping) -> str:
    """A config's step: its own field where the frame has one, else its label's last
    word (the label names the step only where the data has several, ``queries``)."""
    step = config.get("step")
    if isinstance(step, str) and step:
        return step
    words = str(config["config"]).split(" ")
    return words[3] if len(words) > 3 else INFER


def config_order(config: Mapping) -> tuple:
    """A sort key putting configs in order: the core set's columns first, in the
    sweep's order, then the others in the CLI's axis order (backend, mode, dynamic,
    precision)."""
    axes = tuple(str(config[axis]) for axis in ("backend", "mode", "dynamic", "precision"))
    core = _CORE_RANK.get((*axes, _step(config)), len(_CORE_RANK))
    ranks = [
        (
            _ORDER[axis].index(config[axis]) if config[axis] in _ORDER[axis] else 99,
            str(config[axis]),
        )
        for axis in ("backend", "mode", "dynamic", "precision")
    ]
    return (core, *ranks, config["config"])


def sort_configs(configs: list[dict]) -> list[str]:
    """The config labels of ``configs`` (dicts with the axes and ``config``), in order."""
    return [config["config"] for config in sorted(configs, key=config_order)]


def unknown_url_values(facets: Facets, query: Mapping[str, list[str]]) -> list[tuple[str, str]]:
    """The filter values of the URL's ``query`` (name to its values) that the data does
    not hold: Streamlit drops them silently, so the page names them instead."""
    unknown = []
    for name in (*MAIN_FILTERS, *MORE_FILTERS):
        options = set(facets.options(name))
        unknown += [(name, value) for value in query.get(name, []) if value not in options]
    return unknown


def url_values(name: str) -> list[str]:
    """The values the address gives a filter (``?status=a&status=b``)."""
    return st.query_params.get_all(name)


def warn_unknown(unknown: list[tuple[str, str]]) -> None:
    """One warning naming each URL value that matches nothing (as text: it is the URL's)."""
    if unknown:
        named = "; ".join(f"{LABELS.get(name, name)} '{value}'" for name, value in unknown)
        st.warning(
            plain(f"Not in the data, so ignored: {named}. The page shows the rest."),
            icon=":material/link_off:",
        )


def warn_unknown_choice(key: str, options, label: str) -> None:
    """Call before drawing a page's widget bound to ``key``: a URL value it does not
    offer (``detail?model=timm/nope``) is named in a warning rather than dropped silently."""
    offered = set(options)
    warn_unknown([(label, value) for value in url_values(key) if value not in offered])


def pick_two(
    options,
    keys: tuple[str, str],
    labels: tuple[str, str],
    first: tuple[int | None, int | None] = (None, None),
) -> tuple[str | None, str | None, list]:
    """Two selectboxes side by side (A the baseline, then B), bound to the URL's ``keys``;
    URL values they do not offer are named first. ``first``: the options' indices each
    opens on where the URL names none (None: no choice). Returns both choices and the
    columns."""
    for key, label in zip(keys, labels, strict=True):
        warn_unknown_choice(key, options, label)
    columns = st.columns(2)
    # The raw options (no format_func), so that the URL carries them.
    chosen = [
        column.selectbox(label, options, index=index, key=key, bind="query-params")
        for column, key, label, index in zip(
            columns, keys, (f"{labels[0]} (baseline)", labels[1]), first, strict=True
        )
    ]
    return chosen[0], chosen[1], columns


def _remove(name: str, value: str) -> None:
    if name == "search":
        st.session_state[SEARCH_KEY] = ""
    else:
        st.session_state[name] = [v for v in st.session_state.get(name, []) if v != value]


def chips(chosen: Filters, facets: Facets) -> None:
    """The active filters as removable chips above the page: a click drops that value."""
    active = [("search", chosen.search)] if chosen.search else []
    active += [
        (name, value) for name in (*MAIN_FILTERS, *MORE_FILTERS) for value in getattr(chosen, name)
    ]
    if not active:
        return
    with st.container(horizontal=True, gap="small", vertical_alignment="center"):
        st.caption("Filters:", width="content")
        for name, value in active:
            label = "search" if name == "search" else name
            text = facets.runs.get(value, value) if name == "run" else value
            st.button(
                plain(f"{label}: {text}"),
                key=f"_chip_{name}_{value}",
                on_click=_remove,
                args=(name, value),
                icon=":material/close:",
                help="Remove this filter",
            )


def _clear(keys: list[str]) -> None:
    for key in keys:
        st.session_state[key] = "" if key == SEARCH_KEY else []


def sidebar(facets: Facets) -> Filters:
    """Draw the filter widgets in the sidebar and return what they hold.

    A filter whose data holds a single value is left out: it could only hide everything.
    """
    shown = [name for name in (*MAIN_FILTERS, *MORE_FILTERS) if len(facets.options(name)) > 1]
    chosen: dict[str, object] = {}
    with st.sidebar:
        st.subheader("Filters")
        chosen["search"] = st.text_input(
            "Model search",
            key=SEARCH_KEY,
            bind="query-params",
            max_chars=SEARCH_MAX_CHARS,
            placeholder="part of a model id, e.g. resnet",
        ).strip()
        for name in (n for n in MAIN_FILTERS if n in shown):
            chosen[name] = _multiselect(name, facets)
        more = [name for name in MORE_FILTERS if name in shown]
        if more:
            # A bound widget's value is in the session only once it is drawn: a filter that
            # came with the address opens the expander too, so that it is seen.
            active = any(st.session_state.get(name) or url_values(name) for name in more)
            expander = st.expander("More filters", expanded=active, key=MORE_KEY, on_change="rerun")
            # Its widgets are drawn only while it is open or one of them holds a value:
            # a closed one's would be redrawn on every rerun for nothing (seven
            # multiselects over the shipped sweep, the heaviest widgets of a page).
            if expander.open or active:
                with expander:
                    for name in more:
                        chosen[name] = _multiselect(name, facets)
        st.button(
            "Clear filters",
            on_click=_clear,
            args=([SEARCH_KEY, *shown],),
            disabled=not any(chosen.values()),
            width="stretch",
        )
    return Filters(**{name: tuple(v) if name != "search" else v for name, v in chosen.items()})


def _multiselect(name: str, facets: Facets) -> list[str]:
    # No format_func: a bound widget writes the formatted option into the URL, and the
    # URL should carry the raw value (a label or a full run id) that a user can type.
    return st.multiselect(
        LABELS[name],
        facets.options(name),
        key=name,
        bind="query-params",
        placeholder="any",
        help="\n".join(f"- {plain(text)}" for text in facets.runs.values())
        if name == "run"
        else None,
    )
