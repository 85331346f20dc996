"""Building transformers models from their configs, and making their inputs.

Imported only to build: it imports torch and transformers at the top.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import huggingface_hub
import torch
import transformers
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

from zoo.spec import DEFAULT_MAX_PARAMS, ModelSpec

SIZES = ("tiny", "full")
DEFAULT_BATCH_SIZE = 2
DEFAULT_SEQ_LEN = 16
INPUT_SEED = 0
INIT_SEED = 0

TINY_LAYERS = 2
# The largest tiny models are embedding tables (RemBERT's 250k x 1664 output embedding).
TINY_MAX_PARAMS = 2_000_000_000
# Settings of a tiny model, under every name transformers' configs give them. Only the
# names a config has are set, and only to shrink them.
TINY_WIDTHS = {
    "hidden_size": 64,
    "d_model": 64,
    "n_embd": 64,
    "intermediate_size": 128,
    "ffn_dim": 128,
    "encoder_ffn_dim": 128,
    "decoder_ffn_dim": 128,
    "d_ff": 128,
    "n_inner": 128,
    "num_attention_heads": 4,
    "num_heads": 4,
    "n_head": 4,
    "n_heads": 4,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "head_dim": 16,
    "d_kv": 16,
    "d_head": 16,
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 64,
    "shared_expert_intermediate_size": 64,
    "n_group": 1,
    "topk_group": 1,
    "n_groups": 1,
    "mamba_n_groups": 1,
    "kv_lora_rank": 32,
    "q_lora_rank": 32,
    "embedding_size": 64,
    "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 16,
    "v_head_dim": 16,
}
QUERY_HEAD_FIELDS = ("num_attention_heads", "num_heads", "n_head", "n_heads")
KV_HEAD_FIELDS = ("num_key_value_heads", "num_kv_heads", "n_kv_heads")
# A tiny model keeps grouped-query attention when its default has it.
TINY_KV_HEADS = 2
# Depth, under its many names; a config may have several (encoder and decoder).
LAYER_FIELDS = (
    "num_hidden_layers",
    "num_layers",
    "n_layer",
    "n_layers",
    "encoder_layers",
    "decoder_layers",
    "num_encoder_layers",
    "num_decoder_layers",
    "depth",
)
# Per-stage depths of hierarchical vision models: one block per stage when tiny.
STAGE_DEPTH_FIELDS = ("depths",)
HIDDEN_FIELDS = ("hidden_size", "d_model", "n_embd")
# Other settings that hold a hidden size, by the parts of their names, and settings
# that may equal one by chance.
WIDTH_NAME_PARTS = ("hidden", "_dim", "embed", "proj", "channels", "pooler")
NOT_WIDTH_NAME_PARTS = ("position", "vocab", "max_", "window", "image", "patch", "kernel")
ROPE_SECTION_FIELDS = ("mrope_section",)
# Settings keyed by layer index (Gemma 4's per-layer head sizes).
PER_LAYER_DICTS = ("per_layer_config",)
# Which layers are of some kind, by index: each mapped to the same depth fraction.
LAYER_INDEX_LISTS = (
    "hybrid_layer_ids",
    "cross_attention_layers",
    "deepstack_visual_indexes",
    "fullatt_block_indexes",
    "global_attn_indexes",
    "intermediate_layers_indices",
    "window_block_indexes",
    "window_block_indices",
    "backbone_out_indices",
    "look_ahead_layers",
    "look_backward_layers",
    "mlp_only_layers",
)
# How many of the layers are of some kind: scaled with the depth.
# Layer kinds as runs of a pattern, [[kinds, repeats], ...] (GPT-Neo's attention_types).
RUN_LENGTH_LAYER_LISTS = ("attention_types",)
SUB_LAYER_COUNTS = ("num_kv_shared_layers", "first_k_dense_replace", "max_window_layers")
# Backbone stages named after layers; the config recomputes them from the depth.
BACKBONE_STAGE_FIELDS = ("stage_names", "out_features", "out_indices")
LABEL_SETTINGS = ("num_labels", "num_classes", "label_names", "id2label", "label2id")
# Tiny settings of families whose widths are tied in ways the generic rules miss.
FAMILY_TINY: dict[str, dict[str, Any]] = {
    # Mamba heads times head size must equal expand times the hidden size.
    "mamba2": {"head_dim": 32},
    "bamba": {"mamba_n_heads": 4, "mamba_d_head": 32},
    "granitemoehybrid": {"mamba_n_heads": 4, "mamba_d_head": 32},
    # Rotary dimensions of the query/key heads.
    "codegen": {"rotary_dim": 8},
    "gptj": {"rotary_dim": 8},
    # Layers given as (pattern, repeats); two layers are one repeat of the pair.
    "gpt_neo": {"attention_types": [[["global", "local"], 1]]},
    # Axial position embeddings are split across two axes and sum to the hidden size.
    "reformer": {"axial_pos_embds_dim": [32, 32]},
    # Prompt and image features merge after the first layer, read out after the last.
    "seggpt": {"merge_index": 0, "intermediate_hidden_state_indices": [1]},
    # Positional features are half the prompt encoder's width.
    "sam_vision_model": {"num_pos_feats": 32},
    "sam_hq_vision_model": {"num_pos_feats": 32},
    # Four coordinate and two shape embeddings make up the hidden size.
    "layoutlmv3": {"coordinate_size": 10, "shape_size": 12},
    # A shared transformer is tied across the hybrid layers: two of them.
    "zamba": {
        "layers_block_type": ["hybrid", "hybrid"],
        "attention_hidden_size": 128,
        "attention_head_dim": 32,
    },
    # The sparse attention layers' indexer is unset by default.
    "qwen4_exp_text": {
        "indexer_n_heads": 4,
        "indexer_kv_heads": 1,
        "indexer_head_dim": 16,
        "indexer_budget": 8,
        "indexer_compress_ratio": 4,
    },
    # Swin-style audio encoder: the widest stage is 8 times the patch embedding.
    "clap_audio_model": {"patch_embeds_hidden_size": 8},
    # Liquid's MoE default leaves its layer kinds unset: one convolution, one attention.
    "lfm2_moe": {"layer_types": ["conv", "full_attention"]},
    # The upsampling convolution is depthwise: one group per channel.
    "mimi": {"upsample_groups": 64},
    # One cross-attention head: the Fourier and convolutional preprocessors make
    # channel counts (261) that few head counts divide.
    "perceiver": {"d_latents": 64, "num_self_attention_heads": 4, "num_cross_attention_heads": 1},
    # The default protein config sets no special tokens, which masking needs.
    "esm": {"pad_token_id": 1, "mask_token_id": 2},
}
# Settings that a forward pass needs and the default config leaves unset, at any size.
FAMILY_REQUIRED: dict[str, dict[str, Any]] = {
    "xmod": {"default_language": "en_XX"},
    # Time-series transformers: how far to forecast, and one time feature per step.
    "time_series_transformer": {"prediction_length": 8, "num_time_features": 1},
    "informer": {"prediction_length": 8, "num_time_features": 1},
    "autoformer": {"prediction_length": 8, "num_time_features": 1},
}
# Composite models whose default config has no parts: the model types they get.
COMPOSITE_PARTS = {
    "encoder-decoder": ("bert", "bert"),
    "speech-encoder-decoder": ("wav2vec2", "bert"),
    "vision-text-dual-encoder": ("vit", "bert"),
}
# Counts that some default configs leave None though the model needs them; a tiny
# model gets its tiny value.
TINY_WHEN_NONE = (
    "num_experts_per_tok",
    "n_routed_experts",
    "n_shared_experts",
    "moe_intermediate_size",
)
TINY_VOCAB = 1024
# Settings that would download weights when true.
NO_DOWNLOAD = {"use_pretrained_backbone": False}

# Settings that only layout models (LayoutLM, Bros) have: they take word boxes.
LAYOUT_SETTINGS = ("max_2d_position_embeddings", "dim_bbox")
INPUT_GROUPS = {
    "spatial_shapes": ("pixel_values", "pixel_attention_mask"),
    "visual_feats": ("visual_pos",),
    "states": ("actions", "returns_to_go", "timesteps", "attention_mask"),
}
# Families whose inputs the config alone does not describe, by model type.
IMAGE_LIST_FAMILIES = ("idefics",)  # pixels per sample: a list of images
FRAMES_NOT_VIDEO_FAMILIES = ("perceiver",)  # num_frames of an optional video decoder
STACKED_IMAGE_FAMILIES = ("seggpt",)  # input and prompt stacked make the config's height
# Token ids per codebook, stacked along the batch (MusicGen's decoder).
CODEBOOK_BATCH_FAMILIES = ("musicgen_decoder", "musicgen_melody_decoder")
WAVEFORM_CHANNEL_FAMILIES = ("pe_audio", "pe_audio_video", "xcodec", "xcodec2", "neucodec")
FRAMES_FIRST_FAMILIES = ("univnet",)  # mel features as (frames, mel bins)
SPECTROGRAM_IMAGE_FAMILIES = ("clap",)  # mel features as a one-channel image

Visit = Callable[[dict[str, Any]], None]


# -- building ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Recipe:
    """What building and making inputs share: the class, its config, its inputs."""

    model_class: type
    config: Any
    input_names: tuple[str, ...]


class KeywordModel(torch.nn.Module):
    """A transformers model called with positional tensors, passed on by keyword, that
    returns the tensors of its output as a flat tuple."""

    def __init__(
        self, model: torch.nn.Module, input_names: tuple[str, ...], notes: tuple[str, ...] = ()
    ) -> None:
        super().__init__()
        self.model = model
        self.input_names = input_names
        # Read by the runner into the cell's notes (a depth cut, for one).
        self.build_notes = notes

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        output = self.model(**dict(zip(self.input_names, tensors, strict=True)))
        return tuple(flat_tensors(output))


def flat_tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if hasattr(value, "to_tuple"):
        value = value.to_tuple()
    if isinstance(value, tuple | list):
        return [t for item in value for t in flat_tensors(item)]
    return []


def build(spec: ModelSpec) -> KeywordModel:
    recipe = recipe_for(spec)
    config, notes = recipe.config, []
    if spec.size == "full":
        config, note = fit_depth(recipe.model_class, config, spec.max_params or DEFAULT_MAX_PARAMS)
        if note:
            notes.append(note)
    else:
        params = count_params(recipe.model_class, config)
        if params > TINY_MAX_PARAMS:
            # A width the tiny settings do not know (Inkling's vision tower) left the
            # model huge: an error that says so beats a worker killed for memory.
            raise RuntimeError(
                f"the tiny config of {spec.name} still has {_human(params)} parameters "
                f"(limit {_human(TINY_MAX_PARAMS)}): a setting of this family is not shrunk"
            )
    device = torch.device(spec.device or "cpu")
    # Constructed on its device (weights initialized there, never on the host first),
    # from a fixed seed so that every run measures the same weights.
    forked = [device] if device.type == "cuda" else []
    with offline(), torch.random.fork_rng(devices=forked), device:
        torch.manual_seed(INIT_SEED)
        model = recipe.model_class(config)
    return KeywordModel(model, recipe.input_names, tuple(notes))


@contextlib.contextmanager
def offline():
    """The Hugging Face Hub unreachable, whatever the environment says: a default config
    that fetches another from the Hub (EdgeTAM's backbone) fails instead of downloading.
    huggingface_hub and transformers read this flag at every request."""
    saved = huggingface_hub.constants.HF_HUB_OFFLINE
    huggingface_hub.constants.HF_HUB_OFFLINE = True
    try:
        yield
    except OSError as exc:
        raise RuntimeError(
            f"the default config needs files from the Hugging Face Hub, and zoo-matrix "
            f"downloads nothing: {exc}"
        ) from exc
    finally:
        huggingface_hub.constants.HF_HUB_OFFLINE = saved


@functools.cache
def recipe_for(spec: ModelSpec) -> Recipe:
    with offline():
        return _recipe(spec)


def _recipe(spec: ModelSpec) -> Recipe:
    try:
        model_class = getattr(transformers, spec.name)
    except (AttributeError, ImportError) as exc:
        raise RuntimeError(f"transformers cannot import {spec.name}: {exc}") from exc
    config_class = getattr(model_class, "config_class", None)
    if config_class is None:
        raise RuntimeError(f"{spec.name} names no config class to build it from")
    config = default_config(config_class)
    if spec.size == "tiny":
        config = tiny_config(config, model_class)
    elif spec.size != "full":
        raise ValueError(f"unknown size {spec.size!r}; choose one of: {', '.join(SIZES)}")
    config = _edited(config, lambda d: _runnable(d, spec.task))
    return Recipe(model_class, config, input_names(model_class, config))


def default_config(config_class):
    """The config's defaults, plus what a forward pass needs and they leave unset: the
    settings of ``FAMILY_REQUIRED``, and the parts of composite models (an
    EncoderDecoderModel of two BERTs)."""
    model_type = getattr(config_class, "model_type", "")
    if model_type in COMPOSITE_PARTS:
        first, second = (CONFIG_MAPPING[part]() for part in COMPOSITE_PARTS[model_type])
        if model_type == "vision-text-dual-encoder":
            return config_class.from_vision_text_configs(first, second)
        second.is_decoder, second.add_cross_attention = True, True
        return config_class.from_encoder_decoder_configs(first, second)
    return config_class(**FAMILY_REQUIRED.get(model_type, {}))


def _edited(config, *visits: Visit):
    """A new config of the same class, its dict (and each sub-config's) edited in place
    by ``visits``, one after the other."""
    data = config.to_dict()
    for visit in visits:
        _walk(data, visit)
    return _from_dict(type(config), data)


def _walk(data: dict[str, Any], visit: Visit) -> None:
    visit(data)
    for value in data.values():
        if isinstance(value, dict) and "model_type" in value:
            _walk(value, visit)


def _runnable(data: dict[str, Any], task: str) -> None:
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
    if _is_count(vocab) and _is_count(data.get("pad_token_id")) and data["pad_token_id"] >= vocab:
        # A padding id outside the vocabulary (Idefics3's default) breaks the embedding.
        data["pad_token_id"] = None
    classifier = task == "sequence-classification" and _is_count(vocab)
    if classifier and "pad_token_id" in data and data["pad_token_id"] is None:
        data["pad_token_id"] = vocab - 1


def tiny_config(config, model_class: type | None = None):
    """A small config of the same class: ``TINY_LAYERS`` layers and narrow widths."""
    data = config.to_dict()
    old_widths = _hidden_sizes(data)
    _walk(data, _shrink_widths)
    _walk(data, lambda d: _shrink_width_aliases(d, old_widths))
    _walk(data, lambda d: _set_depth(d, lambda n: min(n, TINY_LAYERS)))
    _walk(data, _family_settings)
    model_reads = model_class is not None and _code_reads(model_class, "mrope_section")
    _walk(data, lambda d: _add_rope_sections(d) if model_reads or _type_reads(d) else None)
    return _from_dict(type(config), data)


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


def _from_dict(config_class, data: dict[str, Any]):
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


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _hidden_sizes(data: dict[str, Any]) -> set[int]:
    sizes: set[int] = set()
    _walk(data, lambda d: sizes.update(d[k] for k in HIDDEN_FIELDS if _is_count(d.get(k))))
    return sizes


def _shrink_widths(data: dict[str, Any]) -> None:
    query_heads = next((data[k] for k in QUERY_HEAD_FIELDS if _is_count(data.get(k))), None)
    old_head_dim = _head_dim(data)
    old_rope_dim, old_qk_dim = data.get("qk_rope_head_dim"), _qk_head_dim(data)
    for key, value in TINY_WIDTHS.items():
        old = data.get(key)
        if _is_count(old) and old > value:
            data[key] = value
        elif isinstance(old, list) and old and all(_is_count(v) for v in old):
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
    if _is_count(old_qk_dim):
        # Multi-head latent attention (DeepSeek): the query/key head is the sum of its
        # rotary and plain parts, and head_dim is one or the other.
        if "qk_head_dim" in data:
            data["qk_head_dim"] = _qk_head_dim(data)
        if _is_count(data.get("head_dim")):
            was_rope = old_head_dim == old_rope_dim
            data["head_dim"] = data["qk_rope_head_dim"] if was_rope else _qk_head_dim(data)
    for key in KV_HEAD_FIELDS:
        old = data.get(key)
        if key in data and query_heads is not None:
            grouped = _is_count(old) and old < query_heads
            data[key] = TINY_KV_HEADS if grouped else TINY_WIDTHS["num_attention_heads"]
    for key in STAGE_DEPTH_FIELDS:
        if isinstance(data.get(key), list):
            data[key] = [1 for _ in data[key]]
    new_head_dim = _head_dim(data)
    if old_head_dim and new_head_dim and new_head_dim != old_head_dim:
        _scale_rope_sections(data, new_head_dim / old_head_dim)


def _qk_head_dim(data: dict[str, Any]) -> int | None:
    parts = data.get("qk_nope_head_dim"), data.get("qk_rope_head_dim")
    return parts[0] + parts[1] if all(_is_count(p) for p in parts) else None


def _head_dim(data: dict[str, Any]) -> int | None:
    if _is_count(data.get("head_dim")):
        return data["head_dim"]
    hidden = next((data[k] for k in HIDDEN_FIELDS if _is_count(data.get(k))), None)
    heads = next((data[k] for k in QUERY_HEAD_FIELDS if _is_count(data.get(k))), None)
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
        return _is_count(value) and value in old_widths and value > tiny

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


def _family_settings(data: dict[str, Any]) -> None:
    data.update(FAMILY_TINY.get(data.get("model_type", ""), {}))


def _set_depth(data: dict[str, Any], depth: Callable[[int], int]) -> None:
    """Every layer count of one config dict set to ``depth(old)``, and what describes
    each layer cut to match: lists with one entry per layer (``layer_types``), settings
    keyed by layer, and backbone stages (recomputed from the new depth)."""
    if isinstance(data.get("depths"), list):
        # Stage-based models (Swin) count stages in num_layers: depth is per stage.
        return
    for key in LAYER_FIELDS:
        old = data.get(key)
        if not _is_count(old) or old <= 0:
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
            elif name in SUB_LAYER_COUNTS and _is_count(value):
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
        and all(_is_count(v) and 0 <= v < layers for v in value)
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
    _walk(data, lambda d: counts.extend(d[k] for k in LAYER_FIELDS if _is_count(d.get(k))))
    return counts


def count_params(model_class: type, config) -> int:
    """Parameters of ``model_class(config)``, built on the meta device (nothing allocated)."""
    with offline(), torch.device("meta"):
        model = model_class(config)
    return sum(p.numel() for p in model.parameters())


def fit_depth(model_class: type, config, max_params: int):
    """``config`` with every layer count cut by the same factor until the model has at
    most ``max_params`` parameters, and a note saying so (``None`` when nothing was cut)."""
    params = count_params(model_class, config)
    deepest = max(_layer_counts(config.to_dict()), default=0)
    if params <= max_params or deepest <= 1:
        return config, None

    def at_depth(layers: int):
        return _edited(config, lambda d: _set_depth(d, lambda n: max(1, n * layers // deepest)))

    # Parameters grow linearly with depth: two counts give the cost of a layer.
    shallowest = count_params(model_class, at_depth(1))
    per_layer = (params - shallowest) / (deepest - 1)
    layers = 1 + int((max_params - shallowest) // per_layer) if per_layer > 0 else 1
    layers = max(1, min(layers, deepest - 1))
    cut_config = at_depth(layers)
    cut_params = count_params(model_class, cut_config)
    while cut_params > max_params and layers > 1:
        layers -= 1
        cut_config = at_depth(layers)
        cut_params = count_params(model_class, cut_config)
    limit = _human(max_params)
    note = (
        f"depth cut from {deepest} to {layers} layers to fit {limit} params "
        f"({_human(params)} -> {_human(cut_params)})"
    )
    if cut_params > max_params:
        note += f"; still above {limit} at one layer"
    return cut_config, note


def _human(count: int) -> str:
    for unit, size in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if count >= size:
            return f"{count / size:.3g}{unit}"
    return str(count)


# -- inputs ------------------------------------------------------------------------------


def input_names(model_class: type, config) -> tuple[str, ...]:
    """The keywords the model is fed, in the order of ``example_inputs``: its main input,
    the inputs it requires, an attention mask with token ids, decoder ids for an
    encoder-decoder, and both tokens and pixels for a dual encoder (CLIP). Models that
    place image features at image tokens (LLaVA) get tokens only."""
    params = inspect.signature(model_class.forward).parameters
    main = getattr(model_class, "main_input_name", "input_ids")
    required = [name for name, p in params.items() if p.default is inspect.Parameter.empty]
    # Some towers inherit a main input name their forward does not take.
    names = [main] if main in params else []
    names += [name for name in required if name in InputMaker.KINDS]
    if "grid_thw" in required and "hidden_states" in required:
        names.insert(0, "hidden_states")
    image_tokens = _has_setting(config, "image_token_id", "image_token_index")
    if "input_ids" in params and "pixel_values" in params and not image_tokens:
        names += ["input_ids", "pixel_values"]
    audio_tokens = _has_setting(config, "audio_token_id", "audio_token_index")
    # Audio-text dual encoders (CLAP) have an audio config; Pop2Piano's input_features
    # are its token embeddings.
    dual_audio = hasattr(config, "audio_config") and not audio_tokens
    if "input_ids" in names and "input_features" in params and dual_audio:
        names.append("input_features")
    if "input_ids" in names and "bbox" in params and _setting(config, *LAYOUT_SETTINGS):
        names.append("bbox")
    if "input_features" in names and "input_features_mask" in params:
        names.append("input_features_mask")
    if "pixel_values" in names and getattr(config, "model_type", "") in IMAGE_LIST_FAMILIES:
        names.append("image_attention_mask")
    # Inputs that come together: patches with their shapes (SigLIP 2), region features
    # with their boxes (LXMERT), a trajectory (Decision Transformer).
    for first, companions in INPUT_GROUPS.items():
        if first in params:
            names += [first, *companions]
    if "input_ids" in names and "attention_mask" in params:
        names.append("attention_mask")
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
        names.append("decoder_input_ids")
    return tuple(dict.fromkeys(names))


def _has_setting(config, *names: str) -> bool:
    """Whether the config or a sub-config has one of ``names``, set or not."""
    return any(hasattr(cfg, name) for cfg in (config, *_sub_configs(config)) for name in names)


def _setting(config, *names: str, default: Any = None) -> Any:
    """The first of ``names`` that the config sets, or else its sub-configs, nearest
    first."""
    queue = [config]
    while queue:
        cfg = queue.pop(0)
        for name in names:
            value = getattr(cfg, name, None)
            if value is not None:
                return value
        queue += _sub_configs(cfg)
    return default


def example_inputs(
    spec: ModelSpec, batch_size: int | None, device: str, seq_len: int | None = None
) -> tuple[torch.Tensor, ...]:
    """The model's inputs, made from its config: token ids within the vocabulary, pixels
    at its image size, audio at its sampling settings. Seeded and the same on every
    device (drawn on the CPU, then moved)."""
    recipe = recipe_for(spec)
    batch = DEFAULT_BATCH_SIZE if batch_size is None else batch_size
    seq = DEFAULT_SEQ_LEN if seq_len is None else seq_len
    maker = InputMaker(recipe.config, spec.task, recipe.input_names, batch, seq)
    return tuple(maker.make(name).to(device) for name in recipe.input_names)


class InputMaker:
    """One kind of tensor per input name, drawn from one seeded generator."""

    KINDS = (
        "input_ids",
        "decoder_input_ids",
        "attention_mask",
        "bbox",
        "pixel_values",
        "pixel_values_videos",
        "grid_thw",
        "merge_sizes",
        "input_values",
        "input_features",
        "past_values",
        "past_values_padding",
        "freq",
        "inputs",
        "image_attention_mask",
        "prompt_pixel_values",
        "prompt_masks",
        "spatial_shapes",
        "pixel_attention_mask",
        "visual_feats",
        "visual_pos",
        "states",
        "actions",
        "returns_to_go",
        "timesteps",
        "qformer_input_ids",
        "query_embeds",
        "input_features_mask",
        "past_time_features",
        "past_observed_mask",
    )

    def __init__(self, config, task: str, names: tuple[str, ...], batch: int, seq: int) -> None:
        self.config = config
        self.model_type = getattr(config, "model_type", "")
        self.task = task
        # Vision towers of Qwen-VL-style models take images as a packed list of patches
        # with each image's grid (frames, height, width in patches).
        self.packed = "grid_thw" in names
        self.native_resolution = "spatial_shapes" in names
        self.batch = batch
        self.seq = seq
        self.generator = torch.Generator().manual_seed(INPUT_SEED)

    def make(self, name: str) -> torch.Tensor:
        if name == "hidden_states" and self.packed:
            return self.patches()
        if name not in self.KINDS:
            raise ValueError(f"zoo cannot make the input {name!r} yet")
        return getattr(self, name)()

    def setting(self, *names: str, default: Any = None) -> Any:
        return _setting(self.config, *names, default=default)

    def randn(self, *shape: int) -> torch.Tensor:
        return torch.randn(self.batch, *shape, generator=self.generator)

    # -- text ------------------------------------------------------------------------

    def input_ids(self) -> torch.Tensor:
        ids = self.token_ids(self.setting("vocab_size", default=1000))
        eos = getattr(self.config, "eos_token_id", None)
        if self.task == "sequence-classification" and _is_count(eos) and eos < ids.max() + 1:
            # Encoder-decoder classifiers (BART) read the hidden state at the end token.
            ids[:, -1] = eos
        if self.model_type in CODEBOOK_BATCH_FAMILIES:
            ids = ids.repeat(self.setting("num_codebooks", default=1), 1)
        return ids

    def decoder_input_ids(self) -> torch.Tensor:
        decoder = _setting(self.config, "decoder_config", "decoder")
        vocab = getattr(decoder, "vocab_size", None) or self.setting("vocab_size", default=1000)
        channels = getattr(decoder, "num_channels", None)
        if channels is not None:
            # One token stream per audio channel (Dia).
            return torch.stack([self.token_ids(vocab) for _ in range(channels)], dim=-1)
        return self.token_ids(vocab)

    def qformer_input_ids(self) -> torch.Tensor:
        return self.token_ids(_setting(self.config, "qformer_config").vocab_size)

    def token_ids(self, vocab: int) -> torch.Tensor:
        ids = torch.randint(0, vocab, (self.batch, self.seq), generator=self.generator)
        # Special tokens (image placeholders, padding, masks) change what a model
        # expects next to them: they become the first ordinary id.
        special = sorted(i for i in _special_ids(self.config) if 0 <= i < vocab)
        if special:
            ordinary = next(i for i in range(vocab) if i not in special)
            ids[torch.isin(ids, torch.tensor(special))] = ordinary
        return ids

    def query_embeds(self) -> torch.Tensor:
        return self.randn(self.seq, self.setting("hidden_size", default=64))

    def attention_mask(self) -> torch.Tensor:
        return torch.ones(self.batch, self.seq, dtype=torch.long)

    def bbox(self) -> torch.Tensor:
        """Word boxes of layout models: corners in 0..1000, each box well formed."""
        corners = torch.randint(0, 1001, (self.batch, self.seq, 2, 2), generator=self.generator)
        low, high = corners.min(dim=2).values, corners.max(dim=2).values
        return torch.cat([low, high], dim=-1)

    def inputs(self) -> torch.Tensor:
        """Perceiver's one input: what its preprocessor takes, or embeddings without one."""
        if self.model_type == "speech-encoder-decoder":
            return self.input_values()
        if self.task == "image-classification":
            return self.pixel_values()
        if self.task in ("masked-lm", "sequence-classification"):
            return self.input_ids()
        return self.randn(self.seq, self.setting("d_model", default=64))

    # -- images ----------------------------------------------------------------------

    def image_size(self) -> tuple[int, int]:
        size = self.setting("image_size", default=224)
        height, width = (size, size) if isinstance(size, int) else tuple(size)[-2:]
        if self.model_type in STACKED_IMAGE_FAMILIES:
            return height // 2, width
        return height, width

    def pixel_values(self) -> torch.Tensor:
        if self.packed:
            return self.patches()
        if self.native_resolution:
            # SigLIP 2 takes its patches flattened, with the grid they come from.
            patch = self.setting("patch_size", default=16)
            channels = self.setting("num_channels", default=3)
            patches = self.setting("num_patches", default=256)
            return self.randn(patches, channels * patch * patch)
        channels = self.setting("num_channels", default=3)
        frames = self.setting("num_frames")
        if frames is not None and self.model_type not in FRAMES_NOT_VIDEO_FAMILIES:
            return self.randn(frames, channels, *self.image_size())
        if self.model_type in IMAGE_LIST_FAMILIES:
            return self.randn(1, channels, *self.image_size())
        return self.randn(channels, *self.image_size())

    def image_attention_mask(self) -> torch.Tensor:
        """Which images each token attends to (Idefics): the one image, everywhere."""
        return torch.ones(self.batch, self.seq, 1, dtype=torch.long)

    def prompt_pixel_values(self) -> torch.Tensor:
        return self.pixel_values()

    def prompt_masks(self) -> torch.Tensor:
        return self.pixel_values()

    def spatial_shapes(self) -> torch.Tensor:
        side = math.isqrt(self.setting("num_patches", default=256))
        return torch.tensor([[side, side]] * self.batch)

    def pixel_attention_mask(self) -> torch.Tensor:
        return torch.ones(self.batch, self.setting("num_patches", default=256), dtype=torch.long)

    def visual_feats(self) -> torch.Tensor:
        return self.randn(self.seq, self.setting("visual_feat_dim", default=2048))

    def visual_pos(self) -> torch.Tensor:
        return torch.rand(self.batch, self.seq, self.setting("visual_pos_dim", default=4))

    def pixel_values_videos(self) -> torch.Tensor:
        frames = self.setting("num_frames", "frames_per_clip", default=8)
        return self.randn(frames, self.setting("num_channels", default=3), *self.image_size())

    def grid_side(self) -> int:
        merge = self.setting("spatial_merge_size", default=2)
        return 2 * (merge if _is_count(merge) else 2)

    def patches(self) -> torch.Tensor:
        """Every image's patches flattened to channels x frames x patch x patch, packed
        one image after the other (no batch dimension)."""
        patch = self.setting("patch_size", default=14)
        frames = self.setting("temporal_patch_size", default=1)
        channels = self.setting("in_channels", "num_channels", default=3)
        side = self.grid_side()
        flat = torch.randn(
            self.batch * side * side, channels * frames * patch * patch, generator=self.generator
        )
        return flat

    def grid_thw(self) -> torch.Tensor:
        side = self.grid_side()
        return torch.tensor([[1, side, side]] * self.batch)

    def merge_sizes(self) -> torch.Tensor:
        return torch.tensor([self.grid_side() // 2] * self.batch)

    # -- audio and series -------------------------------------------------------------

    def input_values(self) -> torch.Tensor:
        """Raw audio: ``seq_len`` frames of the feature encoder, each its strides'
        product of samples (320 for wav2vec2); codecs take a channel dimension too.
        Spectrogram transformers (AST) take their fixed number of frames."""
        mel, frames = self.setting("num_mel_bins"), self.setting("max_length")
        if mel is not None and frames is not None:
            return self.randn(frames, mel)
        strides = self.setting("conv_stride", "upsampling_ratios")
        hop = self.setting("hop_length") or (math.prod(strides) if strides else 320)
        length = self.seq * hop
        channels = self.setting("audio_channels")
        if channels is None and (
            self.setting("codebook_size") is not None
            or self.model_type in WAVEFORM_CHANNEL_FAMILIES
        ):
            channels = 1
        return self.randn(length) if channels is None else self.randn(channels, length)

    def input_features(self) -> torch.Tensor:
        """Spectrogram frames: Whisper-style encoders (convolutions over mel bins) take
        mel bins first and exactly two frames per source position; conformers take
        frames first, ``seq_len`` times their subsampling."""
        mel = self.setting("num_mel_bins")
        projected = self.setting("feature_projection_input_dim")
        subsampling = self.setting("subsampling_factor", default=8)
        if projected is not None:
            return self.randn(self.seq, projected)
        if self.model_type in SPECTROGRAM_IMAGE_FAMILIES:
            return self.randn(1, self.seq * subsampling, mel or 64)
        frames_first = self.model_type in FRAMES_FIRST_FAMILIES
        if mel is not None and (frames_first or self.setting("subsampling_conv_channels")):
            return self.randn(self.seq * subsampling, mel)
        if mel is not None:
            sources = self.setting("max_source_positions")
            return self.randn(mel, 2 * sources if sources else self.seq * subsampling)
        feat = self.setting("input_feat_per_channel", "feature_size", default=80)
        channels = self.setting("input_channels", default=1)
        return self.randn(self.seq * 4, feat * channels)

    def past_values(self) -> torch.Tensor:
        """A time series: ``context_length`` steps (plus the lags some models look back)
        of each input channel."""
        steps = self.setting("context_length", default=self.seq)
        lags = self.setting("lags_sequence")
        steps += max(lags) if lags else 0
        channels = self.setting("num_input_channels")
        return self.randn(steps) if channels is None else self.randn(steps, channels)

    def past_time_features(self) -> torch.Tensor:
        steps = self.past_values().shape[1]
        return self.randn(steps, self.setting("num_time_features", default=1))

    def past_observed_mask(self) -> torch.Tensor:
        return torch.ones_like(self.past_values())

    def states(self) -> torch.Tensor:
        return self.randn(self.seq, self.setting("state_dim", default=17))

    def actions(self) -> torch.Tensor:
        return self.randn(self.seq, self.setting("act_dim", default=4))

    def returns_to_go(self) -> torch.Tensor:
        return self.randn(self.seq, 1)

    def timesteps(self) -> torch.Tensor:
        return torch.arange(self.seq).repeat(self.batch, 1)

    def input_features_mask(self) -> torch.Tensor:
        features = self.input_features()
        mel = self.setting("num_mel_bins")
        frames = features.shape[2] if features.shape[1] == mel else features.shape[1]
        return torch.ones(self.batch, frames, dtype=torch.long)

    def past_values_padding(self) -> torch.Tensor:
        return torch.zeros(self.batch, self.past_values().shape[1])

    def freq(self) -> torch.Tensor:
        """TimesFM's frequency class of each series (0: high frequency)."""
        return torch.zeros(self.batch, 1, dtype=torch.long)


def _sub_configs(config) -> list[Any]:
    subs = []
    for name in getattr(config, "sub_configs", None) or {}:
        sub = getattr(config, name, None)
        if sub is not None and hasattr(sub, "to_dict"):
            subs.append(sub)
    return subs


def _special_ids(config) -> set[int]:
    ids: set[int] = set()
    for cfg in (config, *_sub_configs(config)):
        for key, value in cfg.to_dict().items():
            if key.endswith(("_token_id", "_token_index", "_token_ids")):
                values = value if isinstance(value, list) else [value]
                ids.update(v for v in values if _is_count(v))
    return ids
