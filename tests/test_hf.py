"""The HuggingFace suite: listing, tiny and full builds, inputs, and real cells on CPU.

Nothing is downloaded: HF_HUB_OFFLINE makes any attempt fail instead.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import duckdb
import pytest
import torch

from runner.cell import measure_cell
from runner.cli.run import main as zoo_run
from runner.matrix.cells import Cell, CellConfig
from runner.plan import PlanOptions, plan_cells
from zoo import hf_suite, select, tensors
from zoo._hf import building, depth
from zoo.cli import main as zoo_list

ROOT = Path(__file__).resolve().parent.parent

# One architecture per kind of input and model: encoder, decoder, encoder-decoder,
# vision, speech.
SAMPLE = {
    "BertForMaskedLM": ("bert", "masked-lm"),
    "LlamaForCausalLM": ("llama", "causal-lm"),
    "T5ForConditionalGeneration": ("t5", "seq2seq-lm"),
    "ViTForImageClassification": ("vit", "image-classification"),
    "Wav2Vec2Model": ("wav2vec2", "base"),
}


def hf_spec(name: str, size: str = "tiny", **settings):
    (spec,) = select([f"hf/{name}"], suite="hf")
    return replace(spec, size=size, device="cpu", **settings)


# -- listing ---------------------------------------------------------------------------


def test_listing_reads_the_auto_mappings_and_imports_no_model():
    # A fresh interpreter: this one has imported model modules for the other tests.
    code = (
        "import json, sys\n"
        "import zoo\n"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules\n"
        "from zoo.hf_suite import list_specs\n"
        "specs = list_specs()\n"
        "models = [m for m in sys.modules if m.startswith('transformers.models.')"
        " and '.modeling_' in m]\n"
        "print(json.dumps({'ids': [s.id for s in specs], 'tasks': [s.task for s in specs],"
        " 'models': models}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    listed = json.loads(out.splitlines()[-1])
    assert listed["models"] == ["transformers.models.auto.modeling_auto"]
    assert len(listed["ids"]) == len(set(listed["ids"])) >= 400
    assert {"causal-lm", "masked-lm", "seq2seq-lm", "image-classification", "ctc"} <= set(
        listed["tasks"]
    )


def test_sample_specs():
    by_name = {spec.name: spec for spec in hf_suite.list_specs()}
    for name, (family, task) in SAMPLE.items():
        spec = by_name[name]
        assert spec.id == f"hf/{name}" and spec.suite == "hf"
        assert (spec.family, spec.task) == (family, task)
    # A class that serves two model types belongs to the one its name says.
    assert by_name["GPT2LMHeadModel"].family == "gpt2"


def test_every_model_mapping_of_transformers_is_listed():
    from transformers.models.auto import modeling_auto

    mappings = {
        name
        for name, value in vars(modeling_auto).items()
        if name.endswith("_NAMES") and isinstance(value, dict)
    }
    listed = [name for name, _ in hf_suite.TASK_MAPPINGS]
    assert len(listed) == len(set(listed))
    assert mappings - set(hf_suite.NOT_MODEL_MAPPINGS) == set(listed)


def test_task_heads_are_appended_and_listed_classes_keep_their_task():
    assert hf_suite.TASK_MAPPINGS[: len(hf_suite.HEADLINE_MAPPINGS)] == hf_suite.HEADLINE_MAPPINGS
    assert [task for _, task in hf_suite.HEADLINE_MAPPINGS] == [
        "causal-lm",
        "masked-lm",
        "seq2seq-lm",
        "speech-seq2seq",
        "ctc",
        "audio-classification",
        "image-classification",
        "sequence-classification",
        "base",
    ]
    tasks = {spec.name: spec.task for spec in hf_suite.list_specs()}
    # Already listed: the same task as before the other heads were added.
    assert tasks["BartForConditionalGeneration"] == "masked-lm"
    assert tasks["CLIPModel"] == tasks["SamModel"] == "base"
    # New heads; where a class is in two mappings, the more specific one.
    assert tasks["BertForQuestionAnswering"] == "question-answering"
    assert tasks["BertForMultipleChoice"] == "multiple-choice"
    assert tasks["DetrForObjectDetection"] == "object-detection"
    assert tasks["LayoutLMv2ForQuestionAnswering"] == "document-question-answering"
    assert tasks["LlavaForConditionalGeneration"] == "image-text-to-text"
    assert tasks["BertForPreTraining"] == "pretraining"
    assert len(tasks) > 1400


def test_zoo_list_suite_and_counts(capsys):
    assert zoo_list(["--suite", "hf", "--models", "*bert*"]) == 0
    ids = capsys.readouterr().out.split()
    assert "hf/BertForMaskedLM" in ids and all(i.startswith("hf/") for i in ids)
    assert zoo_list(["--suite", "hf", "--counts", "--format", "json"]) == 0
    counts = json.loads(capsys.readouterr().out)
    assert list(counts) == ["hf"] and sum(counts["hf"].values()) >= 400
    assert counts["hf"]["causal-lm"] > 100


# -- sizes -----------------------------------------------------------------------------


def test_tiny_configs_are_small_and_consistent():
    llama = building.recipe_for(hf_spec("LlamaForCausalLM")).config
    assert (llama.num_hidden_layers, llama.hidden_size, llama.intermediate_size) == (2, 64, 128)
    assert llama.num_attention_heads * llama.head_dim == llama.hidden_size
    assert llama.num_attention_heads % llama.num_key_value_heads == 0
    t5 = building.recipe_for(hf_spec("T5ForConditionalGeneration")).config
    assert (t5.num_layers, t5.num_decoder_layers, t5.d_model, t5.num_heads) == (2, 2, 64, 4)


def test_full_llama_is_cut_to_fit_on_the_meta_device():
    spec = hf_spec("LlamaForCausalLM", size="full")
    recipe = building.recipe_for(spec)
    default_params = depth.count_params(recipe.model_class, recipe.config)
    assert default_params > 6e9
    config, note = depth.fit_depth(recipe.model_class, recipe.config, 10**9)
    params = depth.count_params(recipe.model_class, config)
    assert params <= 10**9
    # The deepest that fits: one more layer would not.
    deeper = type(config).from_dict(
        {**config.to_dict(), "num_hidden_layers": config.num_hidden_layers + 1}
    )
    assert depth.count_params(recipe.model_class, deeper) > 10**9
    assert note.startswith(f"depth cut from 32 to {config.num_hidden_layers} layers to fit 1B")
    # A model under the limit keeps its depth.
    assert depth.fit_depth(recipe.model_class, recipe.config, 10**10) == (
        recipe.config,
        None,
    )


def test_depth_cut_keeps_a_run_length_layer_pattern_consistent():
    # GPT-Neo's layers are [[["global", "local"], 12]]: its config refuses a depth the
    # pattern does not describe, so the cut rewrites the pattern's first layers.
    recipe = building.recipe_for(hf_spec("GPTNeoForCausalLM", size="full"))
    config, note = depth.fit_depth(recipe.model_class, recipe.config, 10**9)
    assert note.startswith("depth cut from 24 to ")
    assert config.attention_layers == ["global", "local"] * (config.num_layers // 2) + [
        "global"
    ] * (config.num_layers % 2)


@pytest.mark.parametrize("name", ["OlmoHybridModel", "Qwen3NextModel"])
def test_depth_cut_keeps_every_kind_of_layer(name):
    # One full-attention layer in four: a one-layer cut kept only linear attention
    # (OLMo-Hybrid's config refused it; Qwen3-Next's built another model). The cut stops
    # at the fewest layers that keep both, above the limit if need be, and says so.
    recipe = building.recipe_for(hf_spec(name, size="full"))
    assert set(recipe.config.layer_types) == {"linear_attention", "full_attention"}
    config, note = depth.fit_depth(recipe.model_class, recipe.config, 10**9)
    assert sorted(config.layer_types) == ["full_attention", "linear_attention"]
    assert note.startswith("depth cut from ") and " to 2 layers to fit 1B" in note
    if depth.count_params(recipe.model_class, config) > 10**9:
        assert note.endswith("still above 1B at 2 layers, the fewest that keep every kind")
    with torch.device("meta"):
        recipe.model_class(config)


def test_depth_cut_goes_deeper_where_the_model_refuses_the_fewest_layers():
    # Zamba ties every hybrid layer's shared transformer to the first one's; with one
    # hybrid layer (the two layers that keep both kinds) transformers raises that there
    # is nothing to tie (a build_error for all three classes on the H200). The cut takes
    # the fewest layers it builds with instead: two hybrid layers at eight.
    recipe = building.recipe_for(hf_spec("ZambaModel", size="full"))
    config, note = depth.fit_depth(recipe.model_class, recipe.config, 10**9)
    assert config.layers_block_type.count("hybrid") >= 2
    assert note.startswith(f"depth cut from 76 to {len(config.layers_block_type)} layers")
    with torch.device("meta"):
        recipe.model_class(config)
    if depth.count_params(recipe.model_class, config) > 10**9:
        assert note.endswith(
            f"{len(config.layers_block_type)} layers, the fewest the model builds with"
        )


@pytest.mark.parametrize("name", ["LiltModel", "LiltForTokenClassification"])
def test_tiny_lilt_runs_its_layout_stream(name):
    # LiLT's layout stream concatenates six box embeddings of a sixth of the hidden size:
    # at the tiny width of 64 they made 60 and its first projection refused them
    # (an eager_error of all four LiLT classes at size tiny).
    spec = hf_spec(name)
    model = spec.build().eval()
    assert model.model.config.hidden_size % 6 == 0
    with torch.no_grad():
        outputs = model(*spec.example_inputs(2, "cpu", 16))
    assert outputs and all(torch.isfinite(t).all() for t in outputs)


@pytest.mark.parametrize("name", ["DPTForDepthEstimation", "DepthAnythingForDepthEstimation"])
def test_tiny_dpt_necks_take_one_map_per_backbone_output(name):
    # The neck reassembles one feature map per backbone output; two tiny layers leave
    # fewer outputs than its four entries (an eager_error of 8 depth, segmentation and
    # normal-estimation classes at size tiny), so its lists are cut to match.
    spec = hf_spec(name)
    model = spec.build().eval()
    config = model.model.config
    outputs = getattr(config, "backbone_out_indices", None) or config.backbone_config.out_indices
    assert len(config.neck_hidden_sizes) == len(config.reassemble_factors) == len(outputs)
    with torch.no_grad():
        (depth, *_) = model(*spec.example_inputs(2, "cpu", None))
    assert depth.shape[0] == 2 and torch.isfinite(depth).all()


def test_full_build_is_cut_initialized_and_noted():
    model = hf_spec("BertModel", size="full", max_params=50 * 10**6).build()
    (note,) = model.build_notes
    assert note.startswith("depth cut from 12 to ") and "to fit 50M params" in note
    assert sum(p.numel() for p in model.parameters()) <= 50 * 10**6
    weights = model.model.encoder.layer[0].attention.self.query.weight
    # Initialized as the model's own init does (normal, std 0.02), not empty memory.
    assert torch.isfinite(weights).all() and 0.015 < weights.std().item() < 0.025


def test_the_wrapper_returns_every_output_tensor_flat():
    model = hf_spec("BertForMaskedLM").build().eval()
    with torch.no_grad():
        outputs = model(*hf_spec("BertForMaskedLM").example_inputs(2, "cpu", 8))
    assert [tuple(t.shape) for t in outputs] == [(2, 8, model.model.config.vocab_size)]
    # The one flattener of zoo and runner.
    assert building.flatten_tensors is tensors.flatten_tensors


# -- inputs ----------------------------------------------------------------------------


def test_inputs_are_deterministic_and_within_the_vocabulary():
    spec = hf_spec("BertForMaskedLM")
    ids, mask = spec.example_inputs(3, "cpu", 10)
    torch.manual_seed(1234)
    again = spec.example_inputs(3, "cpu", 10)
    assert torch.equal(ids, again[0]) and torch.equal(mask, again[1])
    config = building.recipe_for(spec).config
    assert ids.shape == mask.shape == (3, 10) and ids.dtype == torch.long
    assert ids.min() >= 0 and ids.max() < config.vocab_size
    assert config.pad_token_id not in ids and torch.equal(mask, torch.ones(3, 10).long())


def test_every_input_is_drawn_from_the_seeded_generator():
    # LXMERT's region boxes among them: drawn from the global RNG they changed with
    # whatever ran before in the process.
    spec = hf_spec("LxmertModel")
    torch.manual_seed(1)
    first = spec.example_inputs(2, "cpu", 8)
    torch.manual_seed(2)
    again = spec.example_inputs(2, "cpu", 8)
    assert len(first) == len(again) > 2
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))


def test_inputs_follow_the_model():
    (pixels,) = hf_spec("ViTForImageClassification").example_inputs(2, "cpu", 16)
    assert pixels.shape == (2, 3, 224, 224)
    (audio,) = hf_spec("Wav2Vec2Model").example_inputs(2, "cpu", 16)
    assert audio.shape == (2, 16 * 320)
    ids, mask, decoder_ids = hf_spec("T5ForConditionalGeneration").example_inputs(2, "cpu", 8)
    assert ids.shape == mask.shape == decoder_ids.shape == (2, 8)
    features, decoder_ids = hf_spec("WhisperModel").example_inputs(2, "cpu", 16)
    assert features.shape == (2, 80, 3000)  # Whisper takes exactly 30 s of frames
    assert decoder_ids.shape == (2, 16)


def test_inputs_the_headline_read_as_eager_errors_now_run():
    """Three families whose H200 rows were eager_error from the zoo's inputs: Kyutai's
    speech-to-text takes a text token and one token per codebook at each position,
    Fun-ASR's encoder takes 7 stacked mel frames per frame, LFM2-VL places image features
    at image tokens (so it gets tokens only, as LLaVA does). Each runs in eager now."""
    kyutai = hf_spec("KyutaiSpeechToTextModel")
    config = building.recipe_for(kyutai).config
    ids, mask = kyutai.example_inputs(2, "cpu", 16)
    assert ids.shape == (2, 16, 1 + config.num_codebooks) and mask.shape == (2, 16)
    assert int(ids[..., 0].max()) < config.vocab_size
    assert int(ids[..., 1:].max()) < config.codebook_vocab_size
    fun_asr = hf_spec("FunAsrNanoEncoder")
    config = building.recipe_for(fun_asr).config
    features, frames = fun_asr.example_inputs(2, "cpu", 16)
    assert features.shape == (2, 16, config.num_mel_bins * config.num_stacked_frames)
    assert frames.shape == (2, 16)
    assert building.recipe_for(hf_spec("Lfm2VlModel")).input_names == (
        "input_ids",
        "attention_mask",
    )
    for spec in (kyutai, fun_asr, hf_spec("Lfm2VlModel")):
        model = spec.build().eval()
        with torch.no_grad():
            outputs = model(*spec.example_inputs(2, "cpu", 16))
        assert outputs and all(torch.isfinite(o.float()).all() for o in outputs), spec.name


def named_inputs(spec, batch: int = 2, seq: int = 16) -> dict[str, torch.Tensor]:
    names = building.recipe_for(spec).input_names
    return dict(zip(names, spec.example_inputs(batch, "cpu", seq), strict=True))


def run_eager(spec, batch: int = 2, seq: int = 16) -> None:
    model = spec.build().eval()
    with torch.no_grad():
        outputs = model(*spec.example_inputs(batch, "cpu", seq))
    assert outputs and all(torch.isfinite(o.float()).all() for o in outputs), spec.name


def test_query_tokens_are_placed_where_a_q_former_model_reads_them():
    """BLIP-2 and InstructBLIP(-Video) read the Q-Former's queries into the text at
    placeholder tokens, and Kosmos-2 where a mask says: without them the H200 rows were
    eager_error (a bool where a mask was due, ids of None). The placeholder, unset by the
    default config, is the text vocabulary's last id; a video has four frames."""
    for name, frames in (("Blip2Model", 1), ("InstructBlipVideoModel", 4)):
        spec = hf_spec(name)
        recipe = building.recipe_for(spec)
        assert "input_ids" in recipe.input_names, name
        config = recipe.config
        token = getattr(config, "image_token_index", None) or config.video_token_index
        assert token == config.text_config.vocab_size - 1
        inputs = named_inputs(spec)
        count = config.num_query_tokens * frames
        assert (inputs["input_ids"][:, :count] == token).all()
        assert not (inputs["input_ids"][:, count:] == token).any()
        assert inputs["pixel_values"].dim() == (5 if frames > 1 else 4)
        run_eager(spec)
    kosmos = hf_spec("Kosmos2Model")
    recipe = building.recipe_for(kosmos)
    mask = named_inputs(kosmos)["image_embeds_position_mask"]
    assert mask.sum(dim=1).tolist() == [recipe.config.latent_query_num] * 2
    assert mask[:, 0].sum() == 0
    # A sequence too short for the queries is a clear error, not a wrong input.
    with pytest.raises(ValueError, match="raise --seq-len"):
        hf_spec("Blip2Model").example_inputs(2, "cpu", 3)


