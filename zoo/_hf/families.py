"""What zoo knows of transformers' families: the names their configs give a setting,
the values of a tiny model, and each family's exceptions. Data only: no imports of
torch or transformers."""

from __future__ import annotations

from typing import Any

TINY_LAYERS = 2
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
    # Image queries read into the text (BLIP-2, Kosmos-2): a tiny sequence holds them.
    "num_query_tokens": 4,
    "latent_query_num": 4,
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
# Lists of a DPT-style neck with one entry per backbone output (``configs._match_neck``).
NECK_LISTS = ("neck_hidden_sizes", "reassemble_factors")
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
    # Six box embeddings of a sixth of the hidden size each make up the layout stream.
    "lilt": {"hidden_size": 96},
}
# Settings that a forward pass needs and the default config leaves unset, at any size.
FAMILY_REQUIRED: dict[str, dict[str, Any]] = {
    "xmod": {"default_language": "en_XX"},
    # Time-series transformers: how far to forecast, and one time feature per step.
    "time_series_transformer": {"prediction_length": 8, "num_time_features": 1},
    "informer": {"prediction_length": 8, "num_time_features": 1},
    "autoformer": {"prediction_length": 8, "num_time_features": 1},
}
# Settings whose defaults do not run, set in the config and in every sub-config of the
# model type, before any shrinking (dicts are merged into the default's). Where a
# released checkpoint of the family has the setting, it takes that value.
FAMILY_FIXES: dict[str, dict[str, Any]] = {
    # GLM-4.1V rotates half of each head: the rotary sections its model assumes
    # (8, 12, 12) fit only that half, which the default config leaves at the whole head.
    "glm4v_text": {"rope_parameters": {"partial_rotary_factor": 0.5}},
    "glm_image_text": {"rope_parameters": {"partial_rotary_factor": 0.5}},
    # GLM-4.5V's heads are 128 wide; the default derives 42 (4096 / 96), which the
    # rotary sections do not fit.
    "glm4v_moe_text": {"head_dim": 128},
    # DeepSeek-V2-Lite, whose sizes the default has, routes each token to six experts
    # (the default leaves the count unset) of 1,408 wide (the default's 1,407 rows are
    # no multiple of 16 bytes, which grouped matrix products need).
    "deepseek_v2": {"num_experts_per_tok": 6, "moe_intermediate_size": 1408},
    # Defaults that leave a size the model reads unset (None), each built on the H200 as
    # a `build_error` until 2026-12-04; the released checkpoints' values. Ministral-8B's,
    # Hunyuan-7B's and Hunyuan-A13B's heads are 128 wide (4,096 over 32 heads), which
    # their attention does not derive. (HunYuan-VL's text model lacks more: its default
    # leaves the rotary sections unset too.)
    "ministral": {"head_dim": 128},
    "hunyuan_v1_dense": {"head_dim": 128},
    "hunyuan_v1_moe": {"head_dim": 128},
    # Nemotron-4-15B, whose sizes the default has, shares keys and values among 8 heads.
    "nemotron": {"num_key_value_heads": 8},
    # ESM-2's vocabulary: 33 tokens, padding 1, mask 32 (the default sets none).
    "esm": {"vocab_size": 33, "pad_token_id": 1, "mask_token_id": 32},
    # dots.llm1 routes each token to 6 of 128 experts, beside 2 shared ones.
    "dots1": {"n_routed_experts": 128, "num_experts_per_tok": 6, "n_shared_experts": 2},
    # A CTC head needs a vocabulary: Wav2Vec2's default and its 960-hour fine-tunes' 32.
    "wav2vec2-bert": {"vocab_size": 32},
    "wav2vec2-conformer": {"vocab_size": 32},
    # TimmBackbone wraps a timm model it names; the default names none. ResNet-50, as in
    # the backbone's own documentation (built without weights: NO_DOWNLOAD).
    "timm_backbone": {"backbone": "resnet50"},
    # Aya Vision's tower is SigLIP so400m (1,152 wide, 16 heads); the default's 14 heads
    # do not divide its width.
    "aya_vision": {"vision_config": {"num_attention_heads": 16}},
    # Step-3.7-Flash's text model (type "step3p5") builds a sliding-window mask whatever
    # its layers are, and the default leaves the window unset ("Could not find a
    # `sliding_window` argument in the config"). The release's sliding layers see 512
    # tokens (as vLLM's Step-3.7-Flash recipe states it; the checkpoint's own config was
    # not read here). The default's layers stay all full attention, so no layer uses it.
    "step3p5": {"sliding_window": 512},
    # UVDoc's head concatenates the maps of all six bridge stages (its first convolution
    # takes 6 x 128 channels); the default backbone outputs the last stage only ("expected
    # input[16, 128, 14, 14] to have 768 channels"). The released UVDoc_safetensors
    # checkpoint outputs stages 1-6. UVDocBackbone on its own keeps its default.
    "uvdoc": {
        "backbone_config": {
            "out_features": [f"stage{i}" for i in range(1, 7)],
            "out_indices": list(range(1, 7)),
        }
    },
}
# Q-Former models read the image's query outputs into the text at placeholder tokens,
# one per query (and per frame of a video): which setting names the placeholder, and
# how many frames a sample has. The default leaves the placeholder unset; the zoo takes
# the last id of the text vocabulary for it.
QUERY_TOKEN_FAMILIES: dict[str, tuple[str, int]] = {
    "blip-2": ("image_token_index", 1),
    "instructblip": ("image_token_index", 1),
    # InstructBLIP-Video's Q-Former takes four frames, always.
    "instructblipvideo": ("video_token_index", 4),
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
# Models whose inputs are all optional but that need several at once (Perception
# Encoder's audio-video models embed two modalities or more together).
FAMILY_INPUTS: dict[str, tuple[str, ...]] = {
    "pe_audio_video": ("input_ids", "pixel_values_videos", "input_values"),
    "pe_audio_video_encoder": ("input_values", "pixel_values_videos"),
    # Kosmos-2 reads its image's latent queries into the text where this mask is set.
    "kosmos-2": ("image_embeds_position_mask",),
    # CLVP's conditioning encoder takes speech and text together.
    "clvp": ("input_features",),
    # BLIP-2's Q-Former on its own cross-attends to an image encoder's features.
    "blip_2_qformer": ("encoder_hidden_states",),
}
# Base models built without the pre-nets that embed audio, text or spectrograms: the
# inputs they take as hidden states of the model's width. SpeechT5Model's encoder and
# decoder are "WithoutPrenet" (its task heads have theirs); fed a waveform, its encoder's
# first layer norm failed ("normalized_shape=[768] ... got input of size [16, 40960]",
# its H200 eager_error), and its decoder needs its input too.
BARE_HIDDEN_STATE_INPUTS: dict[str, tuple[str, ...]] = {
    "speecht5": ("input_values", "decoder_input_values"),
}
# Vision towers that take packed patches as images (channels, patch, patch), not
# flattened (Kimi K2.5's patch embedding is a convolution).
PATCH_IMAGE_FAMILIES = ("kimi_k25_vision",)
# Keypoint matchers: every class of theirs (the base models, and LightGlue's head, listed
# under the base mapping) takes two images per sample, like the keypoint-matching task.
IMAGE_PAIR_FAMILIES = ("lightglue", "efficientloftr", "superglue")
FRAMES_NOT_VIDEO_FAMILIES = ("perceiver",)  # num_frames of an optional video decoder
STACKED_IMAGE_FAMILIES = ("seggpt",)  # input and prompt stacked make the config's height
# One text token and one token per audio codebook at every position, the codebooks
# last (Kyutai's speech-to-text: ids of shape batch x sequence x (1 + codebooks)).
CODEBOOK_LAST_FAMILIES = ("kyutai_speech_to_text",)
# Token ids per codebook, stacked along the batch (MusicGen's decoder).
CODEBOOK_BATCH_FAMILIES = ("musicgen_decoder", "musicgen_melody_decoder")
# Waveforms as (channels, samples) where the config names no ``audio_channels``. VibeVoice's
# acoustic tokenizer names its one channel ``channels``: a plain (batch, samples) waveform
# was read by its first convolution as one unbatched sample of ``batch`` channels
# ("expected input[1, 16, 409606] to have 1 channels", its H200 eager_error).
WAVEFORM_CHANNEL_FAMILIES = (
    "pe_audio",
    "pe_audio_video",
    "xcodec",
    "xcodec2",
    "neucodec",
    "vibevoice_acoustic_tokenizer",
)
FRAMES_FIRST_FAMILIES = ("univnet",)  # mel features as (frames, mel bins)
# Mel bins of feature extractors whose model config does not name them (Gemma 4's
# audio tower: its projection reads a quarter of 128 bins times its channels; CLVP's
# conditioning encoder convolves over 80 bins, mel bins first).
FAMILY_MEL_BINS = {"gemma4_audio": 128, "clvp": 80}
# Image sides the config does not state, where the size it has (a position table,
# interpolated to any input) does not fit the model: RF-DETR's backbone keeps DINOv2's
# 518 pixels (37 patches of 14), which its 4 x 4 windows do not divide ("shape '[16, 4,
# 9, 4, 9, -1]' is invalid"). RF-DETR Base, whose sizes the default has, takes 560.
FAMILY_IMAGE_SIZES = {"rf_detr": 560}
# Frames first, each holding several mel frames side by side, where the config does not
# say how many (Granite Speech 5 expands each frame with its delta and stacks pairs).
FAMILY_STACKED_FRAMES = {"granite_speech5_encoder": 4, "granite_speech5_ctc": 4}
SPECTROGRAM_IMAGE_FAMILIES = ("clap",)  # mel features as a one-channel image
# Heads that find the question by its tokens in the ids: which setting holds the
# token, and how many a sample has (Longformer: "question </s></s> context </s>").
FAMILY_QUESTION_TOKENS = {"longformer": ("sep_token_id", 3), "splinter": ("question_token_id", 1)}
