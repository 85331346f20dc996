"""Would a shorter timing window do? From shipped results, no GPU needed.

Each CUDA cell keeps its timed samples in the order they were taken (eager and compiled
interleaved, for a budget of 2 s after warm-up). This recomputes each cell's speedup from
the first fraction of its pairs, as a shorter budget would have recorded it, and prints
how far that lands from the speedup of all its pairs; then how far it lands from the
speedup of the pairs after it, the same cell timed again at once by an independent
window. Where that second distance hardly grows as the window shrinks, what separates
two windows is the host's drift between them, not the number of pairs.

    python benchmarks/timing_budget.py [--data data/runs]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

MIN_PAIRS = 10  # the protocol's minimum (runner.measure.TIMING_PLANS)
SHARES = (0.25, 0.5, 0.75)


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
    timed = statistics.median(sum(eager) + sum(compiled) for eager, compiled in rows) / 1000
    print(
        f"{len(rows)} CUDA cells with >= {2 * MIN_PAIRS} pairs (median {pairs:.0f} pairs, "
        f"{timed:.2f} s of timed calls)"
    )
    print("\nthe timed seconds a cell would not have taken, mean")
    for share in SHARES:
        print(f"{share:>20.0%} {statistics.mean(saved_s(rows, share)):>8.2f} s")
    for title, against_rest in (("against all pairs", False), ("against the pairs after it", True)):
        print(f"\nthe first share of a cell's pairs, {title}")
        print(
            f"{'first share of pairs':>20} {'cells':>6} {'median':>8} {'90th pct':>9} {'largest':>8}"
        )
        for share in SHARES:
            found = sorted(differences(rows, share, against_rest))
            p90 = found[int(0.9 * (len(found) - 1))]
            print(
                f"{share:>20.0%} {len(found):>6} {statistics.median(found):>8.1%} {p90:>9.1%} "
                f"{found[-1]:>8.1%}"
            )


def differences(rows, share: float, against_rest: bool) -> list[float]:
    """Per cell, |speedup of its first ``share`` of pairs / another speedup - 1|: of all
    its pairs, or of the pairs after that share (cells whose rest holds fewer than
    MIN_PAIRS of either side are left out; an XLA cell's blocks can leave the sides
    unequal)."""
    found = []
    for eager, compiled in rows:
        count = _count(eager, share)
        first = _speedup(eager[:count], compiled[:count])
        if not against_rest:
            found.append(abs(first / _speedup(eager, compiled) - 1))
        elif min(len(eager), len(compiled)) - count >= MIN_PAIRS:
            found.append(abs(first / _speedup(eager[count:], compiled[count:]) - 1))
    return found


def saved_s(rows, share: float) -> list[float]:
    """Per cell, the seconds of timed calls after its first ``share`` of pairs."""
    found = []
    for eager, compiled in rows:
        count = _count(eager, share)
        found.append((sum(eager[count:]) + sum(compiled[count:])) / 1000)
    return found


def _count(eager: list[float], share: float) -> int:
    return max(MIN_PAIRS, int(len(eager) * share))


def _speedup(eager: list[float], compiled: list[float]) -> float:
    return statistics.median(eager) / statistics.median(compiled)


if __name__ == "__main__":
    main()
