"""The catalogue: timm listing, selection by glob, custom modules and zoo-list."""

import json
import re
import time
from pathlib import Path

import pytest
import timm
import torch

from zoo import ModelSpec, UsageError, catalog, custom, list_all, select, timm_suite
from zoo.cli import main

TOY_MODELS = Path(__file__).parent / "fixtures" / "toy_models.py"
TINY_MLP = f"{TOY_MODELS}:TinyMLP"


def ids(specs):
    return [spec.id for spec in specs]


# --- timm listing -----------------------------------------------------------------------


def test_lists_every_timm_model():
    specs = timm_suite.list_specs()
    assert len(specs) == len(timm.list_models()) > 1000
    assert len(set(ids(specs))) == len(specs)
    assert all(spec.suite == "timm" and spec.id == f"timm/{spec.name}" for spec in specs)


@pytest.mark.parametrize(
    ("name", "family", "input_size"),
    [
        ("resnet50", "resnet", (3, 224, 224)),
        ("vit_base_patch16_384", "vision_transformer", (3, 384, 384)),
        ("test_resnet", "resnet", (3, 160, 160)),
    ],
)
def test_known_timm_models(name, family, input_size):
    spec = timm_suite.spec_for(name)
    assert spec == ModelSpec(
        id=f"timm/{name}",
        suite="timm",
        name=name,
        family=family,
        task="image-classification",
        input_size=input_size,
    )
    assert spec in timm_suite.list_specs()


def test_spec_for_rejects_unknown_and_tagged_names():
    for name in ("resnt50", "resnet5*", "resnet50.a1_in1k"):
        with pytest.raises(UsageError, match="timm has no model"):
            timm_suite.spec_for(name)


