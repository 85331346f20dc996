"""The depth cut: a full-size model above its parameter limit built with fewer layers,
every list and setting that describes the layers cut to match."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from zoo._hf.families import (
    BACKBONE_STAGE_FIELDS,
    LAYER_FIELDS,
    LAYER_INDEX_LISTS,
    PER_LAYER_DICTS,
    RUN_LENGTH_LAYER_LISTS,
    SUB_LAYER_COUNTS,
)
from zoo._hf.hub import offline
from zoo._hf.settings import edited, is_count, walk


def set_depth(data: dict[str, Any], depth: Callable[[int], int]) -> None:
    """Every layer count of one config dict set to ``depth(old)``, and what describes
    each layer cut to match: lists with one entry per layer (``layer_types``), settings
    keyed by layer, and backbone stages (recomputed from the new depth)."""
    if isinstance(data.get("depths"), list):
        # Stage-based models (Swin) count stages in num_layers: depth is per stage.
        return
    for key in LAYER_FIELDS:
        old = data.get(key)
        if not is_count(old) or old <= 0:
            continue
        new = depth(old)
        data[key] = new
        if new >= old:
            continue
        for name, value in list(data.items()):
            if isinstance(value, list) and len(value) == old:
                data[name] = _first_of_each_kind(value, new)
            elif _is_layer_index_list(name, value, old):
                # Which layers are special (Zamba2's hybrid layers): each maps to the
                # layer at the same depth fraction, so none disappears.
                data[name] = sorted({index * new // old for index in value})
            elif name in PER_LAYER_DICTS and isinstance(value, dict):
                data[name] = {k: v for k, v in value.items() if int(k) < new}
            elif name in SUB_LAYER_COUNTS and is_count(value):
                data[name] = value * new // old
            elif name in RUN_LENGTH_LAYER_LISTS and isinstance(value, list):
                data[name] = _cut_runs(value, new)
        for name in BACKBONE_STAGE_FIELDS:
            data.pop(name, None)


def _cut_runs(runs: list[Any], layers: int) -> list[Any]:
    """The first ``layers`` layers of a run-length pattern, one run per layer."""
    kinds = [kind for pattern, repeats in runs for _ in range(repeats) for kind in pattern]
    return [[[kind], 1] for kind in kinds[:layers]]


def _is_layer_index_list(name: str, value: Any, layers: int) -> bool:
    return (
        name in LAYER_INDEX_LISTS
        and isinstance(value, list)
        and all(is_count(v) and 0 <= v < layers for v in value)
    )


def _first_of_each_kind(values: list[Any], count: int) -> list[Any]:
    """The first ``count`` entries, with the last ones replaced so that every kind of
    entry is still there: two layers of Gemma 3's five sliding, one full pattern are
    one sliding and one full."""
    kept = values[:count]
    missing = [
        v for v in dict.fromkeys(_hashable(v) for v in values) if v not in map(_hashable, kept)
    ]
    for i, kind in enumerate(missing[: count - 1]):
        kept[count - 1 - i] = next(v for v in values if _hashable(v) == kind)
    return kept


def _hashable(value: Any) -> Any:
    return repr(value) if isinstance(value, list | dict) else value


def _layer_counts(data: dict[str, Any]) -> list[int]:
    counts: list[int] = []
    walk(data, lambda d: counts.extend(d[k] for k in LAYER_FIELDS if is_count(d.get(k))))
    return counts


# How many layers above the fewest that keep every kind a cut tries when the model refuses
# to build there (Zamba's second hybrid layer comes at its eighth).
MORE_LAYERS_TRIED = 8


def count_params(model_class: type, config) -> int:
    """Parameters of ``model_class(config)``, built on the meta device (nothing allocated)."""
    with offline(), torch.device("meta"):
        model = model_class(config)
    return sum(p.numel() for p in model.parameters())


def fit_depth(model_class: type, config, max_params: int):
    """``config`` with every layer count cut by the same factor until the model has at
    most ``max_params`` parameters, and a note saying so (``None`` when nothing was cut)."""
    params = count_params(model_class, config)
    data = config.to_dict()
    deepest = max(_layer_counts(data), default=0)
    # The fewest layers that keep every kind of layer (OLMo-Hybrid's one full-attention
    # layer in four: a config without one is rejected, and would be another model).
    fewest = min(deepest, _layer_kinds(data))
    if params <= max_params or deepest <= fewest:
        return config, None

    def at_depth(layers: int):
        return edited(config, lambda d: set_depth(d, lambda n: max(1, n * layers // deepest)))

    # The shallowest config the model builds from: some refuse the fewest layers that
    # keep every kind (Zamba ties its hybrid layers to the first one, and raises when
    # one hybrid layer has none to tie).
    kinds = fewest
    fewest, shallowest = _shallowest_built(model_class, at_depth, fewest, deepest)
    # Parameters grow linearly with depth: two counts give the cost of a layer.
    per_layer = (params - shallowest) / (deepest - fewest)
    layers = fewest + int((max_params - shallowest) // per_layer) if per_layer > 0 else fewest
    layers = max(fewest, min(layers, deepest - 1))
    cut_config = at_depth(layers)
    cut_params = count_params(model_class, cut_config)
    while cut_params > max_params and layers > fewest:
        layers -= 1
        cut_config = at_depth(layers)
        cut_params = count_params(model_class, cut_config)
    limit = human_count(max_params)
    note = (
        f"depth cut from {deepest} to {layers} layers to fit {limit} params "
        f"({human_count(params)} -> {human_count(cut_params)})"
    )
    if cut_params > max_params:
        if fewest > kinds:
            fewest_text = f"{fewest} layers, the fewest the model builds with"
        elif fewest == 1:
            fewest_text = "one layer"
        else:
            fewest_text = f"{fewest} layers, the fewest that keep every kind"
        note += f"; still above {limit} at {fewest_text}"
    return cut_config, note


def _shallowest_built(
    model_class: type, at_depth: Callable[[int], Any], fewest: int, deepest: int
) -> tuple[int, int]:
    """The fewest layers from ``fewest`` up (at most ``MORE_LAYERS_TRIED`` more, below
    ``deepest``) at which ``model_class`` builds, and its parameters there; the first
    refusal is raised where none builds (a config broken at every depth costs that many
    builds on the meta device more)."""
    first_error: Exception | None = None
    for layers in range(fewest, min(deepest, fewest + MORE_LAYERS_TRIED + 1)):
        try:
            return layers, count_params(model_class, at_depth(layers))
        except Exception as error:  # a config check raises anything
            first_error = first_error or error
    assert first_error is not None
    raise first_error


def _layer_kinds(data: dict[str, Any]) -> int:
    """The most kinds of layer one per-layer list of names in the config gives
    (``layer_types``: sliding and full attention are two), 1 where none does."""
    kinds = [1]

    def visit(d: dict[str, Any]) -> None:
        counts = {d[k] for k in LAYER_FIELDS if is_count(d.get(k)) and d[k] > 1}
        for value in d.values():
            # Named kinds: per-layer numbers (widths, flags, indices) are settings.
            if (
                isinstance(value, list)
                and len(value) in counts
                and all(isinstance(v, str) for v in value)
            ):
                kinds.append(len(set(value)))

    walk(data, visit)
    return max(kinds)


def human_count(count: int) -> str:
    for unit, size in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if count >= size:
            return f"{count / size:.3g}{unit}"
    return str(count)
