"""Is a train cell's slow eager step the cell's own, or its process's (issue 21)?

``train_step_gap.py`` found no program and no interleaving that reads ViT-B/16's eager
bf16 train step above the plain script's, the compiled neighbour included (host
GPU-c1b83e34, 5 rounds: every eager median 32.0-37.6 ms, GPU busy 31.7 ms). Yet a
``train`` cell, run alone, reads it 30-40% above that, with the same GPU busy time: the
extra is time the GPU waits for the host. So this script runs one real ``train`` cell
(``runner.cell.measure_cell``, as a worker does, without a lock) inside the same process
as a fresh copy of the benchmark's ``zoo`` program, and times that program in blocks
before the cell, right after it, and after dynamo's reset and a collection:

- slow only inside the cell: the cell's own objects (model, inputs, program) differ;
- slow after the cell too: the cell left the process slower (a hook, a mode, a thread,
  an allocator state), and the later rows narrow it down.

Meant for the GPU machine, nothing else running (about two minutes)::

    python benchmarks/train_cell_gap.py --model vit_base_patch16_224
"""

from __future__ import annotations

import argparse
import gc
import sys
import threading
from pathlib import Path

import timm
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import train_step_gap as gap
from runner.cell import measure_cell
from runner.plan import PlanOptions, plan_cells
from zoo import catalog

BLOCKS = 5


def fresh_zoo(model_name: str, batch: int) -> gap.Step:
    """A new model and the benchmark's ``zoo`` program on it (TrainStep, eager)."""
    torch.manual_seed(0)
    model = timm.create_model(model_name).to(gap.DEVICE).train()
    x = torch.randn(batch, *model.pretrained_cfg["input_size"], device=gap.DEVICE)
    y = torch.randint(0, model.num_classes, (batch,), device=gap.DEVICE)
    return gap.zoo(model, x, y)


def time_blocks(step: gap.Step) -> list[float]:
    samples: list[float] = []
    for _ in range(BLOCKS):
        for _ in range(gap.UNTIMED):
            step()
        samples += [gap.timed(step) for _ in range(gap.BLOCK)]
    return samples


def row(label: str, samples: list[float]) -> str:
    q1, median, q3 = gap.quartiles(samples)
    return f"| {label} | {q1:.2f} | {median:.2f} | {q3:.2f} | {len(samples)} |"


def process_state() -> str:
    """What a cell could leave behind that slows the host's launches."""
    threads = sorted(t.name for t in threading.enumerate())
    return (
        f"threads {threads}; grad enabled {torch.is_grad_enabled()}; "
        f"autocast {torch.is_autocast_enabled('cuda')}; "
        f"anomaly {torch.is_anomaly_enabled()}; "
        f"dispatch modes {torch._C._len_torch_dispatch_stack()}; "
        f"function modes {torch._C._len_torch_function_stack()}; "
        f"profiler {torch.autograd.profiler._is_profiler_enabled}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="vit_base_patch16_224")
    parser.add_argument("--batch-size", type=int, default=gap.BATCH)
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--device", default=gap.DEVICE, help="cpu: a smoke run")
    args = parser.parse_args()
    gap.DEVICE = args.device
    (spec,) = catalog.select([f"timm/{args.model}"])
    options = PlanOptions(
        backends=(args.backend,),
        modes=None,
        dynamic=("false",),
        precisions=("bf16",),
        steps=("train",),
        device=args.device,
        batch_size=args.batch_size,
    )
    (cell,) = plan_cells([spec], options, "bench").cells

    lines = [
        f"{args.model}, batch {args.batch_size}, bf16, {args.device}; the zoo program in "
        f"{BLOCKS} blocks of {gap.BLOCK} timed steps",
        "",
        "| when | event ms p25 | median | p75 | samples |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    lines.append(
        row("before the cell, fresh model", time_blocks(fresh_zoo(args.model, args.batch_size)))
    )
    before_state = process_state()
    result = measure_cell(cell)
    after_state = process_state()
    if result.eager_samples_ms:
        lines.append(row(f"the cell's eager side ({result.status})", result.eager_samples_ms))
        lines.append(row("the cell's compiled side", result.compiled_samples_ms or [0.0, 0.0]))
    else:
        lines.append(f"| the cell: {result.status} {result.error_message} | | | | |")
    lines.append(
        row("after the cell, fresh model", time_blocks(fresh_zoo(args.model, args.batch_size)))
    )
    torch._dynamo.reset()
    gc.collect()
    if args.device == "cuda":
        torch.cuda.empty_cache()
    lines.append(
        row(
            "after dynamo reset, gc, empty_cache",
            time_blocks(fresh_zoo(args.model, args.batch_size)),
        )
    )
    lines += [
        "",
        f"cell: eager GPU busy {result.eager_gpu_ms} ms, compiled GPU busy "
        f"{result.compiled_gpu_ms} ms, wall {result.wall_s:.1f} s",
        f"process before the cell: {before_state}",
        f"process after the cell: {after_state}",
        f"cell notes: {result.notes}",
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