def test_listing_is_fast_and_builds_nothing(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("listing built a model")

    monkeypatch.setattr(timm, "create_model", refuse)
    start = time.perf_counter()
    specs = list_all("timm")
    assert time.perf_counter() - start < 10
    assert len(specs) == len(timm.list_models())
    # The patch is the one building goes through, so listing really did not build.
    with pytest.raises(AssertionError, match="listing built a model"):
        specs[0].build()


# --- selection ----------------------------------------------------------------------------


def test_no_patterns_selects_everything():
    everything = list_all()
    assert ids(select(None)) == ids(select(["*"])) == ids(everything)
    # Suites in their fixed order (timm, hf, custom), each sorted by id.
    order = [(catalog.SUITES.index(spec.suite), spec.id) for spec in everything]
    assert order == sorted(order) and {spec.suite for spec in everything} == {"timm", "hf"}


@pytest.mark.parametrize("patterns", [[], [""], [" , "], [",", ""]])
def test_blank_patterns_are_an_error_not_the_whole_zoo(patterns, capsys):
    with pytest.raises(UsageError, match=r"names no pattern.*'\*' for every model"):
        select(patterns)
    args = [arg for pattern in patterns for arg in ("--models", pattern)]
    assert main(args) == (2 if patterns else 0)  # zoo-list alone lists every model
    captured = capsys.readouterr()
    assert ("names no pattern" in captured.err) == bool(patterns)


def test_globs_match_id_or_bare_name_case_insensitively():
    assert ids(select(["resnet50"])) == ["timm/resnet50"]
    assert ids(select(["timm/resnet50"])) == ["timm/resnet50"]
    assert ids(select(["ResNet50"])) == ["timm/resnet50"]
    assert ids(select(["TIMM/RESNET50"])) == ["timm/resnet50"]
    by_name = ids(select(["resnet5*"]))
    assert "timm/resnet50" in by_name and "timm/resnet50d" in by_name
    assert all(model_id.startswith("timm/resnet5") for model_id in by_name)
    assert ids(select(["timm/resnet5*"])) == by_name
    assert ids(select(["timm/*"])) == ids(list_all("timm"))


def test_commas_repeats_and_dedupe():
    assert ids(select(["resnet50, test_vit,,"])) == ["timm/resnet50", "timm/test_vit"]
    repeated = select(["test_vit", "resnet50,RESNET50", "timm/resnet50", "resnet5?"])
    assert len(set(ids(repeated))) == len(repeated)
    assert ids(repeated) == sorted(ids(repeated))
    assert {"timm/resnet50", "timm/test_vit"} <= set(ids(repeated))


def test_unknown_pattern_names_the_closest_models():
    with pytest.raises(UsageError) as excinfo:
        select(["resnet50", "resnt50"])
    message = str(excinfo.value)
    assert message.startswith("no model matches 'resnt50'; closest: resnet50")
    assert message.endswith("(zoo-list shows them all)")
    assert message.count(",") <= catalog.MAX_SUGGESTIONS - 1


def test_unknown_pattern_with_suite_prefix_suggests_ids():
    with pytest.raises(UsageError, match="closest: timm/resnet50"):
        select(["timm/resnt50"])


def test_unknown_suite():
    with pytest.raises(UsageError, match="unknown suite 'nope'; choose one of: all, timm, hf"):
        select(None, suite="nope")


def test_modules_are_added_to_the_selection():
    assert ids(select(None, modules=[TINY_MLP])) == ["custom/toy_models:TinyMLP"]
    # Custom models come after the listed suites.
    chosen = select(["resnet50"], modules=[TINY_MLP, TINY_MLP])
    assert ids(chosen) == ["timm/resnet50", "custom/toy_models:TinyMLP"]
    assert ids(select(["custom/*"], modules=[TINY_MLP])) == ["custom/toy_models:TinyMLP"]


# --- timm build and inputs ----------------------------------------------------------------


def test_build_and_run_tiny_timm_model():
    spec = select(["timm/test_resnet"])[0]
    model = spec.build().eval()
    (images,) = spec.example_inputs(2, "cpu")
    assert images.shape == (2, 3, 160, 160)
    with torch.no_grad():
        assert model(images).shape == (2, model.num_classes)


def test_timm_inputs_are_deterministic():
    spec = timm_suite.spec_for("resnet50")
    first = spec.example_inputs(3, "cpu")[0]
    torch.manual_seed(1234)
    assert torch.equal(first, spec.example_inputs(3, "cpu")[0])
    assert first.dtype == torch.float32
    default = spec.example_inputs(None, "cpu")[0]
    assert default.shape == (timm_suite.DEFAULT_BATCH_SIZE, 3, 224, 224)


# --- custom modules -----------------------------------------------------------------------


GOOD_MODULE = """
import torch


class Doubler(torch.nn.Module):
    def forward(self, x, scale):
        return x * scale

    @staticmethod
    def get_example_inputs():
        return (torch.randn(3, 5), torch.tensor(2.0))
"""


def test_custom_spec_build_and_inputs(tmp_path):
    path = tmp_path / "my_models.py"
    path.write_text(GOOD_MODULE)
    spec = custom.load_spec(f"{path}:Doubler")
    assert spec == ModelSpec(
        id="custom/my_models:Doubler",
        suite="custom",
        name="my_models:Doubler",
        family="custom",
        task="custom",
        source=f"{path.resolve()}:Doubler",
    )
    # Specs travel to workers as dicts.
    spec = ModelSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    x, scale = spec.example_inputs(None, "cpu")
    assert x.shape == (3, 5) and scale.shape == ()
    assert torch.equal(spec.build()(x, scale), x * 2)
    assert torch.equal(spec.example_inputs(None, "cpu")[0], x)


def test_custom_instance_method_inputs_and_rebatching():
    spec = custom.load_spec(TINY_MLP)
    (x,) = spec.example_inputs(None, "cpu")
    assert x.shape == (4, 16)
    assert spec.build()(x).shape == (4, 8)
    (smaller,) = spec.example_inputs(2, "cpu")
    assert torch.equal(smaller, x[:2])
    (larger,) = spec.example_inputs(6, "cpu")
    assert torch.equal(larger, torch.cat([x, x[:2]]))


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        ('("not a tensor", 42)', "not tensors: #0 str 'not a tensor', #1 int 42"),
        ("(torch.ones(2), None)", "not tensors: #1 NoneType None"),
        ("None", "returned a NoneType, not a tuple of tensors"),
        ("{'x': torch.ones(2)}", "returned a dict, not a tuple of tensors"),
    ],
)
def test_custom_inputs_that_are_not_tensors_are_named(tmp_path, returned, message):
    path = tmp_path / "odd.py"
    path.write_text(GOOD_MODULE.replace("(torch.randn(3, 5), torch.tensor(2.0))", returned))
    spec = custom.load_spec(f"{path}:Doubler")
    with pytest.raises(TypeError, match=re.escape(message)) as raised:
        spec.example_inputs(2, "cpu")
    assert f"get_example_inputs() of {path.resolve()}:Doubler" in str(raised.value)