def test_default_configs_that_do_not_run_get_their_released_settings():
    """GLM-4.1V's and GLM-4.5V's defaults leave the rotary half of a head unfit for the
    rotary sections their model assumes; DeepSeek-V2's leave experts per token unset and
    1,407-wide experts. Set in every sub-config of the type, at full size and tiny."""
    glm = building.recipe_for(hf_spec("Glm4vModel", size="full")).config
    assert glm.text_config.rope_parameters["partial_rotary_factor"] == 0.5
    assert glm.text_config.rope_parameters["rope_theta"] == 10000.0  # merged, not replaced
    moe = building.recipe_for(hf_spec("Glm4vMoeTextModel", size="full")).config
    assert moe.head_dim == 128
    deepseek = building.recipe_for(hf_spec("DeepseekV2Model", size="full")).config
    assert (deepseek.num_experts_per_tok, deepseek.moe_intermediate_size) == (6, 1408)
    for name in ("Glm4vMoeTextModel", "DeepseekV2Model"):
        run_eager(hf_spec(name))


def test_step3p7_gets_the_released_sliding_window():
    """Step-3.7-Flash's text model builds a sliding-window mask whatever its layers are,
    and the default leaves the window unset: the H200 row of Step3p7Model was eager_error
    ("Could not find a `sliding_window` argument in the config"). The zoo sets the
    release's 512 in the text sub-config; the layers stay the default's."""
    spec = hf_spec("Step3p7Model")
    recipe = building.recipe_for(spec)
    assert recipe.model_class.config_class().text_config.sliding_window is None
    assert recipe.config.text_config.sliding_window == 512
    assert set(recipe.config.text_config.layer_types) == {"full_attention"}
    run_eager(spec)


