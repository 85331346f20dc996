"""What disturbs a timed eager call: neighbours on the GPU, or on the host's cores.

Builds each model as an XLA cell's eager baseline does (``zoo-run``'s batch and
sequence for it, model and inputs cast to bf16) and times it in this process two ways,
in alternating blocks of 5 calls: ``eager`` (a kernel launch per op, as a baseline
runs) and ``graph`` (the same forward replayed as one CUDA graph, the few-launch shape
of an XLA or cudagraph call). Each condition starts its neighbours, times, stops them:

    quiet          nothing else runs
    2 cores        this process on 2 cores (``--timing-cpus 2``), nothing else runs
    cpu busy       2 cores; a busy loop on every other core (compiling workers)
    cpu memory     2 cores; a memory-copying loop on every other core
    gpu fp64       2 cores; a process looping the model's fp64 forward on the GPU (a
                   neighbour's accuracy reference)

Prints, per model and condition, median and quartiles of each side (host ms per call,
synchronized) and the eager/graph ratio: a disturbance that hits one side more than the
other moves a cell's speedup. A launch-bound model (deit_small, BERT) shows what a
GPU-bound one (resnet50) hides: whether a slower host slows its eager calls. Meant for
the GPU machine:

    python benchmarks/timing_noise.py --models timm/resnet50,timm/deit_small_patch16_224,hf/BertForMaskedLM
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

BLOCK = 5
CONDITIONS = (
    # name, timing cores ("all" or "2"), neighbour kind, how many (per other core: -1)
    ("quiet", "all", None, 0),
    ("2 cores", "2", None, 0),
    ("cpu busy", "2", "cpu", -1),
    ("cpu memory", "2", "memory", -1),
    ("gpu fp64", "2", "gpu-fp64", 1),
    ("quiet again", "all", None, 0),
)


def build(model_id: str, precision: str, device: str = "cuda"):
    """The model and inputs as a cell on ``device`` builds them, cast to ``precision``."""
    import torch

    from runner.measure.subject import Subject
    from runner.measure.tensors import cast_floats
    from runner.plan import PlanOptions, plan_cells
    from zoo.catalog import select

    options = PlanOptions(
        backends=("eager",),
        modes=("default",),
        dynamic=("false",),
        precisions=("fp32",),
        steps=("infer",),
        device=device,
    )
    cell = plan_cells(select([model_id]), options, "noise").cells[0]
    subject = Subject.build(cell)
    subject.model.eval()
    subject.load_inputs()
    dtype = {"bf16": torch.bfloat16, "fp64": torch.float64}[precision]
    return subject.model.to(dtype), cast_floats(subject.inputs, dtype)


def neighbour(kind: str, model_id: str) -> None:
    """Loops until killed; prints ``running`` once its work runs."""
    if kind == "cpu":
        print("running", flush=True)
        while True:
            pass
    if kind == "memory":
        source, target = bytearray(256 << 20), bytearray(256 << 20)
        print("running", flush=True)
        while True:
            target[:] = source
    import torch

    model, inputs = build(model_id, "fp64")
    with torch.no_grad():
        model(*inputs)
        torch.cuda.synchronize()
        print("running", flush=True)
        while True:
            model(*inputs)
            torch.cuda.synchronize()


def start_neighbours(kind: str, count: int, cores: list[int], model_id: str) -> list:
    procs = []
    for i in range(len(cores) if count < 0 else count):
        allowed = {cores[i]} if count < 0 else set(cores)
        procs.append(
            subprocess.Popen(
                [sys.executable, __file__, "--neighbour", kind, "--models", model_id],
                stdout=subprocess.PIPE,
                text=True,
                preexec_fn=lambda allowed=allowed: os.sched_setaffinity(0, allowed),
            )
        )
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "running"
    return procs


def time_sides(eager_call, graph, calls: int) -> tuple[list[float], list[float]]:
    import torch

    def synced(fn) -> float:
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) * 1000

    eager: list[float] = []
    replay: list[float] = []
    for _ in range(5):
        eager_call()
        if graph is not None:
            graph.replay()
    torch.cuda.synchronize()
    while len(eager) < calls:
        eager += [synced(eager_call) for _ in range(BLOCK)]
        if graph is not None:
            replay += [synced(graph.replay) for _ in range(BLOCK)]
    return eager, replay or [float("nan")]


def capture(eager_call):
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            eager_call()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        eager_call()
    return graph


def quartiles(samples: list[float]) -> tuple[float, float, float]:
    if len(samples) < 2:
        return samples[0], samples[0], samples[0]
    p25, med, p75 = statistics.quantiles(samples, n=4, method="inclusive")
    return p25, med, p75


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="timm/resnet50")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--neighbour", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.neighbour:
        neighbour(args.neighbour, args.models)
        return 0

    import torch

    from runner.measure.host import move_threads

    all_cpus = sorted(os.sched_getaffinity(0))
    timing, others = all_cpus[-2:], all_cpus[:-2]
    print(
        f"{torch.cuda.get_device_name()}, {len(all_cpus)} cores (timing on {timing}); "
        f"{args.calls} calls a side in blocks of {BLOCK}; host ms per call, bf16 cast"
    )
    siblings = "/sys/devices/system/cpu/cpu{}/topology/thread_siblings_list"
    for cpu in timing:
        try:
            with open(siblings.format(cpu)) as f:
                print(f"core {cpu} SMT siblings: {f.read().strip()}")
        except OSError:
            print(f"core {cpu} SMT siblings: unknown")
    print(
        f"{'model':<28} {'condition':<12} {'eager p25/med/p75':>22} "
        f"{'graph p25/med/p75':>22} {'eager/graph':>12}"
    )
    for model_id in args.models.split(","):
        with torch.no_grad():
            model, inputs = build(model_id, "bf16")

            def eager_call(model=model, inputs=inputs):
                return model(*inputs)

            try:
                graph = capture(eager_call)
            except Exception as error:  # a model CUDA graphs cannot capture: eager only
                print(f"{model_id}: no CUDA graph ({type(error).__name__}: {error})"[:200])
                graph = None
            for name, where, kind, count in CONDITIONS:
                move_threads(all_cpus if where == "all" else timing)
                procs = start_neighbours(kind, count, others, model_id) if kind else []
                try:
                    eager, replay = time_sides(eager_call, graph, args.calls)
                finally:
                    for proc in procs:
                        proc.kill()
                        proc.wait()
                e, g = quartiles(eager), quartiles(replay)
                print(
                    f"{model_id[:28]:<28} {name:<12} {e[0]:6.2f} {e[1]:6.2f} {e[2]:6.2f}   "
                    f"{g[0]:6.2f} {g[1]:6.2f} {g[2]:6.2f}   {e[1] / g[1]:10.2f}",
                    flush=True,
                )
            del model, inputs, graph
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
