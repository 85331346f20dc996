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
# several takes the first: GPT2LMHeadModel is a causal LM, not a base model. Cell keys
# and shipped results follow the model ids and their tasks, so a mapping is only ever
# appended: a class listed by an earlier mapping keeps its task.
#
# The first nine mappings are the zoo sweep's headline tasks (``@headline``).
HEADLINE_MAPPINGS = (
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
TASK_MAPPINGS = (
    *HEADLINE_MAPPINGS,
    # The other task heads, the more specific mapping first where a class is in two
    # (LayoutLMv2's QA head answers about documents; a Llava is an image-text-to-text
    # model before it is a pretraining one).
    ("MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES", "token-classification"),
    ("MODEL_FOR_DOCUMENT_QUESTION_ANSWERING_MAPPING_NAMES", "document-question-answering"),
    ("MODEL_FOR_TABLE_QUESTION_ANSWERING_MAPPING_NAMES", "table-question-answering"),
    ("MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES", "question-answering"),
    ("MODEL_FOR_MULTIPLE_CHOICE_MAPPING_NAMES", "multiple-choice"),
    ("MODEL_FOR_NEXT_SENTENCE_PREDICTION_MAPPING_NAMES", "next-sentence-prediction"),
    ("MODEL_FOR_MASKED_IMAGE_MODELING_MAPPING_NAMES", "masked-image-modeling"),
    ("MODEL_FOR_CAUSAL_IMAGE_MODELING_MAPPING_NAMES", "causal-image-modeling"),
    ("MODEL_FOR_OBJECT_DETECTION_MAPPING_NAMES", "object-detection"),
    ("MODEL_FOR_ZERO_SHOT_OBJECT_DETECTION_MAPPING_NAMES", "zero-shot-object-detection"),
    ("MODEL_FOR_SEMANTIC_SEGMENTATION_MAPPING_NAMES", "semantic-segmentation"),
    ("MODEL_FOR_UNIVERSAL_SEGMENTATION_MAPPING_NAMES", "universal-segmentation"),
    ("MODEL_FOR_INSTANCE_SEGMENTATION_MAPPING_NAMES", "instance-segmentation"),
    ("MODEL_FOR_IMAGE_SEGMENTATION_MAPPING_NAMES", "image-segmentation"),
    ("MODEL_FOR_DEPTH_ESTIMATION_MAPPING_NAMES", "depth-estimation"),
    ("MODEL_FOR_NORMAL_ESTIMATION_MAPPING_NAMES", "normal-estimation"),
    ("MODEL_FOR_POINTMAP_ESTIMATION_MAPPING_NAMES", "pointmap-estimation"),
    ("MODEL_FOR_POSE_ESTIMATION_MAPPING_NAMES", "pose-estimation"),
    ("MODEL_FOR_IMAGE_MATTING_MAPPING_NAMES", "image-matting"),
    ("MODEL_FOR_IMAGE_TO_IMAGE_MAPPING_NAMES", "image-to-image"),
    ("MODEL_FOR_KEYPOINT_DETECTION_MAPPING_NAMES", "keypoint-detection"),
    ("MODEL_FOR_KEYPOINT_MATCHING_MAPPING_NAMES", "keypoint-matching"),
    ("MODEL_FOR_VIDEO_CLASSIFICATION_MAPPING_NAMES", "video-classification"),
    ("MODEL_FOR_ZERO_SHOT_IMAGE_CLASSIFICATION_MAPPING_NAMES", "zero-shot-image-classification"),
    ("MODEL_FOR_TEXT_RECOGNITION_MAPPING_NAMES", "text-recognition"),
    ("MODEL_FOR_TABLE_RECOGNITION_MAPPING_NAMES", "table-recognition"),
    ("MODEL_FOR_BACKBONE_MAPPING_NAMES", "backbone"),
    ("MODEL_FOR_AUDIO_FRAME_CLASSIFICATION_MAPPING_NAMES", "audio-frame-classification"),
    ("MODEL_FOR_AUDIO_XVECTOR_MAPPING_NAMES", "audio-xvector"),
    ("MODEL_FOR_RNNT_MAPPING_NAMES", "rnnt"),
    ("MODEL_FOR_TDT_MAPPING_NAMES", "tdt"),
    ("MODEL_FOR_TEXT_TO_SPECTROGRAM_MAPPING_NAMES", "text-to-spectrogram"),
    # Omni models speak: text-to-waveform before the multimodal LMs.
    ("MODEL_FOR_TEXT_TO_WAVEFORM_MAPPING_NAMES", "text-to-waveform"),
    ("MODEL_FOR_TIME_SERIES_CLASSIFICATION_MAPPING_NAMES", "time-series-classification"),
    ("MODEL_FOR_TIME_SERIES_REGRESSION_MAPPING_NAMES", "time-series-regression"),
    ("MODEL_FOR_TIME_SERIES_PREDICTION_MAPPING_NAMES", "time-series-prediction"),
    ("MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES", "image-text-to-text"),
    ("MODEL_FOR_VISUAL_QUESTION_ANSWERING_MAPPING_NAMES", "visual-question-answering"),
    ("MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES", "multimodal-lm"),
    ("MODEL_FOR_RETRIEVAL_MAPPING_NAMES", "retrieval"),
    ("MODEL_FOR_PRETRAINING_MAPPING_NAMES", "pretraining"),
    # Not task heads: models that return features, like the base models (vision and
    # text towers, SAM-style mask generators, audio codecs).
    ("MODEL_FOR_IMAGE_MAPPING_NAMES", "base"),
    ("MODEL_FOR_TEXT_ENCODING_MAPPING_NAMES", "base"),
    ("MODEL_FOR_MASK_GENERATION_MAPPING_NAMES", "base"),
    ("MODEL_FOR_AUDIO_TOKENIZATION_NAMES", "base"),
)
# Dicts of ``modeling_auto`` that name configs, not models: never listed.
NOT_MODEL_MAPPINGS = ("CONFIG_MAPPING_NAMES",)


def list_specs() -> list[ModelSpec]:
    """One spec per model class of the listed mappings, in mapping order."""
    return _specs(TASK_MAPPINGS)


def headline_specs() -> list[ModelSpec]:
    """The classes of the headline mappings (``@headline``): the first ones
    ``list_specs`` gives, with the same tasks."""
    return _specs(HEADLINE_MAPPINGS)


def _specs(mappings: tuple[tuple[str, str], ...]) -> list[ModelSpec]:
    from transformers.models.auto import modeling_auto

    specs: dict[str, ModelSpec] = {}
    for mapping_name, task in mappings:
        # A mapping this transformers does not have (an older release) lists nothing.
        by_type: dict[str, Any] = getattr(modeling_auto, mapping_name, {})
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