def test_a_text_tower_that_inherits_its_composites_main_input_gets_token_ids():
    """SAM 3 LiteText's text tower inherits the composite's main input, "pixel_values",
    which its forward does not take: fed nothing, its H200 row was eager_error
    ("embedding(): argument 'indices' (position 2) must be Tensor, not NoneType")."""
    spec = hf_spec("Sam3LiteTextTextModel")
    assert building.recipe_for(spec).input_names == ("input_ids", "attention_mask")
    run_eager(spec)


def test_full_size_defaults_that_leave_a_size_unset_get_the_released_one():
    """Ministral's, HunYuan's, Nemotron's, ESM's, dots.llm1's, two CTC heads' and
    TimmBackbone's defaults leave a setting their model reads None (a head width, the
    key/value heads, the vocabulary, the experts, the timm model), and Aya Vision's
    gives its tower a head count that does not divide its width: transformers' own
    default builds fail, and were the H200's `build_error` rows. The zoo's full-size
    config sets the released checkpoint's value, and builds (on the meta device, as the
    depth cut counts parameters)."""
    from zoo._hf.depth import count_params

    unset = [
        ("MinistralModel", "head_dim"),
        ("HunYuanDenseV1Model", "head_dim"),
        ("HunYuanMoEV1ForCausalLM", "head_dim"),
        ("NemotronForSequenceClassification", "num_key_value_heads"),
        ("EsmForMaskedLM", "vocab_size"),
        ("Dots1Model", "n_routed_experts"),
    ]
    for name, setting in unset:
        spec = hf_spec(name, size="full")
        recipe = building.recipe_for(spec)
        assert getattr(recipe.model_class.config_class(), setting) is None, name
        assert getattr(recipe.config, setting) > 0, name
        assert count_params(recipe.model_class, recipe.config) > 0, name
    # A CTC head's vocabulary, and the timm model TimmBackbone wraps.
    for name in ("Wav2Vec2BertForCTC", "Wav2Vec2ConformerForCTC", "TimmBackbone"):
        recipe = building.recipe_for(hf_spec(name, size="full"))
        assert count_params(recipe.model_class, recipe.config) > 0, name
    # Aya Vision's default tower has 14 heads for its 1,152 width.
    aya = building.recipe_for(hf_spec("AyaVisionModel", size="full"))
    vision = aya.config.vision_config
    assert vision.hidden_size % vision.num_attention_heads == 0
    assert count_params(aya.model_class, aya.config) > 0
    # ESM-2's mask token is its vocabulary's last, at both sizes (the tiny config keeps
    # the full one's vocabulary), and the tiny masked LM runs with it.
    esm = building.recipe_for(hf_spec("EsmForMaskedLM", size="full")).config
    assert esm.mask_token_id == esm.vocab_size - 1 == 32
    tiny = building.recipe_for(hf_spec("EsmForMaskedLM")).config
    assert (tiny.vocab_size, tiny.pad_token_id, tiny.mask_token_id) == (33, 1, 32)
    eager = CellConfig("eager", "none", "false", "fp32")
    result = measure_cell(Cell(hf_spec("EsmForMaskedLM"), eager, "tiny", 2, 16, "cpu", "env"))
    assert result.status == "pass", result.error_message


