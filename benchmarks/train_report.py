"""The training column so far, as markdown: every shipped ``train`` cell of one config.

Reads the shipped parquet runs (and/or a database) and prints, for the newest row of
each train cell of the chosen config (default: inductor default, dynamic false, bf16,
``train``: model and loss compiled as one region, Adam): pass rate, what failed and in
which phase (a failure in backward is a ``compile_error`` whose phase names it), the
geomean speedup wall-clock and in GPU time, the peak memory of one step compiled
against eager, the first step's time, and a table of every cell::

    python benchmarks/train_report.py [--step train] [--precision bf16]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.zoo_report import geomean  # noqa: E402
from dashboard.data import load  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "data" / "runs")
    parser.add_argument("--db", type=Path, default=None)
    parser.add_argument("--step", default="train")
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--mode", default="default")
    args = parser.parse_args()
    con, _ = load(args.runs_dir, args.db)
    rows = con.execute(
        "SELECT model_id, status, error_phase, error_signature, speedup, gpu_speedup, "
        "eager_peak_alloc_mb, compiled_peak_alloc_mb, first_call_s, timing_disturbance, "
        "graph_break_count, accuracy_failed FROM latest_results "
        "WHERE step = ? AND precision = ? AND backend = ? AND mode = ? "
        "AND dynamic = 'false' AND device = 'cuda' ORDER BY model_id",
        [args.step, args.precision, args.backend, args.mode],
    ).fetchall()
    if not rows:
        print(f"no {args.step} cells of {args.backend}/{args.mode} {args.precision} on cuda")
        return 1
    passed = [row for row in rows if row[1] == "pass"]
    print(
        f"{len(rows)} cells ({args.backend} {args.mode}, {args.precision}, step "
        f"`{args.step}`, CUDA), the newest row of each; {len(passed)} pass.\n"
    )
    failed = [row for row in rows if row[1] != "pass"]
    for model, status, phase, sig, *_ in failed:
        print(f"- {model}: {status} in phase {phase or '-'}: {(sig or '')[:160]}")
    wall = geomean([row[4] for row in passed])
    gpu = geomean([row[5] for row in passed])
    ratios = [row[7] / row[6] for row in passed if row[6] and row[7]]
    first = [row[8] for row in passed if row[8]]
    disturbed = [row[9] for row in passed if row[9]]
    if wall:
        print(f"- geomean speedup: {wall:.2f}x wall-clock, {gpu or 0:.2f}x GPU time")
    if ratios:
        print(
            f"- peak memory of one step, compiled / eager: median {statistics.median(ratios):.2f}"
            f", {min(ratios):.2f} to {max(ratios):.2f}"
        )
    if first:
        print(f"- first step: median {statistics.median(first):.0f} s, max {max(first):.0f} s")
    if disturbed:
        print(
            f"- timing disturbance (median over fastest sample): {min(disturbed):.2f}-"
            f"{max(disturbed):.2f}"
        )
    print(
        "\n| model | status | wall speedup | GPU-time speedup | peak MB eager / compiled "
        "| first step s | graph breaks |\n| --- | --- | --- | --- | --- | --- | --- |"
    )
    for model, status, _, _, speed, gpu_speed, eager_mb, comp_mb, first_s, _, breaks, _ in rows:
        cells = [
            f"{speed:.2f}x" if speed else "-",
            f"{gpu_speed:.2f}x" if gpu_speed else "-",
            f"{eager_mb:.0f} / {comp_mb:.0f}" if eager_mb and comp_mb else "-",
            f"{first_s:.0f}" if first_s else "-",
            str(breaks) if breaks is not None else "-",
        ]
        print(f"| {model} | {status} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
