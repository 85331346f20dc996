"""Config surgery: the default config a forward pass can run, and its tiny version
(two layers, narrow widths, every tied setting kept consistent)."""

from __future__ import annotations

import inspect
import sys
from typing import Any

import transformers
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

from zoo._hf.depth import set_depth
from zoo._hf.families import (
    COMPOSITE_PARTS,
    FAMILY_FIXES,
    FAMILY_REQUIRED,
    FAMILY_TINY,
    HIDDEN_FIELDS,
    KV_HEAD_FIELDS,
    NECK_LISTS,
    NO_DOWNLOAD,
    NOT_WIDTH_NAME_PARTS,
    QUERY_HEAD_FIELDS,
    QUERY_TOKEN_FAMILIES,
    ROPE_SECTION_FIELDS,
    STAGE_DEPTH_FIELDS,
    TINY_KV_HEADS,
    TINY_LAYERS,
    TINY_VOCAB,
    TINY_WHEN_NONE,
    TINY_WIDTHS,
    WIDTH_NAME_PARTS,
)
from zoo._hf.settings import edited, from_dict, is_count, walk


def default_config(config_class):
    """The config's defaults, plus what a forward pass needs and they leave unset or
    unfit: the settings of ``FAMILY_REQUIRED``, those of ``FAMILY_FIXES`` in the config
    and every sub-config of their type, a Q-Former model's placeholder token, and the
    parts of composite models (an EncoderDecoderModel of two BERTs)."""
    model_type = getattr(config_class, "model_type", "")
    if model_type in COMPOSITE_PARTS:
        first, second = (CONFIG_MAPPING[part]() for part in COMPOSITE_PARTS[model_type])
        if model_type == "vision-text-dual-encoder":
            return config_class.from_vision_text_configs(first, second)
        second.is_decoder, second.add_cross_attention = True, True
        return config_class.from_encoder_decoder_configs(first, second)
    config = config_class(**FAMILY_REQUIRED.get(model_type, {}))
    types: set[str] = set()
    walk(config.to_dict(), lambda d: types.add(d.get("model_type", "")))
    if types & (FAMILY_FIXES.keys() | QUERY_TOKEN_FAMILIES.keys()):
        config = edited(config, _fix_family)
    return config


def _fix_family(data: dict[str, Any]) -> None:
    """``FAMILY_FIXES`` merged into a (sub-)config's dict, and a Q-Former model's
    placeholder token set to the last id of its text vocabulary where unset."""
    for key, value in FAMILY_FIXES.get(data.get("model_type", ""), {}).items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    query = QUERY_TOKEN_FAMILIES.get(data.get("model_type", ""))
    vocab = (data.get("text_config") or {}).get("vocab_size")
    if query is not None and data.get(query[0]) is None and is_count(vocab):
        data[query[0]] = vocab - 1


def runnable(data: dict[str, Any], task: str) -> None:
    """Caches off (outputs are tensors only), nothing downloaded, and a padding token
    for classifiers, which look for the last one that is not padding."""
    if "use_cache" in data:
        data["use_cache"] = False
    if task == "causal-lm" and data.get("is_decoder") is False:
        # Encoders with a causal LM head (BertLMHeadModel) run as decoders.
        data["is_decoder"] = True
    for key, value in NO_DOWNLOAD.items():
        if key in data:
            data[key] = value
    vocab = data.get("vocab_size")
    if is_count(vocab) and is_count(data.get("pad_token_id")) and data["pad_token_id"] >= vocab:
        # A padding id outside the vocabulary (Idefics3's default) breaks the embedding.
        data["pad_token_id"] = None
    classifier = task == "sequence-classification" and is_count(vocab)
    if classifier and "pad_token_id" in data and data["pad_token_id"] is None:
        data["pad_token_id"] = vocab - 1


def tiny_config(config, model_class: type | None = None):
    """A small config of the same class: ``TINY_LAYERS`` layers and narrow widths."""
    data = config.to_dict()
    old_widths = _hidden_sizes(data)
    walk(data, _shrink_widths)
    walk(data, lambda d: _shrink_width_aliases(d, old_widths))
    walk(data, lambda d: set_depth(d, lambda n: min(n, TINY_LAYERS)))
    walk(data, _family_settings)
    model_reads = model_class is not None and _code_reads(model_class, "mrope_section")
    walk(data, lambda d: _add_rope_sections(d) if model_reads or _type_reads(d) else None)
    return _match_neck(from_dict(type(config), data))


def _code_reads(model_class: type, setting: str) -> bool:
    return f'"{setting}"' in inspect.getsource(sys.modules[model_class.__module__])


def _type_reads(data: dict[str, Any], setting: str = "mrope_section") -> bool:
    """Whether the base model of a (sub-)config's model type reads ``setting``: a
    composite model builds its parts from their configs (Glm46V's text model is
    Glm4v's)."""
    name = MODEL_MAPPING_NAMES.get(data.get("model_type", ""))
    model_class = getattr(transformers, name, None) if isinstance(name, str) else None
    return model_class is not None and _code_reads(model_class, setting)


