"""What autocast's scope does to a cell's figures: one region around every call, or one
region per call.

``torch.autocast`` caches the reduced-precision copy of each weight it casts (a leaf
tensor that requires grad) until the outermost autocast region exits. A timing loop
inside one region therefore runs eager without its weight casts after the first call,
while a compiled program (Inductor, AOT) casts inside its graph on every call; and the
first side called in a region leaves its casts cached for the other side's call (its
kernels, its GPU time and its peak memory). A user's loop enters autocast per call, as
PyTorch's harness and timm's benchmark do. This prints, per model, both sides' wall
time, kernels per call, GPU busy time and peak memory under each scope:

    python benchmarks/autocast_scope.py --models timm/resnet50,hf/BertModel

Meant for the GPU machine; on a CPU it is a smoke run (host time, operator counts, no
memory). It is a benchmark that prints a table, not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch

from runner.measure.profile import profile_call
from runner.measure.subject import REDUCED_DTYPES
from runner.measure.timing import cuda_event_ms, perf_counter_ms
from zoo.catalog import select

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
_time_ms = cuda_event_ms if DEVICE == "cuda" else perf_counter_ms
DEFAULT_MODELS = (
    "timm/resnet50,timm/vit_base_patch16_224,timm/efficientnet_b0,"
    "hf/BertModel,hf/GPT2Model,hf/SqueezeBertForMaskedLM"
)


def _sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def _peak_mb(fn: Callable[[], Any]) -> float | None:
    if DEVICE != "cuda":
        return None
    torch.cuda.reset_peak_memory_stats()
    fn()
    _sync()
    return torch.cuda.max_memory_allocated() / 2**20


def measure(eager: Callable[[], Any], compiled: Callable[[], Any], region, pairs: int) -> dict:
    """Both sides under one scope. ``region()`` is the autocast context: entered once
    around everything ("one region") or per call, by the caller's wrapping."""
    e, c = [], []
    with region():
        for _ in range(5):
            eager()
            compiled()
        _sync()
        for _ in range(pairs):
            e.append(_time_ms(eager))
            c.append(_time_ms(compiled))
    with region():
        pe = profile_call(eager, _sync, DEVICE == "cuda")
        pc = profile_call(compiled, _sync, DEVICE == "cuda")
    with region():
        me = _peak_mb(eager)
        mc = _peak_mb(compiled)
    return {
        "eager_ms": statistics.median(e),
        "compiled_ms": statistics.median(c),
        "eager_k": pe.kernels,
        "compiled_k": pc.kernels,
        "eager_gpu": pe.gpu_ms,
        "compiled_gpu": pc.gpu_ms,
        "eager_mb": me,
        "compiled_mb": mc,
    }


def _f(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--precision", default="bf16", choices=sorted(REDUCED_DTYPES))
    parser.add_argument("--size", default="full", choices=("full", "tiny"))
    parser.add_argument("--pairs", type=int, default=40)
    args = parser.parse_args()
    dtype = REDUCED_DTYPES[args.precision]
    gpu = torch.cuda.get_device_name() if DEVICE == "cuda" else "CPU (a smoke run)"
    print(f"torch {torch.__version__} · {gpu} · {args.backend} · {args.precision} autocast")
    print(
        "| model | scope | eager ms | compiled ms | speedup | eager kernels | compiled "
        "kernels | eager GPU ms | compiled GPU ms | eager peak MB | compiled peak MB |"
    )
    print("| --- " * 11 + "|")
    for spec in select([args.models]):
        spec = replace(spec, size=args.size, device=DEVICE)
        for scope, r in scopes(spec, args.backend, dtype, args.pairs).items():
            print(
                f"| {spec.id} | {scope} | {r['eager_ms']:.3f} | {r['compiled_ms']:.3f} | "
                f"{r['eager_ms'] / r['compiled_ms']:.3f}x | {r['eager_k']} | "
                f"{r['compiled_k']} | {_f(r['eager_gpu'], '.3f')} | "
                f"{_f(r['compiled_gpu'], '.3f')} | {_f(r['eager_mb'], '.0f')} | "
                f"{_f(r['compiled_mb'], '.0f')} |",
                flush=True,
            )
        if DEVICE == "cuda":
            torch.cuda.empty_cache()


def scopes(spec, backend: str, dtype: torch.dtype, pairs: int) -> dict[str, dict]:
    """One model, eager and compiled, measured under each scope."""
    model = spec.build().eval().to(DEVICE)
    # The headline's sizes: batch 64 for images, 16 x 128 for HF.
    inputs = spec.example_inputs(16 if spec.suite == "hf" else 64, DEVICE, 128)
    torch._dynamo.reset()
    program = torch.compile(model, backend=backend)

    def autocast() -> torch.autocast:
        return torch.autocast(DEVICE, dtype=dtype)

    def per_call(fn: Callable[..., Any]) -> Callable[[], Any]:
        def call() -> Any:
            with autocast():
                return fn(*inputs)

        return call

    with torch.no_grad():
        return {
            "one region": measure(
                lambda: model(*inputs), lambda: program(*inputs), autocast, pairs
            ),
            "per call": measure(per_call(model), per_call(program), contextlib.nullcontext, pairs),
        }


if __name__ == "__main__":
    main()
