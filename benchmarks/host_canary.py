"""Does the launch canary see what slows a launch-bound cell's timing?

zoo-run reads a launch canary before and after each cell's timed calls
(``runner.measure.timing.launch_canary_us``: the host's microseconds per call of a tiny
operator on the device) into ``host_launch_us``. This script asks whether that reading
follows the latency of a launch-bound model's eager calls, which drifts on the GPU
machine's host by up to 2x with nothing else running (docs/PERFORMANCE.md), and whether
a GPU-bound call (the same forward as one CUDA graph replay) stays put meanwhile.

For each condition in turn (its neighbours started on the other cores, this process on
the last two, as ``--timing-cpus 2`` leaves a timing worker), it repeats rounds of:
canary, ``--calls`` eager calls, ``--calls`` graph replays, canary; a round keeps the
two canaries' slower reading (as a cell does) and each side's median. Conditions:

    quiet         nothing else runs
    compile       on every other core, a process compiling small models with Inductor
                  in a loop, caches off (what a sweep's other workers do)
    cpu busy      on every other core, a busy loop
    memory        on every other core, a loop copying 256 MB
    quiet again   nothing else runs

Prints a table per condition (the canary, eager and graph medians, and their spread
over rounds) and, over all rounds, the rank correlation of the canary with eager and
with graph latency. Meant for the GPU machine:

    python benchmarks/host_canary.py --models timm/deit_small_patch16_224 --seconds 40
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import timing_noise
from timing_noise import build, capture

from runner.report import rank_correlation

CONDITIONS = (
    ("quiet", None),
    ("compile", "compile"),
    ("cpu busy", "cpu"),
    ("memory", "memory"),
    ("quiet again", None),
)


def neighbour(kind: str) -> None:
    """Loops until killed; prints ``running`` once its work runs. ``compile`` is this
    script's own; the others are benchmarks/timing_noise.py's."""
    if kind == "compile":
        os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
        import torch

        torch.set_num_threads(1)
        width = 64
        print("running", flush=True)
        while True:
            width = 64 if width >= 512 else width + 32
            model = torch.nn.Sequential(
                *(torch.nn.Linear(width, width) for _ in range(6)), torch.nn.GELU()
            )
            torch._dynamo.reset()
            torch.compile(model)(torch.randn(8, width))
    if kind not in ("cpu", "memory"):
        raise SystemExit(f"unknown neighbour {kind}")
    timing_noise.neighbour(kind, model_id="")  # a busy loop or memory copies


def start_neighbours(kind: str, cores: list[int]) -> list[subprocess.Popen]:
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--neighbour", kind],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            preexec_fn=lambda core=core: os.sched_setaffinity(0, {core}),
        )
        for core in cores
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "running"
    return procs


def rho(xs: list[float], ys: list[float]) -> str:
    """Their rank correlation (``runner.report.rank_correlation``), "-" below 3 pairs."""
    value = rank_correlation(xs, ys)
    return "-" if value is None else f"{value:.2f}"


def spread(values: list[float]) -> str:
    """Median and the 10th-90th percentile range."""
    if len(values) < 2:
        return f"{values[0]:.2f}" if values else "-"
    deciles = statistics.quantiles(values, n=10, method="inclusive")
    return f"{statistics.median(values):.2f} ({deciles[0]:.2f}-{deciles[-1]:.2f})"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="timm/deit_small_patch16_224")
    parser.add_argument("--calls", type=int, default=20, help="calls a side per round")
    parser.add_argument("--seconds", type=float, default=40.0, help="per condition")
    parser.add_argument(
        "--conditions",
        default=",".join(name for name, _ in CONDITIONS),
        help="which conditions, comma-separated (default: all)",
    )
    parser.add_argument(
        "--idle-ms",
        type=float,
        default=0.0,
        help="sleep this long between rounds (a worker waiting on a long GPU call)",
    )
    parser.add_argument(
        "--device", default="cuda", help="cpu: a smoke run (no graph side, no canary launch)"
    )
    parser.add_argument("--neighbour", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.neighbour:
        neighbour(args.neighbour)
        return 0

    import torch

    from runner.measure.host import move_threads
    from runner.measure.timing import launch_canary_us

    chosen = args.conditions.split(",")
    conditions = [(name, kind) for name, kind in CONDITIONS if name in chosen]
    if len(conditions) != len(chosen):
        known = ", ".join(name for name, _ in CONDITIONS)
        parser.error(f"--conditions: each one of {known}")
    device = torch.device(args.device)
    on_cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if on_cuda else (lambda: None)
    name = torch.cuda.get_device_name() if on_cuda else "CPU"
    all_cpus = sorted(os.sched_getaffinity(0))
    timing, others = all_cpus[-2:], all_cpus[:-2]
    print(
        f"{name}, {len(all_cpus)} cores (timing on {timing}); "
        f"rounds of {args.calls} eager calls and {args.calls} graph replays between two "
        f"canary readings, {args.seconds:.0f} s per condition; ms per call (host clock, "
        "synchronized), canary in µs per tiny call"
    )

    def synced(fn) -> float:
        start = time.perf_counter()
        fn()
        sync()
        return (time.perf_counter() - start) * 1000

    rows: list[tuple[str, str, float, float, float]] = []
    for model_id in args.models.split(","):
        with torch.no_grad():
            model, inputs = build(model_id, "bf16", args.device)

            def eager_call(model=model, inputs=inputs):
                return model(*inputs)

            replay = capture(eager_call).replay if on_cuda else eager_call
            for _ in range(5):
                eager_call()
                replay()
            sync()
            for name, kind in conditions:
                move_threads(timing)
                procs = start_neighbours(kind, others) if kind else []
                try:
                    started = time.perf_counter()
                    while time.perf_counter() - started < args.seconds:
                        time.sleep(args.idle_ms / 1000)
                        before = launch_canary_us(device)
                        eager = statistics.median(synced(eager_call) for _ in range(args.calls))
                        graph = statistics.median(synced(replay) for _ in range(args.calls))
                        canary = max(before, launch_canary_us(device))
                        rows.append((model_id, name, canary, eager, graph))
                finally:
                    for proc in procs:
                        proc.kill()
                        proc.wait()
        print()
        print(f"{model_id}")
        print(
            f"{'condition':<12} {'rounds':>6} {'canary µs (p10-p90)':>22} "
            f"{'eager ms (p10-p90)':>24} {'graph ms (p10-p90)':>24}"
        )
        mine = [row for row in rows if row[0] == model_id]
        for name, _ in conditions:
            these = [row for row in mine if row[1] == name]
            print(
                f"{name:<12} {len(these):>6} {spread([r[2] for r in these]):>22} "
                f"{spread([r[3] for r in these]):>24} {spread([r[4] for r in these]):>24}"
            )
        canary = [r[2] for r in mine]
        print(
            f"over all {len(mine)} rounds, rank correlation of the canary with eager "
            f"{rho(canary, [r[3] for r in mine])}, with graph "
            f"{rho(canary, [r[4] for r in mine])}"
        )
        for name, _ in conditions:
            these = [row for row in mine if row[1] == name]
            if len(these) > 2:
                print(
                    f"  within {name}: with eager "
                    f"{rho([r[2] for r in these], [r[3] for r in these])}, with graph "
                    f"{rho([r[2] for r in these], [r[4] for r in these])}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
