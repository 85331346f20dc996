"""A config as its dict: walking its sub-configs, editing it and building it back, and
reading a setting wherever the config or a sub-config keeps it."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator
from typing import Any

from transformers.models.auto.configuration_auto import CONFIG_MAPPING

from zoo._hf.families import BACKBONE_STAGE_FIELDS, LABEL_SETTINGS

Visit = Callable[[dict[str, Any]], None]


def edited(config, *visits: Visit):
    """A new config of the same class, its dict (and each sub-config's) edited in place
    by ``visits``, one after the other."""
    data = config.to_dict()
    for visit in visits:
        walk(data, visit)
    return from_dict(type(config), data)


def walk(data: dict[str, Any], visit: Visit) -> None:
    visit(data)
    for value in data.values():
        if isinstance(value, dict) and "model_type" in value:
            walk(value, visit)


def from_dict(config_class, data: dict[str, Any]):
    _drop_derived(config_class, data)
    return config_class.from_dict(data)


def _drop_derived(config_class, data: dict[str, Any]) -> None:
    """Drop what the config derives from other settings (Zamba2's ``mamba_headdim``):
    given back, it would come back stale rather than be derived again from the new
    settings. Derived means not a field, and set by the class's own defaults (extra
    settings passed in, like a timm wrapper's ``hidden_size``, stay). Sub-configs
    alike, each by its own class."""
    for key in _derived_settings(config_class) & set(data):
        del data[key]
    for name, sub_class in (getattr(config_class, "sub_configs", None) or {}).items():
        sub = data.get(name)
        if not isinstance(sub, dict):
            continue
        if not _field_names(sub_class):
            # AutoConfig: the class is the one the dict's model type names.
            sub_class = _config_class(sub.get("model_type"))
        if sub_class is not None:
            _drop_derived(sub_class, sub)


@functools.cache
def _derived_settings(config_class) -> frozenset[str]:
    fields = _field_names(config_class)
    try:
        defaults = config_class().to_dict()
    except Exception:
        return frozenset()
    # Backbone stages are set by the model that owns the backbone, and timm wrappers
    # take their labels as extra settings: neither is derived.
    kept = fields | {"model_type", *BACKBONE_STAGE_FIELDS, *LABEL_SETTINGS}
    return frozenset(key for key in defaults if fields and key not in kept)


def _config_class(model_type: str | None):
    # The mapping imports lazily in ``[]``; its ``get`` is the plain dict's, which doesn't.
    try:
        return CONFIG_MAPPING[model_type]
    except KeyError:
        return None


def _field_names(config_class) -> set[str]:
    if not dataclasses.is_dataclass(config_class):
        return set()
    return {field.name for field in dataclasses.fields(config_class)}


def is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def sub_configs(config) -> list[Any]:
    subs = []
    for name in getattr(config, "sub_configs", None) or {}:
        sub = getattr(config, name, None)
        if sub is not None and hasattr(sub, "to_dict"):
            subs.append(sub)
    return subs


def special_ids(config) -> set[int]:
    ids: set[int] = set()
    for cfg in (config, *sub_configs(config)):
        for key, value in cfg.to_dict().items():
            if key.endswith(("_token_id", "_token_index", "_token_ids")):
                values = value if isinstance(value, list) else [value]
                ids.update(v for v in values if is_count(v))
    return ids


def has_setting(config, *names: str) -> bool:
    """Whether the config or a sub-config has one of ``names``, set or not."""
    return any(hasattr(cfg, name) for cfg in (config, *sub_configs(config)) for name in names)


def get_setting(config, *names: str, default: Any = None) -> Any:
    """The first of ``names`` that the config sets, or else its sub-configs, nearest
    first."""
    for cfg in nearest_first(config):
        for name in names:
            value = getattr(cfg, name, None)
            if value is not None:
                return value
    return default


def nearest_first(config) -> Iterator[Any]:
    """The config, then its sub-configs, theirs after them (breadth first)."""
    queue = [config]
    while queue:
        cfg = queue.pop(0)
        yield cfg
        queue += sub_configs(cfg)


def timm_input_size(config) -> tuple[int, int] | None:
    """The image size of a timm model a config wraps (``timm_wrapper``, Perception
    Encoder's video tower): its architecture's default input, from timm's own table
    (nothing downloaded)."""
    for cfg in nearest_first(config):
        architecture = getattr(cfg, "architecture", None)
        if getattr(cfg, "model_type", "") == "timm_wrapper" and isinstance(architecture, str):
            from timm.models import get_pretrained_cfg

            pretrained = get_pretrained_cfg(architecture)
            if pretrained is not None and pretrained.input_size:
                height, width = pretrained.input_size[-2:]
                return height, width
    return None
