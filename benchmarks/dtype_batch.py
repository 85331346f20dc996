"""Is it the dtype, the batch or the card? One model's cells across precisions and batch
sizes on one GPU, side by side (docs/zoo-findings.md, "Against timm's own published
speedups": EfficientNet B3-B8 read 2.2-2.5x here in bf16 at batch 64, timm's RTX 5090
figures 1.2-1.3x in float16 at batch 256, and our eager side runs slower than theirs).

Runs zoo-run once per batch size (each with every precision asked), into one database,
then prints per cell the images (or samples) per second of each side, wall-clock and
GPU time, and, per model, how eager's rate moves with the dtype and with the batch:

    python benchmarks/dtype_batch.py --db /tmp/dtype_batch.duckdb --seconds 420

``--report`` prints the table from the database without running anything. Every cell
is a row of the usual kind (label ``dtype-batch``), so the dashboard reads the database
too. A benchmark, run on the GPU machine; nothing here is a timed test.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runner.cli.run import _positive  # noqa: E402
from runner.store.schema import latest_row  # noqa: E402

LABEL = "dtype-batch"
MODELS = "efficientnet_b3,efficientnet_b5,efficientnet_b7"


def batches(text: str) -> list[int]:
    """A comma-separated list of batch sizes, each a positive whole number."""
    parts = [part for part in text.split(",") if part.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"{text!r}: give batch sizes, e.g. 64,256")
    return [_positive(int)(part) for part in parts]


def run(args: argparse.Namespace) -> int:
    """One zoo-run per batch size; each gets what is left of ``--seconds``."""
    start = time.monotonic()
    worst = 0
    for batch in args.batches:
        left = args.seconds - (time.monotonic() - start)
        if left < 30:
            print(f"dtype-batch: no time left for batch {batch}", flush=True)
            break
        command = [
            sys.executable, "-m", "runner.cli.run",
            "--models", args.models,
            "--backends", args.backend,
            "--precision", args.precisions,
            "--batch-size", str(batch),
            "--db", str(args.db),
            "--label", LABEL,
            "--workers", str(args.workers),
            "--time-limit", f"{left:.0f}",
            *args.zoo_run,
        ]  # fmt: skip
        print("dtype-batch: $", " ".join(command[1:]), flush=True)
        worst = max(worst, subprocess.run(command, cwd=ROOT).returncode)
    return worst


def rate(batch: int | None, ms: float | None) -> float | None:
    """Items per second of one call taking ``ms`` over ``batch`` items."""
    if not batch or not ms:
        return None
    return batch * 1000.0 / ms


def _f(value: float | None, spec: str = ".0f") -> str:
    return "-" if value is None else format(value, spec)


def cells(db: Path) -> list[dict]:
    """The row that stands for each of the label's cells (a cell's key holds its
    precision and requested batch), as the dashboard picks it."""
    with duckdb.connect(str(db), read_only=True) as con:
        cursor = con.execute(
            "SELECT r.* FROM results r JOIN runs u USING (run_id) WHERE u.label = ? "
            f"QUALIFY {latest_row(alias='r')} "
            "ORDER BY r.model_id, r.backend, r.batch_size, r.precision",
            [LABEL],
        )
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def report(db: Path) -> int:
    rows = cells(db)
    if not rows:
        print(f"dtype-batch: no {LABEL!r} cells in {db}", file=sys.stderr)
        return 1
    print(
        f"{'model':22} {'prec':4} {'batch':>9} {'status':13} {'eager/s':>8} "
        f"{'compiled/s':>10} {'speedup':>7} {'eager GPU/s':>11} {'compiled GPU/s':>14} "
        f"{'GPU speedup':>11}  input"
    )
    eager: dict[tuple[str, str, int], float] = {}
    for row in rows:
        ran = row["batch_size_run"] or row["batch_size"]
        asked = row["batch_size"]
        shown = str(asked) if ran == asked else f"{asked}->{ran}"
        wall_e, wall_c = rate(ran, row["eager_ms"]), rate(ran, row["compiled_ms"])
        gpu_e, gpu_c = rate(ran, row["eager_gpu_ms"]), rate(ran, row["compiled_gpu_ms"])
        if wall_e is not None and ran == asked:
            eager[(row["model_id"], row["precision"], asked)] = wall_e
        print(
            f"{row['model_id'].removeprefix('timm/'):22} {row['precision']:4} {shown:>9} "
            f"{row['status']:13} {_f(wall_e):>8} {_f(wall_c):>10} "
            f"{_f(row['speedup'], '.2f'):>7} {_f(gpu_e):>11} {_f(gpu_c):>14} "
            f"{_f(row['gpu_speedup'], '.2f'):>11}  {row['input_shapes'] or '-'}"
        )
    precisions = sorted({key[1] for key in eager})
    sizes = sorted({key[2] for key in eager})
    print("\neager's rate (wall-clock), as a ratio: one dtype against another at each")
    print("batch, and each batch against the smallest at each dtype")
    for model in sorted({key[0] for key in eager}):
        parts = []
        for size in sizes:
            base = eager.get((model, precisions[0], size))
            for other in precisions[1:]:
                value = eager.get((model, other, size))
                if base and value:
                    parts.append(f"{other}/{precisions[0]} at {size}: {value / base:.2f}")
        for precision in precisions:
            base = eager.get((model, precision, sizes[0]))
            for size in sizes[1:]:
                value = eager.get((model, precision, size))
                if base and value:
                    parts.append(f"{size}/{sizes[0]} in {precision}: {value / base:.2f}")
        print(f"{model.removeprefix('timm/'):22} {'; '.join(parts) or '-'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, default=Path("/tmp/dtype_batch.duckdb"))
    parser.add_argument("--models", default=MODELS)
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--precisions", default="bf16,fp16")
    parser.add_argument("--batches", type=batches, default=[64, 256])
    parser.add_argument("--workers", type=_positive(int), default=6)
    parser.add_argument(
        "--seconds", type=_positive(float), default=420.0, help="for all the zoo-runs together"
    )
    parser.add_argument("--report", action="store_true", help="only print the table")
    parser.add_argument(
        "zoo_run", nargs="*", help="after --: more zoo-run arguments (e.g. --device cpu)"
    )
    args = parser.parse_args(argv)
    status = 0 if args.report else run(args)
    if not args.db.exists():
        print(f"dtype-batch: no database at {args.db}", file=sys.stderr)
        return 2
    return max(status, report(args.db))


if __name__ == "__main__":
    sys.exit(main())
