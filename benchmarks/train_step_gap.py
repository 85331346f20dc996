"""Where zoo-run's eager train step loses time against a plain script's (issue 21).

zoo-run's `train+model` bf16 cell of ViT-B/16 reads 41.4 ms a step eager (CUDA events,
median) and 37.0 ms of GPU busy time in one profiled step, alone on the H200; a plain
script's step with the same Adam (foreach, capturable) takes 30.2 ms between its events
(docs/train-export-h200.md). This script runs, in one process on the GPU, nothing else
beside it:

- ``script``: the plain script's step (train_adam_check.py's, capturable Adam);
- ``zoo``: zoo-matrix's own eager step (``runner.steps.train.TrainStep`` with its
  cross-entropy loss), the whole call under autocast as the cell protocol calls it,
  timed by ``runner.measure.timing.cuda_event_ms`` as the cells are;
- ``zoo interleaved``: the same, alternating call by call with a second copy of the
  model and its own Adam (the compiled side of a cell, here eager too).

For each: the median of 30 timed steps after 6 untimed ones (events and wall), then one
profiled step's GPU busy time and kernel count (``runner.measure.profile``). Then the
kernels whose total time differs most between ``script`` and ``zoo``. Meant for the GPU
machine:

    python benchmarks/train_step_gap.py --model vit_base_patch16_224
"""

from __future__ import annotations

import argparse
import collections
import copy
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import timm
import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.train_adam_check import plain_step
from runner.measure.profile import profile_call
from runner.measure.timing import cuda_event_ms
from runner.steps.train import CrossEntropy, TrainStep

STEPS = 30
UNTIMED = 6
BATCH = 64


def script_step(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=True, capturable=True)
    return plain_step(model, optimizer, x, y)


def script_step_all_autocast(
    model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor
) -> Callable[[], None]:
    """The plain step with backward and the optimizer step inside autocast too, as a
    cell calls its program."""
    step = script_step(model, x, y)

    def whole() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            step()

    return whole


def zoo_step(model: torch.nn.Module, x: torch.Tensor) -> Callable[[], None]:
    program = TrainStep(CrossEntropy(model), "adam", "model")

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            program(x)

    return step


def zoo_step_region_autocast(model: torch.nn.Module, x: torch.Tensor) -> Callable[[], None]:
    """zoo-matrix's step with autocast around the model and its loss only: backward and
    the optimizer step outside it, as the plain script runs them."""
    program = TrainStep(CrossEntropy(model), "adam", "model")
    region = program.region

    def autocast_region(*args):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return region(*args)

    program.region = autocast_region
    return lambda: program(x)


def timed(steps: list[Callable[[], None]]) -> tuple[float, float]:
    """Median event and wall ms of ``steps[0]``, the steps called in turn."""
    for _ in range(UNTIMED):
        for step in steps:
            step()
    torch.cuda.synchronize()
    events, walls = [], []
    for _ in range(STEPS):
        for number, step in enumerate(steps):
            start = time.perf_counter()
            ms = cuda_event_ms(step)
            if number == 0:
                events.append(ms)
                walls.append((time.perf_counter() - start) * 1e3)
    return statistics.median(events), statistics.median(walls)


def kernels(step: Callable[[], None]) -> tuple[collections.Counter, collections.Counter]:
    """Total device microseconds and launches per kernel name over one step."""
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    totals: collections.Counter = collections.Counter()
    counts: collections.Counter = collections.Counter()
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            totals[event.name] += event.device_time
            counts[event.name] += 1
    return totals, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="vit_base_patch16_224")
    args = parser.parse_args()
    torch.manual_seed(0)
    base = timm.create_model(args.model, pretrained=False).cuda().train()
    x = torch.randn(BATCH, 3, 224, 224, device="cuda")
    y = torch.randint(1000, (BATCH,), device="cuda")
    variants = {
        "script": [script_step(copy.deepcopy(base), x, y)],
        "script, whole step under autocast": [script_step_all_autocast(copy.deepcopy(base), x, y)],
        "zoo": [zoo_step(copy.deepcopy(base), x)],
        "zoo, autocast around model and loss only": [
            zoo_step_region_autocast(copy.deepcopy(base), x)
        ],
        "zoo interleaved": [zoo_step(copy.deepcopy(base), x), zoo_step(copy.deepcopy(base), x)],
    }
    print("| variant | event ms | wall ms | GPU busy ms (one profiled step) | kernels |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, steps in variants.items():
        event_ms, wall_ms = timed(steps)
        profiled = profile_call(steps[0], torch.cuda.synchronize, True)
        print(
            f"| {name} | {event_ms:.2f} | {wall_ms:.2f} | {profiled.gpu_ms or 0:.2f} "
            f"| {profiled.kernels} |",
            flush=True,
        )
    (script, script_n), (zoo, zoo_n) = (kernels(variants[k][0]) for k in ("script", "zoo"))
    print("\n| kernel | script us (launches) | zoo us (launches) | zoo - script us |")
    print("| --- | ---: | ---: | ---: |")
    order = lambda n: (-abs(zoo[n] - script[n]), -abs(zoo_n[n] - script_n[n]))  # noqa: E731
    names = sorted(set(script) | set(zoo), key=order)
    changed = [n for n in names if zoo_n[n] != script_n[n]]
    for name in (names[:15] + [n for n in changed if n not in names[:15]])[:30]:
        shown = name.replace("|", "/")[:90]
        print(
            f"| {shown} | {script[name]:.0f} ({script_n[name]}) | {zoo[name]:.0f} "
            f"({zoo_n[name]}) | {zoo[name] - script[name]:+.0f} |"
        )


if __name__ == "__main__":
    main()
