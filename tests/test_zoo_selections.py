"""Named selections: @headline and @core, alone and beside globs, in zoo-list."""

import pytest

from zoo import UsageError, hf_suite, list_all, select, selections, timm_suite
from zoo.cli import main as zoo_list


def ids(specs):
    return [spec.id for spec in specs]


def test_core_lists_existing_models_once():
    listed = selections.listed_ids("core.txt")
    catalogue = set(ids(list_all()))
    assert len(listed) == len(set(listed)) >= 150
    assert [model_id for model_id in listed if model_id not in catalogue] == []
    assert ids(select(["@core"])) == sorted(listed, key=lambda i: (i.split("/")[0] != "timm", i))


def test_core_holds_the_seed_and_harness_models():
    core = set(ids(select(["@core"])))
    seeds = {"timm/vit_base_patch16_224", "timm/resnext101_32x8d", "hf/BertModel"}
    seeds |= {"hf/BertForMaskedLM", "hf/ViTForImageClassification"}
    assert seeds <= core
    # Names of the dynamo harness that timm renamed are there under their new name.
    assert {"timm/nest_base_jx", "timm/resnext101_32x16d", "hf/LongformerForMaskedLM"} <= core


def test_headline_is_timm_and_the_first_hf_tasks():
    headline = select(["@headline"])
    timm_ids = ids(timm_suite.list_specs())
    hf_ids = ids(hf_suite.headline_specs())
    assert sorted(ids(headline)) == sorted(timm_ids + hf_ids)
    # The headline HF classes are the ones listed first, with the same tasks.
    everything = hf_suite.list_specs()
    assert everything[: len(hf_ids)] == hf_suite.headline_specs()
    assert len(everything) > len(hf_ids) >= 1000
    assert {spec.task for spec in headline if spec.suite == "hf"} == {
        task for _, task in hf_suite.HEADLINE_MAPPINGS
    }
    assert "hf/BertForQuestionAnswering" not in set(ids(headline))


def test_selections_mix_with_globs_and_suites():
    core = set(ids(select(["@core"])))
    mixed = ids(select(["@core,resnet5*", "test_vit"]))
    assert set(mixed) == core | set(ids(select(["resnet5*"]))) | {"timm/test_vit"}
    assert mixed == ids(select(mixed))  # catalogue order, once each
    assert ids(select(["@CORE"])) == ids(select(["@core"]))
    hf_core = ids(select(["@core"], suite="hf"))
    assert hf_core == [
        model_id for model_id in ids(select(["@core"])) if model_id.startswith("hf/")
    ]


def test_unknown_selection_names_the_known_ones():
    with pytest.raises(
        UsageError, match=r"unknown selection '@nope'; known selections: @headline, @core"
    ):
        select(["resnet50,@nope"])


def test_zoo_list_takes_selections(capsys):
    assert zoo_list(["--models", "@core", "--counts", "--format", "json"]) == 0
    counts = capsys.readouterr().out
    assert '"timm"' in counts and '"hf"' in counts
    assert zoo_list(["--models", "@nope"]) == 2
    assert "known selections: @headline, @core" in capsys.readouterr().err
