"""Inputs: which keywords a model is fed, and a seeded tensor for each."""

from __future__ import annotations

import inspect
import math
from typing import Any

import torch

from zoo._hf.families import (
    BARE_HIDDEN_STATE_INPUTS,
    CODEBOOK_BATCH_FAMILIES,
    CODEBOOK_LAST_FAMILIES,
    FAMILY_IMAGE_SIZES,
    FAMILY_INPUTS,
    FAMILY_MEL_BINS,
    FAMILY_QUESTION_TOKENS,
    FAMILY_STACKED_FRAMES,
    FRAMES_FIRST_FAMILIES,
    FRAMES_NOT_VIDEO_FAMILIES,
    IMAGE_LIST_FAMILIES,
    IMAGE_PAIR_FAMILIES,
    INPUT_GROUPS,
    LAYOUT_SETTINGS,
    PATCH_IMAGE_FAMILIES,
    QUERY_TOKEN_FAMILIES,
    SPECTROGRAM_IMAGE_FAMILIES,
    STACKED_IMAGE_FAMILIES,
    WAVEFORM_CHANNEL_FAMILIES,
)
from zoo._hf.settings import get_setting, has_setting, is_count, special_ids, timm_input_size

DEFAULT_BATCH_SIZE = 2
DEFAULT_SEQ_LEN = 16
INPUT_SEED = 0

# Tasks whose inputs take a shape of their own.
CHOICE_TASKS = ("multiple-choice",)  # tokens per sample and answer: [batch, choices, seq]
CHOICES = 2
IMAGE_PAIR_TASKS = ("keypoint-matching",)  # two images per sample, matched to each other
# Heads that decode an answer or a spectrogram whatever the config says of decoding
# (BLIP's VQA head, SpeechT5's speech decoder): their decoder inputs are required.
DECODER_INPUT_TASKS = {
    "visual-question-answering": "decoder_input_ids",
    "text-to-spectrogram": "decoder_input_values",
}
# Tasks whose heads find the question by its tokens (FAMILY_QUESTION_TOKENS).
QUESTION_TASKS = ("question-answering", "multiple-choice", "pretraining")
# The task of the base models (``BARE_HIDDEN_STATE_INPUTS``).
BASE_TASK = "base"