def test_input_shapes_read_from_what_the_model_is():
    """Full-size inputs that were the zoo's eager_errors on the H200, read now from what
    the config implies: the image size of a wrapped timm model, DepthPro's smallest
    scale, Qwen3-ASR's windows, patches with a temporal depth or as images, mel bins
    and stacked frames the config does not name."""

    def shapes(name: str) -> dict[str, tuple[int, ...]]:
        return {n: tuple(x.shape) for n, x in named_inputs(hf_spec(name, size="full")).items()}

    # Perception Encoder's video tower is timm's vit_pe_core_large_patch14_336.
    assert shapes("PeVideoEncoder")["pixel_values_videos"][-2:] == (336, 336)
    assert set(shapes("PeAudioVideoModel")) >= {"input_ids", "pixel_values_videos", "input_values"}
    # 384-pixel patches at a quarter scale.
    assert shapes("DepthProModel")["pixel_values"] == (2, 3, 1536, 1536)
    assert shapes("Qwen3ASREncoder")["input_features"][-1] % 100 == 0
    assert shapes("MuseGlimmerVisionModel")["pixel_values"][-1] == 2 * 3 * 14 * 14
    assert shapes("Kimi_K25VisionModel")["pixel_values"][1:] == (3, 14, 14)
    assert shapes("Gemma4AudioModel")["input_features"][-1] == 128
    assert shapes("GraniteSpeech5ForCTC")["input_features"] == (2, 16, 4 * 80)
    assert shapes("ClvpModelForConditionalGeneration")["input_features"][1] == 80
    assert shapes("Blip2QFormerModel")["encoder_hidden_states"] == (2, 16, 1408)
    for name in (
        "Kimi_K25VisionModel",
        "MuseGlimmerVisionModel",
        "Qwen3ASREncoder",
        "Gemma4AudioModel",
        "GraniteSpeech5ForCTC",
        "Blip2QFormerModel",
    ):
        run_eager(hf_spec(name))


