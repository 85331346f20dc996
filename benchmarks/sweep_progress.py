"""How far the zoo sweep has come: per suite and config of a selection, the cells the
shipped runs hold against the cells planned, their statuses, and each chunk's rate.

Reads the shipped parquet (or a database) and the catalogue; builds nothing:

    python benchmarks/sweep_progress.py --models @headline --label zoo-headline

prints markdown tables for data/runs/README.md. The headline column is inductor default,
dynamic false, bf16, inference, on CUDA: the cells a sweep label's runs hold for the
selection's models count, whichever run recorded them (the GPU-time checks recorded
some).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dashboard.data import load  # noqa: E402
from runner.matrix.results import STATUSES  # noqa: E402
from zoo.catalog import select  # noqa: E402

HEADLINE = ("inductor", "default", "false", "bf16", "infer", "cuda")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "data" / "runs")
    parser.add_argument("--db", type=Path, default=None)
    parser.add_argument("--models", default="@headline")
    parser.add_argument("--label", default="zoo-headline", help="the sweep's run label")
    args = parser.parse_args()
    specs = select([args.models])
    planned = Counter(spec.suite for spec in specs)
    wanted = {spec.id for spec in specs}
    con, sources = load(args.runs_dir, args.db)
    for problem in sources.problems:
        print(f"warning: {problem}", file=sys.stderr)
    rows = con.execute(
        "SELECT model_id, suite, status FROM latest_results WHERE backend = ? AND mode = ? "
        "AND dynamic = ? AND precision = ? AND step = ? AND device = ?",
        list(HEADLINE),
    ).fetchall()
    statuses: dict[str, Counter] = defaultdict(Counter)
    seen: dict[str, set[str]] = defaultdict(set)
    for model_id, suite, status in rows:
        if model_id in wanted and model_id not in seen[suite]:
            seen[suite].add(model_id)
            statuses[suite][status] += 1
    print(f"Headline column ({' '.join(HEADLINE)}), selection {args.models}:\n")
    print("| suite | recorded / planned | " + " | ".join(STATUSES) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in STATUSES) + " |")
    for suite in sorted(planned):
        counts = statuses[suite]
        cells = " | ".join(str(counts.get(status, 0)) for status in STATUSES)
        print(f"| {suite} | {len(seen[suite])} / {planned[suite]} | {cells} |")
    chunks = con.execute(
        "SELECT u.run_id, u.started_at, u.finished_at, count(r.result_id) AS cells, "
        "epoch(u.finished_at) - epoch(u.started_at) AS seconds "
        "FROM runs u LEFT JOIN results r USING (run_id) WHERE u.label = ? "
        "GROUP BY ALL ORDER BY u.started_at",
        [args.label],
    ).fetchall()
    if chunks:
        print(f"\nChunks (label {args.label}):\n")
        print("| run | started (UTC) | cells | minutes | cells/hour |")
        print("| --- | --- | --- | --- | --- |")
        for run_id, started, _, cells, seconds in chunks:
            rate = f"{cells / seconds * 3600:.0f}" if seconds else "-"
            minutes = f"{seconds / 60:.1f}" if seconds else "-"
            print(f"| {run_id[:8]} | {started:%Y-%m-%d %H:%M} | {cells} | {minutes} | {rate} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
