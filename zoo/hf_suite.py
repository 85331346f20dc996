"""The HuggingFace transformers suite: every architecture of transformers' auto mappings.

Listing reads the ``*_MAPPING_NAMES`` dicts of ``transformers.models.auto`` (class
names by model type) and imports no model module. Nothing is ever downloaded: models
are built from their config class (``zoo._hf``), at one of two sizes:

- ``full``: the config's defaults. A model above ``spec.max_params`` parameters (counted
  on the meta device, allocating nothing) is built shallower, and its notes say so.
  It is constructed directly on ``spec.device``, so a big model never pays CPU init.
- ``tiny``: 2 layers, hidden size 64, 4 heads: for CPU runs and coverage checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zoo.spec import ModelSpec

if TYPE_CHECKING:
    import torch

SUITE = "hf"

# Which auto mappings are listed, and the task of their classes. A class found in
# several takes the first: GPT2LMHeadModel is a causal LM, not a base model.
TASK_MAPPINGS = (
    ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "causal-lm"),
    ("MODEL_FOR_MASKED_LM_MAPPING_NAMES", "masked-lm"),
    ("MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "seq2seq-lm"),
    ("MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES", "speech-seq2seq"),
    ("MODEL_FOR_CTC_MAPPING_NAMES", "ctc"),
    ("MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES", "audio-classification"),
    ("MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES", "image-classification"),
    ("MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES", "sequence-classification"),
    ("MODEL_MAPPING_NAMES", "base"),
)


def list_specs() -> list[ModelSpec]:
    """One spec per model class of the listed mappings, in mapping order."""
    from transformers.models.auto import modeling_auto

    specs: dict[str, ModelSpec] = {}
    for mapping_name, task in TASK_MAPPINGS:
        by_type: dict[str, Any] = getattr(modeling_auto, mapping_name)
        owners: dict[str, list[str]] = {}
        for model_type, names in by_type.items():
            for name in names if isinstance(names, tuple | list) else (names,):
                owners.setdefault(name, []).append(model_type)
        for name, model_types in owners.items():
            if name not in specs:
                specs[name] = ModelSpec(
                    id=f"{SUITE}/{name}",
                    suite=SUITE,
                    name=name,
                    family=_family(name, model_types),
                    task=task,
                )
    return list(specs.values())


def _family(class_name: str, model_types: list[str]) -> str:
    """The model type of a class. A class may serve several (GPT2LMHeadModel serves
    ``gpt2`` and ``gpt-sw3``): the one its name starts with wins."""
    name = class_name.lower()
    for model_type in model_types:
        if name.startswith(model_type.replace("_", "").replace("-", "")):
            return model_type
    return model_types[0]


def build(spec: ModelSpec) -> torch.nn.Module:
    from zoo._hf import building

    return building.build(spec)


def example_inputs(
    spec: ModelSpec, batch_size: int | None, device: str, seq_len: int | None = None
) -> tuple[torch.Tensor, ...]:
    from zoo._hf import building

    return building.example_inputs(spec, batch_size, device, seq_len)