def test_a_bare_speech_model_and_a_one_channel_codec_get_their_inputs():
    """Two H200 eager_errors that were the zoo's inputs. SpeechT5Model's encoder and
    decoder come without pre-nets: both take hidden states of the model's width (fed a
    waveform, its encoder's layer norm failed). VibeVoice's acoustic tokenizer takes
    audio as (batch, channels, samples), its one channel named ``channels``: a plain
    waveform was read as one sample of ``batch`` channels. Both run in eager now."""
    speecht5 = hf_spec("SpeechT5Model")
    width = building.recipe_for(speecht5).config.hidden_size
    shapes = {n: tuple(x.shape) for n, x in named_inputs(speecht5).items()}
    assert shapes == {"input_values": (2, 16, width), "decoder_input_values": (2, 16, width)}
    # The family's task heads have their pre-nets: a waveform, as before.
    assert named_inputs(hf_spec("SpeechT5ForSpeechToText"))["input_values"].dim() == 2
    vibevoice = hf_spec("VibeVoiceAcousticTokenizerModel")
    (audio,) = vibevoice.example_inputs(2, "cpu", 16)
    assert audio.shape[:2] == (2, 1)
    for spec in (speecht5, vibevoice):
        run_eager(spec)


def test_image_sizes_and_backbone_outputs_the_model_expects():
    """Three H200 eager_errors that were the zoo's: TVP's visual prompt is its config's
    max_img_size (448) and the zoo fed 224-pixel frames; RF-DETR's 4 x 4 windows do not
    divide the 37 patches of its backbone's 518-pixel position table (RF-DETR Base takes
    560); UVDoc's head concatenates all six bridge stages, which the default backbone
    does not output (the released checkpoint does). TVP runs at batch 1 only: its column
    position embeddings are viewed with the batch size (transformers' own bug)."""
    tvp = hf_spec("TvpModel")
    config = building.recipe_for(tvp).config
    pixels = named_inputs(tvp, batch=1)["pixel_values"]
    assert pixels.shape[-2:] == (config.max_img_size, config.max_img_size) == (448, 448)
    rf_detr = hf_spec("RfDetrModel")
    backbone = building.recipe_for(rf_detr).config.backbone_config
    side = named_inputs(rf_detr)["pixel_values"].shape[-1]
    assert side == 560 and side % (backbone.patch_size * backbone.num_windows) == 0
    uvdoc = hf_spec("UVDocModel")
    backbone = building.recipe_for(uvdoc).config.backbone_config
    assert backbone.out_indices == [1, 2, 3, 4, 5, 6]
    # The backbone on its own keeps its default: the last stage.
    assert building.recipe_for(hf_spec("UVDocBackbone")).config.out_indices == [6]
    run_eager(tvp, batch=1)
    for spec in (rf_detr, uvdoc):
        run_eager(spec)


