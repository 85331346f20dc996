"""Why is a compiled model faster or slower? Kernels, breaks and recompiles, side by side.

For each model (built exactly as a zoo-matrix cell builds it: same spec, size, inputs)
and each ``dynamic`` setting, this prints eager and compiled latency, dynamo's graphs,
graph breaks and recompiles (on the runner's shape probe too: batch and sequence halved;
TORCH_LOGS=recompiles says why a graph was recompiled),
and what the GPU ran per call: the kernel count, the GPU-busy time, the attention
kernels and the top kernels by time, from ``torch.profiler``. ``--variants ids`` also
runs the model on its first input alone (no attention mask), to see what the mask
costs. Meant for the GPU machine:

    python benchmarks/hf_explain.py --models hf/BertModel,hf/GPT2Model --dynamic false,true

It is a benchmark that prints a table, not a test.
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter, defaultdict
from dataclasses import replace

import torch
from torch._dynamo.utils import counters
from torch.profiler import ProfilerActivity, profile

from runner.measure.subject import REDUCED_DTYPES as AUTOCAST_DTYPES
from runner.measure.timing import cuda_event_ms, perf_counter_ms
from zoo.catalog import select

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DYNAMIC = {"false": False, "true": True, "auto": None}
ATTENTION_KINDS = (
    ("flash", ("flash",)),
    ("mem-efficient", ("fmha", "efficient_attention", "cutlass")),
    ("cudnn", ("cudnn",)),
)


# The cells' own timers: CUDA events on the GPU, the host clock on a CPU smoke run.
_time_ms = cuda_event_ms if DEVICE == "cuda" else perf_counter_ms


def _latency(eager, compiled, pairs: int) -> tuple[float, float]:
    for _ in range(10):
        eager()
        compiled()
    _sync()
    e, c = [], []
    for _ in range(pairs):
        e.append(_time_ms(eager))
        c.append(_time_ms(compiled))
    return statistics.median(e), statistics.median(c)


def kernel_profile(fn, calls: int = 10) -> dict:
    """Kernels launched per call and GPU time per call, by kernel name."""
    on_cuda = torch.cuda.is_available()
    fn()
    _sync()
    activity = ProfilerActivity.CUDA if on_cuda else ProfilerActivity.CPU
    with profile(activities=[activity]) as prof:
        for _ in range(calls):
            fn()
        _sync()
    by_name: dict[str, list[float]] = defaultdict(list)
    for event in prof.events():
        if on_cuda and event.device_type == torch.autograd.DeviceType.CUDA:
            by_name[event.name].append(event.device_time_total / 1000.0)
        elif not on_cuda and event.cpu_parent is None:  # top-level CPU ops
            by_name[event.name].append(event.cpu_time_total / 1000.0)
    total = sum(sum(times) for times in by_name.values())
    count = sum(len(times) for times in by_name.values())
    top = sorted(by_name.items(), key=lambda item: -sum(item[1]))
    return {
        "kernels_per_call": count / calls,
        "gpu_ms_per_call": total / calls,
        "top": [(name, sum(times) / calls, len(times) / calls) for name, times in top[:8]],
        "attention": sorted(
            {kind for name in by_name for kind, parts in ATTENTION_KINDS if _any_in(parts, name)}
        ),
    }


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _any_in(parts: tuple[str, ...], name: str) -> bool:
    lowered = name.lower()
    return any(part in lowered for part in parts)


def explain(model, inputs, probe, dynamic: str, precision: str, pairs: int) -> dict:
    """``probe``: the inputs at half the batch and sequence, made as the runner makes them."""
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(model, dynamic=DYNAMIC[dynamic])
    dtype = AUTOCAST_DTYPES.get(precision)
    autocast = torch.autocast(DEVICE, dtype=dtype, enabled=dtype is not None)
    with torch.no_grad(), autocast:
        compiled(*inputs)
        graphs = counters["stats"]["unique_graphs"]
        breaks = Counter({reason: n for reason, n in counters["graph_break"].items()})
        compiled(*probe)
        after_probe = counters["stats"]["unique_graphs"]
        eager_ms, compiled_ms = _latency(lambda: model(*inputs), lambda: compiled(*inputs), pairs)
        eager_k = kernel_profile(lambda: model(*inputs))
        compiled_k = kernel_profile(lambda: compiled(*inputs))
    return {
        "eager_ms": eager_ms,
        "compiled_ms": compiled_ms,
        "graphs": graphs,
        "breaks": breaks,
        "probe_new_graphs": after_probe - graphs,
        "eager": eager_k,
        "compiled": compiled_k,
    }


def _print(title: str, row: dict) -> None:
    speedup = row["eager_ms"] / row["compiled_ms"]
    print(f"\n== {title}")
    print(
        f"eager {row['eager_ms']:.3f} ms · compiled {row['compiled_ms']:.3f} ms · "
        f"speedup {speedup:.2f}x · graphs {row['graphs']} · breaks "
        f"{sum(row['breaks'].values())} · new graphs on the halved shape "
        f"{row['probe_new_graphs']}"
    )
    for reason, n in row["breaks"].most_common(5):
        print(f"  break x{n}: {reason[:160]}")
    for side in ("eager", "compiled"):
        k = row[side]
        attention = ", ".join(k["attention"]) or "none (math: matmul + softmax kernels)"
        print(
            f"  {side:8} kernels/call {k['kernels_per_call']:6.0f} · GPU busy "
            f"{k['gpu_ms_per_call']:.3f} ms/call · attention kernels: {attention}"
        )
        for name, ms, n in k["top"]:
            print(f"      {ms:7.3f} ms  x{n:4.0f}  {name[:110]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="hf/BertModel,hf/GPT2Model")
    parser.add_argument("--dynamic", default="false,true")
    parser.add_argument("--precision", default="bf16", choices=("bf16", "fp16", "fp32"))
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--size", default="full", choices=("full", "tiny"))
    parser.add_argument("--variants", default="all", help="all, or all,ids")
    parser.add_argument("--pairs", type=int, default=50)
    args = parser.parse_args()
    if args.precision == "fp32":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    gpu = torch.cuda.get_device_name() if DEVICE == "cuda" else "CPU (a smoke run)"
    print(
        f"torch {torch.__version__} · {gpu} · batch "
        f"{args.batch_size} · seq {args.seq_len} · {args.precision} · size {args.size}"
    )
    for spec in select([args.models]):
        spec = replace(spec, size=args.size, device=DEVICE)
        model = spec.build().eval().to(DEVICE)
        inputs = spec.example_inputs(args.batch_size, DEVICE, args.seq_len)
        probe = spec.example_inputs(max(2, args.batch_size // 2), DEVICE, args.seq_len // 2)
        names = getattr(model, "input_names", ())
        for variant in args.variants.split(","):
            if variant == "ids":
                model.input_names, used, used_probe = names[:1], inputs[:1], probe[:1]
            else:
                model.input_names, used, used_probe = names, inputs, probe
            for dynamic in args.dynamic.split(","):
                row = explain(model, used, used_probe, dynamic, args.precision, args.pairs)
                inputs_text = ", ".join(model.input_names) if names else "positional"
                _print(f"{spec.id} · dynamic={dynamic} · inputs: {inputs_text}", row)
        model.input_names = names
        del model
        if DEVICE == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
