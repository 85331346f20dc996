"""Where zoo-run's eager train step loses time against a plain script's (issue 21).

A plain script's ViT-B/16 bf16 train step (batch 64, Adam foreach+capturable) takes
about 30 ms between its CUDA events on the H200; zoo-run's cells read 41-49 ms for the
same eager step, with 36 ms of GPU busy time in one profiled step. Two suspects remain
(docs/train-export-h200.md):

- **the autocast scope**: the cells ran backward and the optimizer step under autocast
  too (50 more cast kernels; fixed in 4acf21a);
- **interleaving**: a cell times its eager and compiled sides call by call, two model
  copies alternating, and a step near the edge of launch-bound may run slower so.

Sequential blocks of 30 steps could not tell them apart: one process read the same
program at 31.5 and 37.4 ms in two blocks. So this script times every combination of
program and interleaving in rounds (each round runs each combination once, as a block
of ``BLOCK`` timed steps after ``UNTIMED`` untimed ones, in a new order each round) and
reports medians and quartiles over all rounds, which drift hits alike:

- programs: ``script`` (the plain step: autocast around forward and loss), ``script,
  all autocast`` (backward and the optimizer step under autocast too), ``zoo``
  (``runner.steps.train.TrainStep`` called under autocast, as a cell calls it: the
  current scope), ``zoo, old scope`` (TrainStep with backward and the step under
  autocast, as before 4acf21a);
- interleaving: ``alone`` (one copy, step after step), ``pairs`` (two copies
  alternating call by call, as a cell's sides), ``blocks of 5`` (two copies
  alternating every 5 steps).

The GPU run of 2026-12-02 (two hosts) found no program and no interleaving of these
apart by more than the rounds' spread, while cells read ViT's eager step 35-60% above
this script's on the same host (resnet50's not at all). One difference from a cell was
left: a cell's eager step alternates with the *compiled* step, not with another eager
copy. So ``--compiled-neighbour`` compiles a train step as a default ``train`` cell does
(model and loss as one region, Inductor) and adds ``pairs, compiled neighbour`` (each
program alternating call by call with it) and the compiled step's own readings, alone
and paired with the eager ``zoo`` step (about 30 s more for the compile).

Then one profiled step of each program (GPU busy time and kernels). Meant for the GPU
machine, nothing else running (about two minutes):

    python benchmarks/train_step_gap.py --model vit_base_patch16_224 --compiled-neighbour
"""

from __future__ import annotations

import argparse
import copy
import random
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import timm
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.train_adam_check import plain_step
from runner.measure.profile import profile_call
from runner.measure.timing import cuda_event_ms, perf_counter_ms
from runner.steps.train import CrossEntropy, TrainStep

BATCH = 64
DEVICE = "cuda"
ROUNDS = 8
BLOCK = 10
UNTIMED = 3
Step = Callable[[], None]


def autocast() -> torch.autocast:
    return torch.autocast(DEVICE, dtype=torch.bfloat16)


def timed(step: Step) -> float:
    return cuda_event_ms(step) if DEVICE == "cuda" else perf_counter_ms(step)


def script(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> Step:
    capturable = DEVICE == "cuda"
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=True, capturable=capturable)
    return plain_step(model, optimizer, x, y)


