"""What sharing max-autotune's tuning saved: the max-autotune cells recorded, split by
how they tuned, with the seconds each held the GPU alone for tuning and its compile time.

Reads recorded results only (the shipped parquet runs and/or a database):

    python benchmarks/tuning_report.py [--runs-dir data/runs] [--db PATH] [--device cuda]

A cell tuned "cold" (everything itself), from its "partner" (its model's other
max-autotune cell of the run, ``runner.measure.tuning.adopt``) or from the run's "pool"
(``zoo-run --tuning-pool``: what earlier cells of any model tuned). ``gpu_tuning_s`` is
what the GPU lock recorded for Inductor's benchmarks of the cell, the cost the sharing
exists to cut; the pooled cells' notes give the shapes and Triton configs they found and
the shapes they still benchmarked. The newest row of each cell counts.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dashboard.data import load  # noqa: E402
from runner.measure.tuning import pool_counts, reuse_kind  # noqa: E402

WAYS = ("cold", "partner", "pool")


def _way(notes: str | None) -> str:
    return reuse_kind(notes) or "cold"


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.1f}" if values else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "data" / "runs")
    parser.add_argument("--db", type=Path, default=None)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args(argv)
    con, sources = load(args.runs_dir, args.db)
    for problem in sources.problems:
        print(f"warning: {problem}", file=sys.stderr)
    rows = con.execute(
        "SELECT mode, status, notes, compile_s, gpu_tuning_s FROM latest_results "
        "WHERE backend = 'inductor' AND starts_with(mode, 'max-autotune') AND device = $1",
        {"1": args.device},
    ).fetchall()
    print(f"max-autotune cells on {args.device}: {len(rows)}\n")
    print("| tuned | cells | pass | median compile s | median GPU tuning s | GPU tuning s in all |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for way in WAYS:
        cells = [row for row in rows if _way(row[2]) == way]
        compiles = [row[3] for row in cells if row[3] is not None]
        tunings = [row[4] for row in cells if row[4] is not None]
        passed = sum(row[1] == "pass" for row in cells)
        print(
            f"| {way} | {len(cells)} | {passed} | {_median(compiles)} | {_median(tunings)} | "
            f"{sum(tunings):.0f} |"
        )
    counts = [found for row in rows if (found := pool_counts(row[2])) is not None]
    if counts:
        shapes = sum(c[0] for c in counts)
        configs = sum(c[1] for c in counts)
        benchmarked = sum(c[2] for c in counts)
        print(
            f"\nPooled cells: {len(counts)}; at hand, {shapes} GEMM/convolution shapes and "
            f"{configs} Triton configs in all; benchmarked themselves {benchmarked} shapes "
            f"(median {statistics.median(c[2] for c in counts):.0f} a cell)."
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
