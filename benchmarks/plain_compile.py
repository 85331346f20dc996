"""A plain torch.compile measurement, outside zoo-matrix, to check its numbers against.

Builds timm models, times eager and ``torch.compile``d calls under bf16 autocast with
CUDA events (warm-ups, then medians of interleaved repeats) and prints a table. Meant
for the GPU machine:

    python benchmarks/plain_compile.py --models resnet50,vit_base_patch16_224
"""

from __future__ import annotations

import argparse
import statistics
import time

import timm
import torch


def _time_ms(fn) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def measure(name: str, batch: int, mode: str | None, repeats: int) -> dict[str, float]:
    model = timm.create_model(name, pretrained=False).eval().cuda()
    x = torch.randn(batch, *model.pretrained_cfg["input_size"], device="cuda")
    compiled = torch.compile(model, mode=mode)
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        for _ in range(3):
            model(x)
        torch.cuda.synchronize()
        start = time.perf_counter()
        compiled(x)
        torch.cuda.synchronize()
        first_call_s = time.perf_counter() - start
        for _ in range(3):
            compiled(x)
        eager, comp = [], []
        for _ in range(repeats):
            eager.append(_time_ms(lambda: model(x)))
            comp.append(_time_ms(lambda: compiled(x)))
    e, c = statistics.median(eager), statistics.median(comp)
    return {"eager_ms": e, "compiled_ms": c, "speedup": e / c, "first_call_s": first_call_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--mode", default=None)
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    print(f"torch {torch.__version__} · {torch.cuda.get_device_name()} · batch {args.batch_size}")
    print(f"{'model':32} {'eager ms':>9} {'compiled ms':>12} {'speedup':>8} {'1st call s':>11}")
    for name in args.models.split(","):
        torch._dynamo.reset()
        row = measure(name, args.batch_size, args.mode, args.repeats)
        print(
            f"{name:32} {row['eager_ms']:9.2f} {row['compiled_ms']:12.2f} "
            f"{row['speedup']:7.2f}x {row['first_call_s']:11.1f}"
        )


if __name__ == "__main__":
    main()