def _add_rope_sections(data: dict[str, Any]) -> None:
    """Multimodal rotary embeddings split the rotary half of a head into three sections
    (time, height, width) whose default sizes fit the full-size head only."""
    rope = data.get("rope_parameters")
    # Only a complete set of rotary settings: an empty one is a broken default.
    if not isinstance(rope, dict) or "rope_type" not in rope or "vocab_size" not in data:
        return
    if "mrope_section" in rope:
        return
    partial = rope.get("partial_rotary_factor") or data.get("partial_rotary_factor") or 1.0
    half = int((_head_dim(data) or TINY_WIDTHS["head_dim"]) * partial) // 2
    rope["mrope_section"] = [half // 3 + (i < half % 3) for i in range(3)]


def _hidden_sizes(data: dict[str, Any]) -> set[int]:
    sizes: set[int] = set()
    walk(data, lambda d: sizes.update(d[k] for k in HIDDEN_FIELDS if is_count(d.get(k))))
    return sizes


def _shrink_widths(data: dict[str, Any]) -> None:
    query_heads = next((data[k] for k in QUERY_HEAD_FIELDS if is_count(data.get(k))), None)
    old_head_dim = _head_dim(data)
    old_rope_dim, old_qk_dim = data.get("qk_rope_head_dim"), _qk_head_dim(data)
    for key, value in TINY_WIDTHS.items():
        old = data.get(key)
        if is_count(old) and old > value:
            data[key] = value
        elif isinstance(old, list) and old and all(is_count(v) for v in old):
            # One width per layer (Gemma 3n's intermediate sizes).
            data[key] = [min(v, value) for v in old]
    for key in TINY_WHEN_NONE:
        if key in data and data[key] is None:
            data[key] = TINY_WIDTHS.get(key, 1)
    if "vocab_size" in data and data["vocab_size"] is None:
        data["vocab_size"] = TINY_VOCAB
    if "head_dim" in data and query_heads is not None:
        # Also where it was None ("derive it"): some models fail to derive it.
        data["head_dim"] = TINY_WIDTHS["head_dim"]
    if is_count(old_qk_dim):
        # Multi-head latent attention (DeepSeek): the query/key head is the sum of its
        # rotary and plain parts, and head_dim is one or the other.
        if "qk_head_dim" in data:
            data["qk_head_dim"] = _qk_head_dim(data)
        if is_count(data.get("head_dim")):
            was_rope = old_head_dim == old_rope_dim
            data["head_dim"] = data["qk_rope_head_dim"] if was_rope else _qk_head_dim(data)
    for key in KV_HEAD_FIELDS:
        old = data.get(key)
        if key in data and query_heads is not None:
            grouped = is_count(old) and old < query_heads
            data[key] = TINY_KV_HEADS if grouped else TINY_WIDTHS["num_attention_heads"]
    for key in STAGE_DEPTH_FIELDS:
        if isinstance(data.get(key), list):
            data[key] = [1 for _ in data[key]]
    new_head_dim = _head_dim(data)
    if old_head_dim and new_head_dim and new_head_dim != old_head_dim:
        _scale_rope_sections(data, new_head_dim / old_head_dim)


def _qk_head_dim(data: dict[str, Any]) -> int | None:
    parts = data.get("qk_nope_head_dim"), data.get("qk_rope_head_dim")
    return parts[0] + parts[1] if all(is_count(p) for p in parts) else None


def _head_dim(data: dict[str, Any]) -> int | None:
    if is_count(data.get("head_dim")):
        return data["head_dim"]
    hidden = next((data[k] for k in HIDDEN_FIELDS if is_count(data.get(k))), None)
    heads = next((data[k] for k in QUERY_HEAD_FIELDS if is_count(data.get(k))), None)
    return hidden // heads if hidden and heads else None


def _scale_rope_sections(value: Any, ratio: float) -> None:
    """Multimodal rotary sections (``mrope_section``) must sum to half the head
    dimension: scaled with it, the rounding given to the first sections."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ROPE_SECTION_FIELDS and isinstance(item, list) and item:
                target = max(len(item), round(sum(item) * ratio))
                scaled = [max(1, int(v * ratio)) for v in item]
                for i in range(target - sum(scaled)):
                    scaled[i % len(scaled)] += 1
                value[key] = scaled
            elif isinstance(item, dict) and "model_type" not in item:
                _scale_rope_sections(item, ratio)


def _shrink_width_aliases(data: dict[str, Any], old_widths: set[int]) -> None:
    """Settings under other names that repeat a hidden size (``pooler_hidden_size``,
    ``projection_dim``, RT-DETR's ``decoder_in_channels`` list) follow it down."""
    tiny = TINY_WIDTHS["hidden_size"]

    def is_width(value: Any) -> bool:
        return is_count(value) and value in old_widths and value > tiny

    for key, value in list(data.items()):
        named_as_width = (
            key not in TINY_WIDTHS
            and any(part in key for part in WIDTH_NAME_PARTS)
            and not any(part in key for part in NOT_WIDTH_NAME_PARTS)
        )
        if not named_as_width:
            continue
        if is_width(value):
            data[key] = tiny
        elif isinstance(value, list) and value and all(is_width(v) for v in value):
            data[key] = [tiny for _ in value]


def _match_neck(config):
    """A DPT-style neck (DPT, Depth Anything, ZoeDepth, TIPS) reassembles one feature
    map per backbone output, so its per-output lists (``NECK_LISTS``) are cut to the
    outputs a shallower backbone has left (two layers keep one or two of four; the
    backbone's config settles which only once it is made, hence on the config)."""
    outputs = getattr(config, "backbone_out_indices", None)
    backbone = getattr(config, "backbone_config", None)
    if outputs is None and backbone is not None:
        outputs = getattr(backbone, "out_indices", None)
    necks = getattr(config, NECK_LISTS[0], None)
    if outputs is not None and isinstance(necks, list) and 0 < len(outputs) < len(necks):
        for key in NECK_LISTS:
            value = getattr(config, key, None)
            if isinstance(value, list):
                setattr(config, key, value[: len(outputs)])
    return config


def _family_settings(data: dict[str, Any]) -> None:
    data.update(FAMILY_TINY.get(data.get("model_type", ""), {}))
