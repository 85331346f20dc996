"""Failure classification and signatures, with real dynamo exceptions on CPU."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch._dynamo.backends.common import aot_autograd

from runner.measure.failure import (
    CROWDED,
    classify,
    headline,
    memory_note,
    normalize_message,
    signature,
    traceback_tail,
)


class Printing(nn.Module):
    def forward(self, x):
        x = x + 1
        print("graph break")
        return x * 2


class Relu(nn.Module):
    def forward(self, x):
        return torch.relu(x) + 1


def _raise_from(path: str):
    """A function whose frame claims to live at ``path`` (in torch's compiler code)."""
    namespace: dict = {}
    exec(compile("def fail():\n    raise ValueError('lowering failed')\n", path, "exec"), namespace)
    return namespace["fail"]


def _compile_error(model: nn.Module, backend, **options) -> BaseException:
    torch._dynamo.reset()
    try:
        torch.compile(model, backend=backend, **options)(torch.randn(4, 8))
    except Exception as exc:
        return exc
    finally:
        torch._dynamo.reset()
    raise AssertionError("compiling did not fail")


def _failing_backend(path: str):
    fail = _raise_from(path)

    def backend(gm, example_inputs):
        fail()

    return backend


@pytest.mark.parametrize(
    ("phase", "status"),
    [
        ("build", "build_error"),
        ("inputs", "build_error"),
        ("reference", "eager_error"),
        ("eager", "eager_error"),
    ],
)
def test_steps_before_compiling_name_their_status_and_phase(phase, status):
    assert classify(ValueError("bad"), phase) == (status, phase)


def test_an_out_of_memory_note_says_who_held_the_device():
    gib = 2**30
    crowded = memory_note(free=int(0.7 * gib), total=140 * gib, own=8 * gib)
    assert crowded.startswith(CROWDED + ": they held 131.3 of the device's 140.0 GiB")
    assert crowded.endswith("this process 8.0 GiB")
    alone = memory_note(free=gib, total=140 * gib, own=135 * gib)
    assert not alone.startswith(CROWDED)
    assert alone.startswith("out of memory holding 135.0 of the device's 140.0 GiB")
    # Others holding more than this process but under a quarter of the device: its own.
    assert not memory_note(free=100 * gib, total=140 * gib, own=10 * gib).startswith(CROWDED)


@pytest.mark.parametrize("phase", ["build", "eager", "compile", "compiled_run"])
def test_out_of_memory_is_oom_anywhere(phase):
    assert classify(torch.OutOfMemoryError("CUDA out of memory. Tried..."), phase)[0] == "oom"
    assert classify(RuntimeError("CUDA error: out of memory"), phase)[0] == "oom"
    assert classify(RuntimeError("size mismatch"), phase)[0] != "oom"


def test_unsupported_under_fullgraph_is_a_dynamo_trace_error():
    exc = _compile_error(Printing(), "eager", fullgraph=True)
    assert isinstance(exc, torch._dynamo.exc.Unsupported)
    assert classify(exc, "compile") == ("compile_error", "dynamo trace")
    assert signature(exc).startswith("Unsupported: Failed to trace builtin operator")


def test_backend_failure_inside_aot_autograd_is_aot():
    def fw_compiler(gm, example_inputs):
        raise RuntimeError("partitioner exploded")

    exc = _compile_error(Relu(), aot_autograd(fw_compiler=fw_compiler))
    assert isinstance(exc, torch._dynamo.exc.BackendCompilerFailed)
    assert classify(exc, "compile") == ("compile_error", "aot")
    assert signature(exc) == "BackendCompilerFailed: RuntimeError: partitioner exploded"


def test_backend_failure_inside_inductor_is_inductor_codegen():
    backend = _failing_backend("/venv/site-packages/torch/_inductor/graph.py")
    assert classify(_compile_error(Relu(), backend), "compile") == (
        "compile_error",
        "inductor codegen",
    )
    # inductor's decompositions run while AOTAutograd traces
    backend = _failing_backend("/venv/site-packages/torch/_inductor/decomposition.py")
    assert classify(_compile_error(Relu(), backend), "compile")[1] == "aot"


def test_backend_failure_elsewhere_names_the_step():
    exc = _compile_error(Relu(), "relu_compile_error_TESTING_ONLY")
    assert classify(exc, "compile") == ("compile_error", "compile")
    assert signature(exc) == (
        "BackendCompilerFailed: ReluCompileError in relu_compile_error_TESTING_ONLY (debugging.py)"
    )


def test_error_from_compiled_code_is_runtime():
    exc = _compile_error(Relu(), "relu_runtime_error_TESTING_ONLY")
    assert classify(exc, "compile") == ("compile_error", "runtime")
    assert classify(RuntimeError("index out of bounds"), "compiled_run") == (
        "compile_error",
        "runtime",
    )
    assert classify(RuntimeError("boom"), "probe")[0] == "compile_error"


@pytest.mark.parametrize(
    "messages",
    [
        (
            "Expected input[64, 3, 224, 224] to have 3 channels, but got 4 channels instead",
            "Expected input[8, 3, 384, 384] to have 3 channels, but got 1 channels instead",
        ),
        (
            "mat1 and mat2 shapes cannot be multiplied (4x768 and 512x10)",
            "mat1 and mat2 shapes cannot be multiplied (32x1024 and 2048x1000)",
        ),
        (
            "expected torch.Size([4, 8]) got torch.Size([4]) at /tmp/torchinductor_a/xy/cxy.py:12",
            "expected torch.Size([1, 16, 16]) got torch.Size([]) at /home/b/model.py:340",
        ),
        (
            "KeyError 'L__self___layer1_0_conv1' for <function f at 0x7f3a2b10>",
            "KeyError 'L__self___blocks_11_attn' for <function f at 0x55d0c0ffee>",
        ),
        (
            "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has 79.11 GiB",
            "CUDA out of memory. Tried to allocate 1.50 GiB. GPU 3 has 139.8 GiB",
        ),
        ("buffer 'buf12' of size s0*s1 is missing", "buffer 'buf3' of size s77*s2 is missing"),
    ],
)
def test_signatures_group_messages_that_differ_only_in_specifics(messages):
    first, second = (signature(RuntimeError(m)) for m in messages)
    assert first == second
    assert first.startswith("RuntimeError: ")


def test_signatures_keep_what_tells_failures_apart():
    assert signature(RuntimeError("conv2d failed")) != signature(RuntimeError("conv3d failed"))
    assert signature(ValueError("x")) != signature(TypeError("x"))
    assert normalize_message("dtype float32 in 'relu'") == "dtype float32 in 'relu'"


def test_signature_takes_the_first_meaningful_line_and_is_bounded():
    assert signature(RuntimeError("\n\n  Something broke\nmore detail")) == (
        "RuntimeError: Something broke"
    )
    assert signature(RuntimeError()) == "RuntimeError"
    assert len(signature(RuntimeError("word " * 500))) <= 300


def test_a_message_less_exception_is_named_by_where_it_was_raised():
    def get_current_exception():
        raise AssertionError

    try:
        get_current_exception()
    except AssertionError as exc:
        assert signature(exc) == "AssertionError in get_current_exception (test_failure.py)"
    # dynamo appends the user's stack to a bare assert: that is not its message
    assert signature(AssertionError("\n\nfrom user code:\n  File x.py, line 3")) == "AssertionError"


def test_dynamo_messages_keep_their_explanation_line():
    message = (
        "Data-dependent branching\n  Explanation: Detected data-dependent branching.\n"
        "  Hint: Use torch.cond.\n\n  Developer debug context: attempted to jump\n"
    )
    assert headline(message) == "Data-dependent branching: Detected data-dependent branching."


def test_fake_tensor_failures_keep_the_error_not_the_node():
    message = (
        "Dynamo failed to run FX node with fake tensors: call_function <built-in function add>"
        "(*(FakeTensor(..., size=(4, 8)), FakeTensor(..., size=(5, 8))), **{}): got "
        "RuntimeError('The size of tensor a (8) must match the size of tensor b (5)')"
    )
    assert signature(RuntimeError(message)) == (
        "RuntimeError: Dynamo failed to run FX node with fake tensors: got RuntimeError('The size "
        "of tensor a <shape> must match the size of tensor b <shape>')"
    )


def test_traceback_tail_is_the_end_of_the_traceback():
    try:
        raise ValueError("x" * 10_000 + " the end")
    except ValueError as exc:
        tail = traceback_tail(exc, limit_chars=100)
    assert len(tail) <= 103
    assert tail.rstrip().endswith("the end")
