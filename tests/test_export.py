"""The deployment columns on CPU: torch.export (non-strict and strict) and AOTInductor,
and Inductor's configs as mode options, all through the backend registry."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from runner.backends import registry
from runner.cli.run import main as zoo_run
from runner.plan import PlanOptions, configs
from tests.results import rows
from tests.test_measure import DataDependentIf, Mlp, UnsupportedBuiltin, measure


@pytest.mark.parametrize("mode", ["non-strict", "strict"])
def test_a_clean_module_exports_and_runs_in_both_modes(mode):
    result = measure(Mlp(), backend="export", mode=mode)
    assert result.status == "pass", result.error_message
    assert (result.graph_count, result.graph_break_count) == (1, 0)
    # placeholders (2 weights, 2 biases, x), linear, relu, linear, output
    assert result.graph_ops == 3 and result.graph_nodes == result.graph_ops + 6
    assert result.accuracy_pass is True and result.compile_s > 0
    assert result.first_call_s > result.compile_s
    assert result.dynamic_dims is None and result.export_issues is None
    assert "torch.export" in result.notes


def test_a_module_dynamo_cannot_trace_exports_only_non_strict():
    # id() is a Python builtin dynamo does not trace; non-strict export runs Python.
    loose = measure(UnsupportedBuiltin(), backend="export", mode="non-strict")
    strict = measure(UnsupportedBuiltin(), backend="export", mode="strict")
    assert loose.status == "pass", loose.error_message
    assert (strict.status, strict.error_phase) == ("compile_error", "export")
    assert strict.error_signature


def test_data_dependent_control_flow_fails_both_with_what_draft_export_found():
    for mode in ("non-strict", "strict"):
        result = measure(DataDependentIf(), backend="export", mode=mode)
        assert (result.status, result.error_phase) == ("compile_error", "export"), mode
        assert "data-dependent" in result.error_message.lower() or "Data-dependent" in (
            result.error_signature or ""
        )
        assert json.loads(result.export_issues) == {"DATA_DEPENDENT_ERROR": 1}
        assert "draft_export: 1 DATA_DEPENDENT_ERROR" in result.notes


def test_dynamic_export_records_its_dynamic_dims_and_runs_the_halved_shape():
    result = measure(Mlp(), backend="export", mode="non-strict", dynamic="true", batch_size=8)
    assert result.status == "pass", result.error_message
    dims = json.loads(result.dynamic_dims)
    assert len(dims) == 1 and 0 in dims[0]  # the batch dim of the one input
    assert json.loads(result.probe_shapes) == [[4, 8]]
    assert (result.probe_ok, result.probe_recompiles) == (True, 0)


def test_a_static_cell_is_not_probed_and_an_auto_strict_one_is():
    static = measure(Mlp(), backend="export", mode="non-strict", dynamic="false", batch_size=8)
    assert static.status == "pass" and static.probe_ok is None and static.dynamic_dims is None
    auto = measure(Mlp(), backend="export", mode="strict", dynamic="auto", batch_size=8)
    assert auto.status == "pass", auto.error_message
    assert (auto.probe_ok, auto.probe_recompiles) == (True, 0)


@pytest.mark.slow
def test_aot_inductor_compiles_a_tiny_timm_model_on_cpu(tmp_path):
    db = tmp_path / "zoo.duckdb"
    args = ["--models", "test_resnet", "--backends", "aot_inductor", "--device", "cpu"]
    assert zoo_run([*args, "--db", str(db)]) == 0
    (row,) = rows(db)
    assert row["status"] == "pass", row["error_message"]
    assert row["mode"] == "default" and row["graph_count"] == 1
    assert row["compile_s"] > 1 and "AOT compile and load" in row["notes"]
    assert "in the global scope" in row["notes"]
    assert row["accuracy_pass"] is True and row["graph_ops"] > 10


@pytest.mark.slow
def test_aot_inductor_max_autotune_autotunes_its_kernels_on_cpu(capfd):
    result = measure(Mlp(), backend="aot_inductor", mode="max-autotune")
    assert result.status == "pass", result.error_message
    assert result.mode == "max-autotune" and result.accuracy_pass is True
    # Inductor benchmarked its GEMM choices (its C++ micro-kernels against aten's addmm).
    assert "AUTOTUNE" in capfd.readouterr().err
    assert "in the global scope" in result.notes


def test_the_process_libstdcxx_is_made_global_before_a_package_loads():
    """A package's standard-library calls must find libstdc++ before the copies torch's
    libraries export: after torch's import it is local to torch's extension, so a
    libstdc++-only symbol is not found in the global scope until it is made global."""
    code = """
