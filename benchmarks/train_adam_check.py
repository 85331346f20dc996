"""The training check of issue 21 as a plain script, outside zoo-matrix: one timm model's
train step (batch 64, 224 px, bf16 autocast, cross-entropy on random labels), eager and
with the model compiled (loss and optimizer eager, as timm's ``benchmark.py --bench
train``), under two Adams: torch's defaults (the article's) and
``Adam(foreach=True, capturable=True)`` (PyTorch's harness, and zoo-matrix's train
cells). Median of 30 steps after 6 untimed ones, wall and CUDA-event time, and the
optimizer step alone. Meant for the GPU machine, with nothing else running:

    python benchmarks/train_adam_check.py --models vit_base_patch16_224
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import timm
import torch

STEPS = 30
UNTIMED = 6
BATCH = 64


def plain_step(
    forward: Callable[[torch.Tensor], torch.Tensor],
    optimizer: torch.optim.Optimizer,
    x: torch.Tensor,
    y: torch.Tensor,
) -> Callable[[], None]:
    """The issue's step: zero_grad, forward and loss under bf16 autocast, backward and
    the optimizer step outside it."""

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(forward(x), y)
        loss.backward()
        optimizer.step()

    return step


def measure(name: str, capturable: bool, compiled: bool) -> dict[str, float]:
    torch.manual_seed(0)
    model = timm.create_model(name, num_classes=1000).cuda().train()
    options = {"foreach": True, "capturable": True} if capturable else {}
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, **options)
    forward = torch.compile(model) if compiled else model
    x = torch.randn(BATCH, 3, 224, 224, device="cuda")
    y = torch.randint(1000, (BATCH,), device="cuda")

    step = plain_step(forward, optimizer, x, y)
    start = time.perf_counter()
    step()
    torch.cuda.synchronize()
    first_s = time.perf_counter() - start
    for _ in range(UNTIMED - 1):
        step()
    walls, events = [], []
    for _ in range(STEPS):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start = time.perf_counter()
        begin.record()
        step()
        end.record()
        torch.cuda.synchronize()
        walls.append((time.perf_counter() - start) * 1e3)
        events.append(begin.elapsed_time(end))
    optimizer_ms = []
    for _ in range(10):
        torch.cuda.synchronize()
        start = time.perf_counter()
        optimizer.step()
        torch.cuda.synchronize()
        optimizer_ms.append((time.perf_counter() - start) * 1e3)
    return {
        "first_s": first_s,
        "wall_ms": statistics.median(walls),
        "event_ms": statistics.median(events),
        "optimizer_ms": statistics.median(optimizer_ms),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="vit_base_patch16_224")
    args = parser.parse_args()
    print("| model | Adam | compiled | first step s | wall ms | event ms | optimizer step ms |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    for name in args.models.split(","):
        for capturable in (False, True):
            for compiled in (False, True):
                # A second compiled model reuses the first one's graph (parameters are
                # graph inputs): its first step is not a compile time.
                row = measure(name, capturable, compiled)
                adam = "foreach, capturable" if capturable else "defaults"
                print(
                    f"| {name} | {adam} | {'model' if compiled else 'eager'} "
                    f"| {row['first_s']:.1f} | {row['wall_ms']:.1f} | {row['event_ms']:.1f} "
                    f"| {row['optimizer_ms']:.2f} |",
                    flush=True,
                )
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
