"""Would a shorter timing window do? From shipped results, no GPU needed.

Each CUDA cell keeps its timed samples in the order they were taken (eager and compiled
interleaved, for a budget of 2 s after warm-up). This recomputes each cell's speedup from
the first fraction of its pairs, as a shorter budget would have recorded it, and prints
how far that lands from the speedup of all its pairs.

    python benchmarks/timing_budget.py [--data data/runs]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

MIN_PAIRS = 10  # the protocol's minimum (runner.measure.TIMING_PLANS)


def main() -> None:
    import duckdb

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("data/runs"))
    args = parser.parse_args()
    rows = duckdb.sql(
        "SELECT eager_samples_ms, compiled_samples_ms FROM read_parquet("
        f"'{args.data}/*/results.parquet', union_by_name=true) WHERE device = 'cuda' "
        f"AND status = 'pass' AND len(eager_samples_ms) >= {2 * MIN_PAIRS}"
    ).fetchall()
    pairs = statistics.median(len(eager) for eager, _ in rows)
    print(f"{len(rows)} CUDA cells with >= {2 * MIN_PAIRS} pairs (median {pairs:.0f} pairs)")
    print(f"{'first share of pairs':>20} {'median':>8} {'90th pct':>9} {'largest':>8}")
    for share in (0.25, 0.5, 0.75):
        differences = sorted(
            abs(_speedup(eager, compiled, share) / _speedup(eager, compiled, 1.0) - 1)
            for eager, compiled in rows
        )
        p90 = differences[int(0.9 * (len(differences) - 1))]
        print(
            f"{share:>20.0%} {statistics.median(differences):>8.1%} {p90:>9.1%} "
            f"{differences[-1]:>8.1%}"
        )


def _speedup(eager: list[float], compiled: list[float], share: float) -> float:
    count = max(MIN_PAIRS, int(len(eager) * share))
    return statistics.median(eager[:count]) / statistics.median(compiled[:count])


if __name__ == "__main__":
    main()