import ctypes
import torch
from runner.backends.export import global_libstdcxx

class Info(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("base", ctypes.c_void_p),
                ("symbol", ctypes.c_char_p), ("address", ctypes.c_void_p)]

def owner(symbol):
    scope = ctypes.CDLL(None)  # dlopen(NULL): the global scope
    try:
        function = getattr(scope, symbol)
    except AttributeError:
        return None
    info = Info()
    scope.dladdr(ctypes.cast(function, ctypes.c_void_p), ctypes.byref(info))
    return info.name.decode()

symbol = "_ZNSt10filesystem7__cxx114path14_M_split_cmptsEv"
print(owner(symbol))
print(global_libstdcxx())
print(owner(symbol))
"""
    answer = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert answer.returncode == 0, answer.stderr
    before, library, after = answer.stdout.split()
    assert before == "None" and "libstdc++.so" in library
    assert os.path.realpath(after) == os.path.realpath(library)


@pytest.mark.inductor
def test_inductor_configs_ride_on_the_mode_and_key_the_cell():
    plain = measure(Mlp(), backend="inductor", mode="default")
    frozen = measure(Mlp(), backend="inductor", mode="default+freezing")
    assert plain.status == frozen.status == "pass", frozen.error_message
    assert frozen.mode == "default+freezing" and frozen.cell_key != plain.cell_key


def test_modes_come_from_the_registry():
    entry = registry.get("inductor")
    assert entry.accepts("default+freezing") and entry.accepts("max-autotune+cpp_wrapper")
    assert entry.accepts("default+freezing+cpp_wrapper")
    assert not entry.accepts("default+freezing+freezing") and not entry.accepts("fast")
    assert registry.get("export").modes_for(None) == ("non-strict",)
    assert registry.get("aot_inductor").modes_for(("default", "strict")) == ("default",)
    options = PlanOptions(
        backends=("inductor", "export", "eager"),
        modes=None,
        dynamic=("false",),
        precisions=("fp32",),
        steps=("infer",),
        device="cpu",
    )
    kept, dropped = configs(options)
    assert [(c.backend, c.mode) for c in kept] == [
        ("inductor", "default"),
        ("export", "non-strict"),
        ("eager", "none"),
    ]
    assert dropped == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--backends", "aot_inductor", "--modes", "reduce-overhead"],
            "backend aot_inductor's modes: default, max-autotune",
        ),
        (
            ["--backends", "inductor", "--modes", "default+fast"],
            "mode 'default+fast' is no mode of inductor",
        ),
        (
            ["--backends", "inductor,export", "--modes", "default"],
            "backend export has none of the modes default",
        ),
    ],
)
def test_modes_no_backend_has_exit_2_naming_the_modes(args, message, capsys, tmp_path):
    db = tmp_path / "zoo.duckdb"
    assert zoo_run(["--models", "test_resnet", *args, "--device", "cpu", "--db", str(db)]) == 2
    assert message in capsys.readouterr().err
    assert not db.exists()


def test_a_reduced_precision_export_casts_model_and_inputs():
    """A program exported under autocast keeps none of autocast's casts (its graph holds
    plain fp32 ops): export cells cast model and inputs instead, so the exported
    program computes in the cell's precision."""
    result = measure(Mlp(), backend="export", mode="non-strict", precision="bf16")
    assert result.status == "pass", result.error_message
    assert result.precision_treatment == "cast bf16 (model and inputs, eager too)"
    assert registry.get("aot_inductor").treatment == "cast"