def input_names(model_class: type, config, task: str) -> tuple[str, ...]:
    """The keywords the model is fed, in the order of ``example_inputs``: its main input,
    the inputs it requires, an attention mask with token ids, decoder ids for an
    encoder-decoder, and both tokens and pixels for a dual encoder (CLIP). Models that
    place image features at image tokens (LLaVA) get tokens only. Some task heads need
    more than their config says (``DECODER_INPUT_TASKS``)."""
    params = inspect.signature(model_class.forward).parameters
    main = getattr(model_class, "main_input_name", "input_ids")
    required = [name for name, p in params.items() if p.default is inspect.Parameter.empty]
    # Some towers inherit a main input name their forward does not take; some name
    # several (OneFormer: pixels and its task's tokens).
    names = [
        name for name in (main if isinstance(main, list | tuple) else [main]) if name in params
    ]
    if not names and "input_ids" in params:
        # A text tower that inherits its composite's main input (SAM 3 LiteText's,
        # "pixel_values") takes token ids: fed nothing, its embedding got None.
        names.append("input_ids")
    names += [name for name in required if name in InputMaker.KINDS]
    if "grid_thw" in required and "hidden_states" in required:
        names.insert(0, "hidden_states")
    image_tokens = has_setting(config, "image_token_id", "image_token_index")
    if "input_ids" in params and "pixel_values" in params and not image_tokens:
        names += ["input_ids", "pixel_values"]
    audio_tokens = has_setting(config, "audio_token_id", "audio_token_index")
    # Audio-text dual encoders (CLAP) have an audio config; Pop2Piano's input_features
    # are its token embeddings.
    dual_audio = hasattr(config, "audio_config") and not audio_tokens
    if "input_ids" in names and "input_features" in params and dual_audio:
        names.append("input_features")
    if "input_ids" in names and "bbox" in params and get_setting(config, *LAYOUT_SETTINGS):
        names.append("bbox")
    if "input_features" in names and "input_features_mask" in params:
        names.append("input_features_mask")
    if "pixel_values" in names and getattr(config, "model_type", "") in IMAGE_LIST_FAMILIES:
        names.append("image_attention_mask")
    # Inputs that come together: patches with their shapes (SigLIP 2), region features
    # with their boxes (LXMERT), a trajectory (Decision Transformer). A model that places
    # image features at image tokens gets tokens only, as above (LFM2-VL's patches).
    for first, companions in INPUT_GROUPS.items():
        if first in params and not (image_tokens and "pixel_values" in companions):
            names += [first, *companions]
    model_type = getattr(config, "model_type", "")
    names += [name for name in FAMILY_INPUTS.get(model_type, ()) if name in params]
    if task == BASE_TASK:
        names += [n for n in BARE_HIDDEN_STATE_INPUTS.get(model_type, ()) if n in params]
    # Q-Former models read the queries into the text at its placeholder tokens.
    if model_type in QUERY_TOKEN_FAMILIES and "input_ids" in params:
        names.append("input_ids")
    if "input_ids" in names and "attention_mask" in params:
        names.append("attention_mask")
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
        names.append("decoder_input_ids")
    if DECODER_INPUT_TASKS.get(task) in params:
        names.append(DECODER_INPUT_TASKS[task])
    # A required argument the zoo does not make would fail the eager call with a
    # TypeError, as if the model were at fault: it is the zoo's gap, said at build.
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    for name in required:
        if name != "self" and params[name].kind in named and name not in names:
            raise ValueError(
                f"zoo cannot make the input {name!r} yet "
                f"(a required argument of {model_class.__name__}.forward)"
            )
    return tuple(dict.fromkeys(names))


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
        "bool_masked_pos",
        "flattened_patches",
        "decoder_input_values",
        "task_inputs",
        "image_embeds_position_mask",
        "encoder_hidden_states",
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
        # Multiple-choice heads take each sample's tokens once per answer.
        self.text_shape = (batch, CHOICES, seq) if task in CHOICE_TASKS else (batch, seq)
        self.generator = torch.Generator().manual_seed(INPUT_SEED)

    def make(self, name: str) -> torch.Tensor:
        if name == "hidden_states" and self.packed:
            return self.patches()
        if self.task == BASE_TASK and name in BARE_HIDDEN_STATE_INPUTS.get(self.model_type, ()):
            return self.randn(self.seq, self.setting("hidden_size", default=64))
        if name not in self.KINDS:
            raise ValueError(f"zoo cannot make the input {name!r} yet")
        return getattr(self, name)()

    def setting(self, *names: str, default: Any = None) -> Any:
        return get_setting(self.config, *names, default=default)

    def randn(self, *shape: int) -> torch.Tensor:
        return torch.randn(self.batch, *shape, generator=self.generator)

    # -- text ------------------------------------------------------------------------

    def input_ids(self) -> torch.Tensor:
        ids = self.token_ids(self.setting("vocab_size", default=1000), self.text_shape)
        eos = getattr(self.config, "eos_token_id", None)
        if self.task == "sequence-classification" and is_count(eos) and eos < ids.max() + 1:
            # Encoder-decoder classifiers (BART) read the hidden state at the end token.
            ids[:, -1] = eos
        question = FAMILY_QUESTION_TOKENS.get(self.model_type)
        if self.task in QUESTION_TASKS and question is not None:
            setting, count = question
            # The question's tokens in the middle of the sequence, the last at its end.
            positions = [self.seq // 2 + i for i in range(count - 1)] + [self.seq - 1]
            ids[..., positions] = getattr(self.config, setting)
        if self.model_type in CODEBOOK_BATCH_FAMILIES:
            ids = ids.repeat(self.setting("num_codebooks", default=1), 1)
        if self.model_type in QUERY_TOKEN_FAMILIES:
            ids = self.with_query_tokens(ids)
        if self.model_type in CODEBOOK_LAST_FAMILIES:
            # Each codebook's own ids (the model offsets them into one table).
            codebooks = self.setting("num_codebooks", default=1)
            audio = self.token_ids(
                self.setting("codebook_vocab_size", default=1000), (*ids.shape, codebooks)
            )
            ids = torch.cat([ids.unsqueeze(-1), audio], dim=-1)
        return ids

    def with_query_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        """The text of a Q-Former model (BLIP-2): a placeholder token per query of each
        image or frame, first, then the prompt."""
        setting, frames = QUERY_TOKEN_FAMILIES[self.model_type]
        count = self.setting("num_query_tokens", default=32) * frames
        if count > ids.shape[-1]:
            raise ValueError(
                f"{self.model_type} reads {count} query tokens into the text: "
                f"a sequence of {ids.shape[-1]} cannot hold them (raise --seq-len)"
            )
        ids[..., :count] = self.setting(setting)
        return ids

    def task_inputs(self) -> torch.Tensor:
        # OneFormer's task prompt ("the task is semantic"), tokenized to its fixed length.
        vocab = self.setting("text_encoder_vocab_size", default=1000)
        return self.token_ids(vocab, (self.batch, self.setting("task_seq_len", default=77)))

    def decoder_input_ids(self) -> torch.Tensor:
        decoder = get_setting(self.config, "decoder_config", "decoder")
        vocab = getattr(decoder, "vocab_size", None) or self.setting("vocab_size", default=1000)
        channels = getattr(decoder, "num_channels", None)
        if channels is not None:
            # One token stream per audio channel (Dia).
            return torch.stack([self.token_ids(vocab) for _ in range(channels)], dim=-1)
        return self.token_ids(vocab)

    def qformer_input_ids(self) -> torch.Tensor:
        return self.token_ids(get_setting(self.config, "qformer_config").vocab_size)

    def token_ids(self, vocab: int, shape: tuple[int, ...] | None = None) -> torch.Tensor:
        shape = shape or (self.batch, self.seq)
        ids = torch.randint(0, vocab, shape, generator=self.generator)
        # Special tokens (image placeholders, padding, masks) change what a model
        # expects next to them: they become the first ordinary id.
        special = sorted(i for i in special_ids(self.config) if 0 <= i < vocab)
        if special:
            ordinary = next(i for i in range(vocab) if i not in special)
            ids[torch.isin(ids, torch.tensor(special))] = ordinary
        return ids

    def image_embeds_position_mask(self) -> torch.Tensor:
        """Where Kosmos-2's text holds its image: the latent queries after the first token."""
        queries = self.setting("latent_query_num", default=64)
        if queries + 1 > self.seq:
            raise ValueError(
                f"{self.model_type} reads {queries} image queries into the text: "
                f"a sequence of {self.seq} cannot hold them (raise --seq-len)"
            )
        mask = torch.zeros(self.text_shape, dtype=torch.long)
        mask[..., 1 : queries + 1] = 1
        return mask

    def encoder_hidden_states(self) -> torch.Tensor:
        """An image encoder's features for a cross-attending tower: ``seq_len`` of them."""
        width = self.setting("encoder_hidden_size", "hidden_size", default=64)
        return self.randn(self.seq, width)

    def query_embeds(self) -> torch.Tensor:
        return self.randn(self.seq, self.setting("hidden_size", default=64))

    def attention_mask(self) -> torch.Tensor:
        return torch.ones(self.text_shape, dtype=torch.long)

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
        patch, ratios = self.setting("patch_size"), self.setting("scaled_images_ratios")
        if is_count(patch) and ratios:
            # DepthPro cuts patches of patch_size from the image scaled down by each
            # ratio: the image is patch_size at its smallest scale.
            side = round(patch / min(ratios))
            return side, side
        if self.model_type in FAMILY_IMAGE_SIZES:
            side = FAMILY_IMAGE_SIZES[self.model_type]
            return side, side
        # TVP names its frames' side max_img_size, its visual prompt's size (224-pixel
        # frames did not match it: "tensor a (224) must match ... (448)"). RADIO, the
        # other config with one, sets image_size, which comes first.
        size = self.setting("image_size", "max_img_size") or timm_input_size(self.config) or 224
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
        frames = QUERY_TOKEN_FAMILIES.get(self.model_type, ("", 1))[1]
        if frames > 1:
            return self.randn(frames, channels, *self.image_size())
        if self.task in IMAGE_PAIR_TASKS or self.model_type in IMAGE_PAIR_FAMILIES:
            return self.randn(2, channels, *self.image_size())
        return self.randn(channels, *self.image_size())

    def bool_masked_pos(self) -> torch.Tensor:
        """Which patches a masked image (or video) model hides: every other one, so that
        every sample hides as many (VideoMAE's decoder needs that)."""
        height, width = self.image_size()
        patch = self.setting("patch_size", default=16)
        frames = self.setting("num_frames", default=1) // self.setting("tubelet_size", default=1)
        patches = frames * (height // patch) * (width // patch)
        return (torch.arange(patches) % 2 == 0).repeat(self.batch, 1)

    def flattened_patches(self) -> torch.Tensor:
        """Pix2Struct's patches: each a row and a column (counted from 1), then its
        pixels, ``seq_len`` of them in rows of a square."""
        pixels = self.setting("patch_embed_hidden_size", default=768)
        side = math.isqrt(self.seq)
        patches = self.randn(self.seq, 2 + pixels)
        index = torch.arange(self.seq)
        patches[:, :, 0] = index // side + 1
        patches[:, :, 1] = index % side + 1
        return patches

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
        shape = (self.batch, self.seq, self.setting("visual_pos_dim", default=4))
        return torch.rand(shape, generator=self.generator)

    def pixel_values_videos(self) -> torch.Tensor:
        frames = self.setting("num_frames", "frames_per_clip", default=8)
        return self.randn(frames, self.setting("num_channels", default=3), *self.image_size())

    def grid_side(self) -> int:
        merge = self.setting("spatial_merge_size", default=2)
        return 2 * (merge if is_count(merge) else 2)

    def patches(self) -> torch.Tensor:
        """Every image's patches flattened to channels x frames x patch x patch, packed
        one image after the other (no batch dimension)."""
        patch = self.setting("patch_size", default=14)
        frames = self.setting("temporal_patch_size", "patch_temporal", default=1)
        channels = self.setting("in_channels", "num_channels", default=3)
        side = self.grid_side()
        count = self.batch * side * side
        if self.model_type in PATCH_IMAGE_FAMILIES:
            return torch.randn(count, channels, patch, patch, generator=self.generator)
        return torch.randn(count, channels * frames * patch * patch, generator=self.generator)

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
        mel = self.setting("num_mel_bins") or FAMILY_MEL_BINS.get(self.model_type)
        projected = self.setting("feature_projection_input_dim")
        subsampling = self.setting("subsampling_factor", default=8)
        stacked = self.setting("num_stacked_frames") or FAMILY_STACKED_FRAMES.get(self.model_type)
        if projected is not None:
            return self.randn(self.seq, projected)
        if mel is not None and is_count(stacked):
            # Low-frame-rate features: each frame holds several mel frames side by side
            # (Fun-ASR's encoder takes 7 x 80 per frame).
            return self.randn(self.seq, mel * stacked)
        if self.model_type in SPECTROGRAM_IMAGE_FAMILIES:
            return self.randn(1, self.seq * subsampling, mel or 64)
        frames_first = self.model_type in FRAMES_FIRST_FAMILIES
        if mel is not None and (frames_first or self.setting("subsampling_conv_channels")):
            return self.randn(self.seq * subsampling, mel)
        if mel is not None:
            sources = self.setting("max_source_positions")
            frames = 2 * sources if sources else self.seq * subsampling
            window = self.setting("n_window")
            if is_count(window):
                # Qwen3-ASR's encoder reads its frames in chunks of two windows.
                frames = math.ceil(frames / (2 * window)) * 2 * window
            return self.randn(mel, frames)
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

    def decoder_input_values(self) -> torch.Tensor:
        """Spectrogram frames a speech decoder (SpeechT5's) starts from."""
        return self.randn(self.seq, self.setting("num_mel_bins", default=80))

    def past_values_padding(self) -> torch.Tensor:
        return torch.zeros(self.batch, self.past_values().shape[1])

    def freq(self) -> torch.Tensor:
        """TimesFM's frequency class of each series (0: high frequency)."""
        return torch.zeros(self.batch, 1, dtype=torch.long)
