"""How far the zoo sweep has come: per config and suite of a selection, the cells the
shipped runs hold against the cells planned, their statuses, and each chunk's rate.

Reads the shipped parquet (or a database) and the catalogue; builds nothing:

    python benchmarks/sweep_progress.py --models @headline --configs @headline --label zoo-headline
    python benchmarks/sweep_progress.py --models @core --configs @core --label zoo-core

prints markdown tables for data/runs/README.md. A config's cells on CUDA count for the
selection's models whichever run recorded them (the GPU-time checks recorded some of
the headline column's); the chunk table lists the runs of the sweep's label.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dashboard.data import load  # noqa: E402
from runner.matrix import columns  # noqa: E402
from runner.matrix.cells import CellConfig  # noqa: E402
from runner.matrix.results import STATUSES  # noqa: E402
from zoo.catalog import select  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "data" / "runs")
    parser.add_argument("--db", type=Path, default=None)
    parser.add_argument("--models", default="@headline")
    parser.add_argument("--configs", default="@headline", help="a named set of columns")
    parser.add_argument("--label", default="zoo-headline", help="the sweep's run label")
    args = parser.parse_args()
    specs = select([args.models])
    planned = Counter(spec.suite for spec in specs)
    suite_of = {spec.id: spec.suite for spec in specs}
    con, sources = load(args.runs_dir, args.db)
    for problem in sources.problems:
        print(f"warning: {problem}", file=sys.stderr)
    rows = con.execute(
        "SELECT backend, mode, dynamic, precision, step, model_id, status FROM latest_results "
        "WHERE device = 'cuda'"
    ).fetchall()
    # Per column: each model's status (one per model: another batch or size of the same
    # column is the same cell asked differently, and counts once).
    found: dict[CellConfig, dict[str, str]] = defaultdict(dict)
    for *column, model_id, status in rows:
        if model_id in suite_of:
            found[CellConfig(*column)].setdefault(model_id, status)
    sets = columns.columns(args.configs)
    print(f"Columns of {args.configs} (on CUDA), selection {args.models}:\n")
    print("| config | suite | recorded / planned | " + " | ".join(STATUSES) + " |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in STATUSES) + " |")
    for column in sets:
        by_model = found[column]
        for suite in sorted(planned):
            counts = Counter(s for m, s in by_model.items() if suite_of[m] == suite)
            cells = " | ".join(str(counts.get(status, 0)) for status in STATUSES)
            recorded = sum(counts.values())
            print(f"| {column.label()} | {suite} | {recorded} / {planned[suite]} | {cells} |")
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
