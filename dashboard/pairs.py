"""Two configs of the matrix set side by side, model by model (the Config vs config page).

Pure functions of the frame ``queries.CONFIG_PAIR`` returns (one row per model, the A
and B columns of each), so tests need no Streamlit.
"""

from __future__ import annotations

import math

import pandas as pd

from dashboard import status

CROSSING_ORDER = (status.PASSED, status.FAILED, status.UNSUPPORTED_HERE, status.NOT_RUN)


def categories(pair: pd.DataFrame, side: str) -> pd.Series:
    """Each model's category in config ``side`` ("a" or "b"); no cell: not run."""
    return pair[f"{side}_status"].map(
        lambda value: status.category(None if pd.isna(value) else value)
    )


def crossings(pair: pd.DataFrame) -> pd.DataFrame:
    """Models counted by their category in A (rows) and in B (columns)."""
    table = pd.crosstab(categories(pair, "a"), categories(pair, "b"))
    return table.reindex(index=CROSSING_ORDER, columns=CROSSING_ORDER, fill_value=0)


def shared_passing(pair: pd.DataFrame) -> pd.DataFrame:
    """The models that pass with a speedup in both configs."""
    both = (pair["a_status"] == "pass") & (pair["b_status"] == "pass")
    timed = (pair["a_speedup"] > 0) & (pair["b_speedup"] > 0)
    return pair[both & timed]


def scoped_apart(shared: pd.DataFrame) -> pd.Series:
    """Which of ``shared``'s models were timed inside one autocast region in one config
    and per call in the other: their B / A ratio holds the measurement's change too."""
    if "a_one_region" not in shared:
        return pd.Series(False, index=shared.index)
    return shared["a_one_region"].fillna(False) != shared["b_one_region"].fillna(False)


def geomean_ratio(pair: pd.DataFrame) -> float | None:
    """Geomean of B's speedup over A's, over the models passing in both (None: none)."""
    shared = shared_passing(pair)
    if shared.empty:
        return None
    logs = (shared["b_speedup"] / shared["a_speedup"]).map(math.log)
    return math.exp(logs.mean())