def test_a_model_with_two_main_inputs_gets_both():
    """OneFormer names two main inputs (pixels and its task prompt's tokens); a list as
    ``main_input_name`` was a build_error (unhashable) on the H200. It gets both now."""
    spec = hf_spec("OneFormerModel")
    recipe = building.recipe_for(spec)
    assert recipe.input_names[:2] == ("pixel_values", "task_inputs")
    pixels, task = spec.example_inputs(2, "cpu", 16)
    assert task.shape == (2, recipe.config.task_seq_len)
    assert int(task.max()) < recipe.config.text_encoder_vocab_size
    model = spec.build().eval()
    with torch.no_grad():
        outputs = model(pixels, task)
    assert outputs and all(torch.isfinite(o.float()).all() for o in outputs)


def test_inputs_of_the_task_heads():
    # A multiple-choice head takes each sample's tokens once per answer.
    spec = hf_spec("BertForMultipleChoice")
    ids, mask = spec.example_inputs(3, "cpu", 8)
    assert ids.shape == mask.shape == (3, 2, 8)
    with torch.no_grad():
        (logits,) = spec.build().eval()(ids, mask)
    assert logits.shape == (3, 2)
    # Longformer's QA head finds the question by three separators in every sample.
    spec = hf_spec("LongformerForQuestionAnswering")
    ids = spec.example_inputs(2, "cpu", 16)[0]
    sep = building.recipe_for(spec).config.sep_token_id
    assert ((ids == sep).sum(dim=1) == 3).all()
    # BLIP's VQA head decodes its answer from decoder ids, which its config does not
    # announce; keypoint matchers take image pairs.
    names = building.recipe_for(hf_spec("BlipForQuestionAnswering")).input_names
    assert names[-1] == "decoder_input_ids"
    (pairs,) = hf_spec("SuperGlueForKeypointMatching").example_inputs(2, "cpu", 16)
    assert pairs.shape[:3] == (2, 2, 3)
    # LightGlue's head is listed under the base mapping (task "base"): its family says
    # it matches pairs all the same.
    lightglue = hf_spec("LightGlueForKeypointMatching")
    assert lightglue.task == "base"
    (pairs,) = lightglue.example_inputs(2, "cpu", 16)
    assert pairs.shape[:3] == (2, 2, 3)
    # VideoMAE's pretraining hides the same number of patches in every sample.
    _, masked = hf_spec("VideoMAEForPreTraining").example_inputs(2, "cpu", 16)
    assert masked.dtype == torch.bool and masked.shape[0] == 2
    assert masked.sum(dim=1).tolist() == [masked.shape[1] // 2] * 2


# -- cells -----------------------------------------------------------------------------


def test_plan_gives_hf_cells_their_size_batch_and_sequence():
    specs = select(["hf/BertForMaskedLM", "timm/test_resnet"])
    options = PlanOptions(("eager",), ("default",), ("false",), ("fp32",), ("infer",), "cpu")
    tiny = plan_cells(specs, replace(options, size="tiny"), "env")
    by_suite = {cell.spec.suite: cell for cell in tiny.cells}
    hf, timm = by_suite["hf"], by_suite["timm"]
    assert (hf.size, hf.spec.size, hf.batch_size, hf.seq_len) == ("tiny", "tiny", 2, 16)
    assert (timm.size, timm.seq_len) == ("full", None)
    assert tiny.dropped == [
        "size tiny: 1 model of suites with one size (timm, custom) run at size full"
    ]
    # tiny as the CPU's default, not asked for: timm's one size is no news then.
    default = plan_cells(specs, replace(options, size="tiny", size_asked=False), "env")
    assert default.dropped == [] and default.cells == tiny.cells
    bert = [spec for spec in specs if spec.suite == "hf"]
    cuda = plan_cells(bert, replace(options, device="cuda", max_params=5), "env")
    (cell,) = cuda.cells
    assert (cell.size, cell.batch_size, cell.seq_len, cell.spec.max_params) == ("full", 16, 128, 5)
    assert cell.spec.device == "cuda" and cell.key != tiny.cells[0].key


def test_a_parameter_limit_other_than_the_default_is_another_cell():
    specs = select(["hf/BertModel", "timm/test_resnet"])
    options = PlanOptions(("eager",), ("default",), ("false",), ("fp32",), ("infer",), "cuda")

    def keys(**settings) -> dict[str, str]:
        plan = plan_cells(specs, replace(options, **settings), "env")
        return {cell.spec.suite: cell.key for cell in plan.cells}

    default, explicit, lower = keys(), keys(max_params=10**9), keys(max_params=5 * 10**7)
    # The default limit, implied or said, keeps the keys cells had before limits existed.
    assert default == explicit
    assert lower["hf"] != default["hf"]
    # A suite with one size does not take the limit.
    assert lower["timm"] == default["timm"]
    tiny = keys(size="tiny", max_params=5 * 10**7)
    assert tiny["hf"] == keys(size="tiny")["hf"]


def test_depth_cut_is_in_the_cell_notes():
    spec = hf_spec("BertModel", size="full", max_params=30 * 10**6)
    cell = Cell(spec, CellConfig("eager", "none", "false", "fp32"), "full", 2, 8, "cpu", "env")
    result = measure_cell(cell)
    assert result.status == "pass", result.error_message
    assert "depth cut from 12 to" in result.notes and "to fit 30M params" in result.notes


def test_a_build_error_row_says_whose_failure_it_is(monkeypatch):
    """Most HF build_error rows of the headline are transformers' own defaults that do
    not build (DbrxModel(DbrxConfig()) reads a setting its sub-config lacks): the row's
    notes say so. One the zoo's settings cause says that instead."""
    spec = hf_spec("DbrxModel", size="full")
    cell = Cell(spec, CellConfig("eager", "none", "false", "fp32"), "full", 2, 8, "cpu", "env")
    result = measure_cell(cell)
    assert result.status == "build_error" and result.error_type == "AttributeError"
    assert "transformers' own default config fails too: DbrxModel(DbrxConfig()) raises " in (
        result.notes
    )

    def broken_cut(model_class, config, max_params):
        raise ValueError("a depth the config refuses")

    monkeypatch.setattr(building, "fit_depth", broken_cut)
    with pytest.raises(ValueError) as raised:
        hf_spec("BertModel", size="full").build()
    assert raised.value.__notes__ == [
        "BertModel(BertConfig()) builds (on the meta device): the zoo's settings of its "
        "config broke it"
    ]


def test_a_sequence_longer_than_the_position_table_is_cut_to_fit():
    # CLIP's text tower has 77 positions; 128 tokens used to be an eager_error row.
    spec = hf_spec("CLIPTextModel", size="tiny")
    cell = Cell(spec, CellConfig("eager", "none", "false", "fp32"), "tiny", 2, 128, "cpu", "env")
    result = measure_cell(cell)
    assert result.status == "pass", result.error_message
    assert result.seq_len == 128 and json.loads(result.input_shapes) == [[2, 77], [2, 77]]
    assert "sequence cut from 128 to 77" in result.notes
    # A model whose table is long enough gets the sequence asked for, and no such note.
    bert = Cell(hf_spec("BertModel"), CellConfig("eager", "none", "false", "fp32"), "tiny",
                2, 128, "cpu", "env")  # fmt: skip
    result = measure_cell(bert)
    assert json.loads(result.input_shapes)[0] == [2, 128] and "sequence cut" not in (
        result.notes or ""
    )


def test_sample_cells_pass_eager_and_aot_eager(tmp_path):
    db = tmp_path / "zoo.duckdb"
    models = ",".join(f"hf/{name}" for name in SAMPLE)
    args = ["--models", models, "--backends", "eager,aot_eager", "--device", "cpu"]
    assert zoo_run([*args, "--db", str(db)]) == 0
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT model_id, backend, status, size, batch_size, seq_len, error_message, "
            "accuracy_pass, graph_count FROM results ORDER BY model_id, backend"
        ).fetchall()
    assert len(rows) == 2 * len(SAMPLE)
    for model_id, backend, status, size, batch, seq, error, accurate, graphs in rows:
        assert status == "pass", f"{model_id} {backend}: {error}"
        assert (size, batch, seq) == ("tiny", 2, 16) and accurate and graphs >= 1


@pytest.mark.parametrize("name", ["NotAModelForAnything"])
def test_an_unbuildable_class_raises_a_reason(name):
    spec = replace(hf_spec("BertModel"), name=name, id=f"hf/{name}")
    with pytest.raises(RuntimeError, match=f"transformers cannot import {name}"):
        spec.build()


@pytest.mark.parametrize(
    ("name", "argument"),
    [("Gemma4VisionModel", "pixel_position_ids"), ("Sam2VideoModel", "inference_session")],
)
def test_a_required_input_the_zoo_cannot_make_is_a_build_error_naming_it(name, argument):
    """Fed without it, the eager call would fail with a TypeError, as if the model were
    at fault (Gemma4VisionModel's H200 row read eager_error): the zoo says so at build."""
    spec = replace(hf_spec(name), size="tiny")
    message = f"zoo cannot make the input '{argument}' yet \\(a required argument of {name}"
    with pytest.raises(ValueError, match=message):
        spec.build()