def test_custom_rebatching_leaves_other_inputs_alone(tmp_path):
    path = tmp_path / "my_models.py"
    path.write_text(GOOD_MODULE)
    x, scale = custom.load_spec(f"{path}:Doubler").example_inputs(7, "cpu")
    assert x.shape == (7, 5) and scale.shape == ()


@pytest.mark.parametrize(
    ("file_text", "source", "message"),
    [
        (None, "{dir}/missing.py:Model", "model module file '.*missing.py' does not exist"),
        (GOOD_MODULE, "{path}", "bad model module .*: give it as FILE.py:ClassName"),
        (GOOD_MODULE, "{dir}/my_models:Doubler", "bad model module"),
        (GOOD_MODULE, "{path}:Tripler", "has no class 'Tripler'; classes defined there: Doubler"),
        (
            "class NoInputs:\n    pass\n",
            "{path}:NoInputs",
            "class 'NoInputs' in .* has no get_example_inputs\\(\\)",
        ),
        (
            "raise ValueError('boom')\n",
            "{path}:Model",
            "importing .*my_models.py failed: ValueError: boom",
        ),
    ],
    ids=["missing-file", "no-colon", "not-py", "missing-class", "no-inputs", "import-error"],
)
def test_custom_module_errors(tmp_path, file_text, source, message):
    path = tmp_path / "my_models.py"
    if file_text is not None:
        path.write_text(file_text)
    with pytest.raises(UsageError, match=message):
        custom.load_spec(source.format(dir=tmp_path, path=path))


# --- zoo-list -------------------------------------------------------------------------------


def test_zoo_list_text(capsys):
    assert main(["--models", "resnet50,test_vit", "--models", "RESNET50"]) == 0
    assert capsys.readouterr().out.splitlines() == ["timm/resnet50", "timm/test_vit"]


def test_zoo_list_json(capsys):
    assert main(["--models", "resnet50", "--module", TINY_MLP, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["id"] for row in rows] == ["timm/resnet50", "custom/toy_models:TinyMLP"]
    assert rows[0] == {
        "id": "timm/resnet50",
        "suite": "timm",
        "name": "resnet50",
        "family": "resnet",
        "task": "image-classification",
        "input_size": [3, 224, 224],
        "source": None,
        # how to build it: set per cell by the plan, defaults in a listing
        "size": "full",
        "max_params": None,
        "device": None,
    }
    assert rows[1]["source"] == f"{TOY_MODELS.resolve()}:TinyMLP"


def test_zoo_list_unknown_pattern_exits_2(capsys):
    assert main(["--models", "resnt50"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("zoo-list: error: no model matches 'resnt50'; closest: resnet50")


def test_zoo_list_bad_arguments_exit_2():
    with pytest.raises(SystemExit) as excinfo:
        main(["--format", "yaml"])
    assert excinfo.value.code == 2