def script_all_autocast(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> Step:
    step = script(model, x, y)

    def whole() -> None:
        with autocast():
            step()

    return whole


def zoo(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> Step:
    program = TrainStep(CrossEntropy(model), "adam", "model")

    def step() -> None:
        with autocast():
            program(x)

    return step


def zoo_old_scope(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> Step:
    """TrainStep as before 4acf21a: everything after zero_grad under the caller's
    autocast."""
    program = TrainStep(CrossEntropy(model), "adam", "model")

    def step() -> None:
        with autocast():
            program.optimizer.zero_grad(set_to_none=True)
            loss = program.region(x, *program.loss.targets((x,)))
            loss.backward()
            program.update()

    return step


PROGRAMS = {
    "script": script,
    "script, all autocast": script_all_autocast,
    "zoo": zoo,
    "zoo, old scope": zoo_old_scope,
}


def alone(first: Step, second: Step, count: int) -> list[float]:
    return [timed(first) for _ in range(count)]


def pairs(first: Step, second: Step, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        samples.append(timed(first))
        second()
    return samples


def blocks_of_5(first: Step, second: Step, count: int) -> list[float]:
    samples: list[float] = []
    while len(samples) < count:
        samples += [timed(first) for _ in range(min(5, count - len(samples)))]
        for _ in range(5):
            second()
    return samples


INTERLEAVINGS = {"alone": alone, "pairs": pairs, "blocks of 5": blocks_of_5}
COMPILED_NEIGHBOUR = "pairs, compiled neighbour"


def compiled_zoo(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> Step:
    """The compiled side of a default ``train`` cell: TrainStep with the model and its
    loss compiled as one region by Inductor, called under autocast."""
    program = TrainStep(CrossEntropy(model), "adam", "loss").compile_parts(torch.compile)

    def step() -> None:
        with autocast():
            program(x)

    return step


def quartiles(samples: list[float]) -> tuple[float, float, float]:
    q1, median, q3 = statistics.quantiles(samples, n=4)
    return q1, median, q3


def main() -> None:
    global DEVICE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="vit_base_patch16_224")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--batch-size", type=int, default=BATCH)
    parser.add_argument("--device", default=DEVICE, help="cpu: a smoke run of the script")
    parser.add_argument(
        "--compiled-neighbour",
        action="store_true",
        help="also time each program beside the compiled step, as a cell's eager side is",
    )
    args = parser.parse_args()
    DEVICE = args.device
    sync = torch.cuda.synchronize if DEVICE == "cuda" else lambda: None
    torch.manual_seed(0)
    base = timm.create_model(args.model, pretrained=False).to(DEVICE).train()
    x = torch.randn(args.batch_size, 3, 224, 224, device=DEVICE)
    y = torch.randint(1000, (args.batch_size,), device=DEVICE)
    # Two copies per program: the second is the neighbour that pairs and blocks alternate
    # with, a program of the same kind (a cell's two sides run the same step).
    steps = {
        name: (make(copy.deepcopy(base), x, y), make(copy.deepcopy(base), x, y))
        for name, make in PROGRAMS.items()
    }
    interleavings = dict(INTERLEAVINGS)
    if args.compiled_neighbour:
        compiled = compiled_zoo(copy.deepcopy(base), x, y)
        compiled()  # the compile, untimed
        sync()
        interleavings[COMPILED_NEIGHBOUR] = pairs
        # The compiled step's own readings: alone, and beside the eager zoo step.
        steps["compiled"] = (compiled, steps["zoo"][0])
    samples: dict[tuple[str, str], list[float]] = {
        (p, i): [] for p in PROGRAMS for i in interleavings
    }
    if args.compiled_neighbour:
        samples["compiled", "alone"] = []
        samples["compiled", "pairs with the eager zoo step"] = []
    order = list(samples)
    shuffler = random.Random(0)
    for _ in range(args.rounds):
        shuffler.shuffle(order)
        for program, interleaving in order:
            first, second = steps[program]
            if interleaving == COMPILED_NEIGHBOUR:
                second = steps["compiled"][0]
            run = interleavings.get(interleaving, pairs)
            run(first, second, UNTIMED)
            sync()
            samples[program, interleaving] += run(first, second, BLOCK)
    print(
        f"{args.model}, batch {args.batch_size}, bf16, {DEVICE}; {args.rounds} rounds of "
        f"{BLOCK} timed steps"
    )
    print("\n| program | interleaving | event ms p25 | median | p75 |")
    print("| --- | --- | ---: | ---: | ---: |")
    for program, interleaving in samples:
        q1, median, q3 = quartiles(samples[program, interleaving])
        print(f"| {program} | {interleaving} | {q1:.2f} | {median:.2f} | {q3:.2f} |")
    print("\n| program | GPU busy ms (one profiled step) | kernels |")
    print("| --- | ---: | ---: |")
    for program, (first, _) in steps.items():
        profiled = profile_call(first, sync, DEVICE == "cuda")
        print(f"| {program} | {profiled.gpu_ms or 0:.2f} | {profiled.kernels} |", flush=True)


if __name__ == "__main__":
    main()
