"""What disturbs a timed eager call: neighbours on the GPU, or on the host's cores.

Times one model (timm resnet50, batch 64, cast to bf16: an XLA cell's eager baseline)
in this process two ways, in alternating blocks of 5 calls: ``eager`` (a kernel launch
per op, as a baseline runs) and ``graph`` (the same forward replayed as one CUDA graph,
the few-launch shape of an XLA or cudagraph call). Each condition starts its
neighbours, times, and stops them:

    quiet          nothing else runs
    2 cores        this process on 2 cores (``--timing-cpus 2``), nothing else runs
    cpu busy       2 cores; busy Python loops on every other core (compiling workers)
    gpu fp64       a process looping the model's fp64 forward on the GPU (a neighbour's
                   accuracy reference, which zoo-run does not lock)
    gpu eager      a process looping the bf16 eager forward (a neighbour's eager outputs)

Prints median and quartiles of each side and the eager/graph ratio: a disturbance that
hits one side more than the other moves a cell's speedup. Meant for the GPU machine:

    python benchmarks/timing_noise.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import torch

from runner.gpu_lock import move_threads

BLOCK = 5


def build(name: str, batch: int, dtype: torch.dtype):
    import timm

    model = timm.create_model(name, pretrained=False).eval().cuda().to(dtype)
    x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=dtype)
    return model, x


def neighbour(kind: str, name: str, batch: int) -> None:
    """Loops forever; prints a line once its work runs."""
    dtype = torch.float64 if kind == "gpu-fp64" else torch.bfloat16
    with torch.no_grad():
        if kind == "cpu":
            print("running", flush=True)
            while True:
                pass
        model, x = build(name, batch, dtype)
        model(x)
        torch.cuda.synchronize()
        print("running", flush=True)
        while True:
            model(x)
            torch.cuda.synchronize()


def start_neighbours(kind: str, count: int, cpus: set[int], args) -> list[subprocess.Popen]:
    procs = []
    for i in range(count):
        cores = {sorted(cpus)[i % len(cpus)]} if kind == "cpu" else cpus
        proc = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--neighbour",
                kind,
                "--model",
                args.model,
                "--batch",
                str(args.batch),
            ],
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=lambda c=cores: os.sched_setaffinity(0, c),
        )
        procs.append(proc)
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "running"
    return procs


def time_sides(model, x, graph, static_out, calls: int) -> tuple[list[float], list[float]]:
    def synced(fn) -> float:
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) * 1000

    eager: list[float] = []
    replay: list[float] = []
    for _ in range(5):
        model(x)
        graph.replay()
    torch.cuda.synchronize()
    while len(eager) < calls:
        eager += [synced(lambda: model(x)) for _ in range(BLOCK)]
        replay += [synced(graph.replay) for _ in range(BLOCK)]
    return eager, replay


def quartiles(samples: list[float]) -> tuple[float, float, float]:
    p25, med, p75 = statistics.quantiles(samples, n=4, method="inclusive")
    return p25, med, p75


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--neighbour", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.neighbour:
        neighbour(args.neighbour, args.model, args.batch)
        return 0

    all_cpus = set(os.sched_getaffinity(0))
    timing = set(sorted(all_cpus)[:2])
    others = all_cpus - timing
    torch.backends.cudnn.benchmark = False
    with torch.no_grad():
        model, x = build(args.model, args.batch, torch.bfloat16)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                model(x)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = model(x)

        conditions = [
            ("quiet", all_cpus, None, 0),
            ("2 cores", timing, None, 0),
            ("cpu busy", timing, "cpu", len(others)),
            ("gpu fp64", timing, "gpu-fp64", 1),
            ("gpu eager", timing, "gpu-eager", 1),
            ("quiet again", all_cpus, None, 0),
        ]
        print(
            f"{args.model} batch {args.batch} bf16 on {torch.cuda.get_device_name()}, "
            f"{args.calls} calls a side in blocks of {BLOCK}; host ms per call"
        )
        print(
            f"{'condition':<12} {'eager p25/med/p75':>22} {'graph p25/med/p75':>22} "
            f"{'eager/graph':>12}"
        )
        for name, cpus, kind, count in conditions:
            move_threads(cpus)
            procs = start_neighbours(kind, count, others, args) if kind else []
            try:
                eager, replay = time_sides(model, x, graph, static_out, args.calls)
            finally:
                for proc in procs:
                    proc.kill()
                    proc.wait()
            e, g = quartiles(eager), quartiles(replay)
            print(
                f"{name:<12} {e[0]:6.2f} {e[1]:6.2f} {e[2]:6.2f}   "
                f"{g[0]:6.2f} {g[1]:6.2f} {g[2]:6.2f}   {e[1] / g[1]:10.2f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
