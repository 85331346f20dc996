"""What measuring a cell again per call changed: each cell with a passing row timed
inside one autocast region and a newer row timed per call, on the same GPU model, side
by side (docs/PERFORMANCE.md, "Autocast's scope").

Prints, per suite and column: how far the speedup moved (the new row's over the old
row's), both sides' wall times, the GPU-time speedup (one profiled call per side: it
should barely move, as the fix changes the host's work and autocast's cache, not the
kernels), peak memory, how many cells crossed 1.0x, and how the re-measured cells ended
where they no longer pass. Then the compile times of the same cells in both runs,
grouped by the two runs' worker counts and compile threads (``--workers``,
``--compile-threads``, read from each run's command): a re-measure compiles the same
model again, so the pairs compare how a run's settings crowd a compile. Then the
largest movers::

    python benchmarks/remeasure_pairs.py [--db zoo.duckdb] [--runs-dir data/runs]

It reads shipped parquet runs (and a database where given); it measures nothing. A
disturbed row (a side's median 1.2x its fastest sample) makes its pair's wall figures
unsure; the tables count them.
"""

from __future__ import annotations

import math
import re
import statistics
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import shipped  # noqa: E402
from runner.matrix.labels import (  # noqa: E402
    DISTURBED_RATIO,
    LAUNCH_BOUND_RATIO,
    is_launch_bound,
)
from runner.report import geomean, rank_correlation  # noqa: E402
from runner.store.schema import one_autocast_region  # noqa: E402

TOP = 10
_WORKERS = re.compile(r"--workers[ =](\d+)")
_THREADS = re.compile(r"--compile-threads[ =](\S+)")

# The figures read from both rows of a pair, as old_<name> and new_<name>.
MEASURES = (
    "speedup",
    "eager_ms",
    "compiled_ms",
    "gpu_speedup",
    "memory_ratio",
    "compile_s",
    "compile_beside",
    "host_launch_us",
    "timing_beside",
)
# The newest row of each kind per cell key and GPU: ``old`` timed inside one region (a
# pass), ``new`` timed per call (any status), recorded after the old one.
PAIRS = f"""
WITH tagged AS (
    SELECT r.*, u.gpu, u.command, {one_autocast_region("r")} AS one_region
    FROM results r JOIN runs u USING (run_id)
    WHERE r.device = 'cuda' AND r.precision_treatment LIKE 'autocast %'
),
old AS (
    SELECT * FROM tagged WHERE one_region AND status = 'pass'
    QUALIFY row_number() OVER (PARTITION BY cell_key, gpu ORDER BY recorded_at DESC) = 1
),
new AS (
    SELECT * FROM tagged WHERE NOT one_region
    QUALIFY row_number() OVER (PARTITION BY cell_key, gpu ORDER BY recorded_at DESC) = 1
)
SELECT o.suite, o.backend || '/' || o.mode || ' ' || o.precision || ' ' || o.step
           || CASE WHEN o.dynamic = 'false' THEN '' ELSE ' dyn=' || o.dynamic END AS column,
       o.model_id, o.gpu, n.status AS new_status,
       {", ".join(f"o.{m} AS old_{m}, n.{m} AS new_{m}" for m in MEASURES)},
       greatest(o.timing_disturbance, 0) AS old_disturbance,
       greatest(n.timing_disturbance, 0) AS new_disturbance,
       o.command AS old_command, n.command AS new_command,
       coalesce(o.eager_fastest_ms, o.eager_ms) AS old_eager_fastest_ms,
       o.eager_gpu_ms AS old_eager_gpu_ms, n.eager_gpu_ms AS new_eager_gpu_ms
FROM old o JOIN new n ON n.cell_key = o.cell_key AND n.gpu = o.gpu
WHERE n.recorded_at > o.recorded_at
ORDER BY 1, 2, 3
"""


def ratios(pairs: list[dict], measure: str) -> list[float]:
    """Each pair's new ``measure`` over its old one, where both are recorded."""
    return [
        p[f"new_{measure}"] / p[f"old_{measure}"]
        for p in pairs
        if p[f"old_{measure}"] and p[f"new_{measure}"]
    ]


def fmt_ratio(values: list[float], parts: int = 4) -> str:
    """The median, with the lowest and highest of the ``parts``-quantile cuts (by default
    the quartiles; 10: the 10th and 90th percentiles) where there are ``parts`` values or
    more."""
    if not values:
        return "-"
    mid = statistics.median(values)
    if len(values) < parts:
        return f"{mid:.2f}"
    cuts = statistics.quantiles(values, n=parts, method="inclusive")
    return f"{mid:.2f} ({cuts[0]:.2f}-{cuts[-1]:.2f})"


def rho_text(rho: float | None) -> str:
    """A rank correlation as printed: two decimals, or "-" where there was none."""
    return "-" if rho is None else f"{rho:.2f}"


def settings(command: str | None) -> tuple[int, str]:
    """A run's worker count and compile threads, from its recorded command."""
    command = command or ""
    workers = _WORKERS.search(command)
    threads = _THREADS.search(command)
    return (int(workers.group(1)) if workers else 1, threads.group(1) if threads else "default")


def shown(setting: tuple[int, str]) -> str:
    return f"{setting[0]} workers, compile threads {setting[1]}"


def cell(text: str) -> str:
    """Text from a row as one markdown table cell (a model id is data, not markup)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def bound_label(launch: bool | None) -> str:
    """An eager side, told by ``is_launch_bound``: launch-bound, GPU-bound, or no profile."""
    return "no profile" if launch is None else ("launch-bound" if launch else "GPU-bound")


def bound(p: dict) -> str:
    """The old row's eager side: launch-bound (its fastest call the launch-bound ratio
    of its GPU busy time or more), GPU-bound, or no profile."""
    return bound_label(is_launch_bound(p["old_eager_fastest_ms"], p["old_eager_gpu_ms"]))


def _canary(p: dict) -> str:
    value = p["new_host_launch_us"]
    return "-" if value is None else f"{value:.2f}"


def disturbed(p: dict) -> bool:
    return max(p["old_disturbance"] or 0, p["new_disturbance"] or 0) >= DISTURBED_RATIO


def main() -> int:
    parser = shipped.parser(__doc__)
    args = parser.parse_args()
    con = shipped.connect(args)
    cursor = con.execute(PAIRS)
    names = [d[0] for d in cursor.description]
    pairs = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    for p in pairs:
        wall, gpu = p["new_eager_ms"], p["new_eager_gpu_ms"]
        p["eager_host_share"] = wall / gpu if wall and gpu else None
    print("# Cells measured again per call\n")
    if not pairs:
        print("No cell has both a passing row timed in one autocast region and a newer one.")
        return 0
    gpus = sorted({p["gpu"] for p in pairs})
    print(
        f"{len(pairs)} cells with a passing row timed inside one autocast region and a newer "
        f"row timed per call, on the same GPU ({', '.join(gpus)}). Each figure is the new "
        "row's over the old row's: median (quartiles). Wall figures of a pair where either "
        f"row is disturbed (a side's median {DISTURBED_RATIO}x its fastest sample) are unsure.\n"
    )
    print(
        f"Eager side: the old row's, launch-bound where its fastest call took "
        f"{LAUNCH_BOUND_RATIO:g}x its GPU busy time or more. Re-measuring moves the most "
        "where eager's own host time sets its speed: the casts it now makes each call are "
        "launches.\n"
    )
    print(
        "| suite | column | eager side | cells | still pass | speedup | eager ms | compiled ms "
        "| GPU-time speedup | memory ratio | below 1.0x, old -> new | disturbed |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for p in pairs:
        groups.setdefault((p["suite"], p["column"], bound(p)), []).append(p)
    for (suite, column, side), rows in sorted(groups.items()):
        passing = [p for p in rows if p["new_status"] == "pass"]
        below_old = sum(1 for p in passing if p["old_speedup"] and p["old_speedup"] < 1.0)
        below_new = sum(1 for p in passing if p["new_speedup"] and p["new_speedup"] < 1.0)
        print(
            f"| {cell(suite)} | {cell(column)} | {side} | {len(rows)} | {len(passing)} "
            f"| {fmt_ratio(ratios(passing, 'speedup'))} | {fmt_ratio(ratios(passing, 'eager_ms'))} "
            f"| {fmt_ratio(ratios(passing, 'compiled_ms'))} | {fmt_ratio(ratios(passing, 'gpu_speedup'))} "
            f"| {fmt_ratio(ratios(passing, 'memory_ratio'))} | {below_old} -> {below_new} "
            f"| {sum(map(disturbed, passing))} |"
        )
    ended = Counter(p["new_status"] for p in pairs if p["new_status"] != "pass")
    if ended:
        listed = ", ".join(f"{status} {n}" for status, n in sorted(ended.items()))
        print(f"\nPassed before, not again: {listed}.")
    passing = [p for p in pairs if p["new_status"] == "pass"]
    old_geo = geomean(p["old_speedup"] for p in passing)
    new_geo = geomean(p["new_speedup"] for p in passing)
    if old_geo and new_geo:
        print(
            f"\nOver the {len(passing)} that pass again: geomean speedup {old_geo:.2f}x -> "
            f"{new_geo:.2f}x."
        )

    print("\n## Compile time, the same cells in both runs\n")
    print(
        "Grouped by the old and the new run's settings. `beside`: the mean number of other "
        "cells compiling on the host while the cell compiled (`compile_beside`; blank in "
        "rows older than schema 8).\n"
    )
    print(
        "| old run | new run | cells | compile s, old | compile s, new | new / old | beside, old | beside, new |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    by_settings: dict[tuple[tuple[int, str], tuple[int, str]], list[dict]] = {}
    for p in passing:
        if p["old_compile_s"] and p["new_compile_s"]:
            key = (settings(p["old_command"]), settings(p["new_command"]))
            by_settings.setdefault(key, []).append(p)
    for (old_set, new_set), rows in sorted(by_settings.items()):
        beside_old = [p["old_compile_beside"] for p in rows if p["old_compile_beside"] is not None]
        beside_new = [p["new_compile_beside"] for p in rows if p["new_compile_beside"] is not None]
        print(
            f"| {shown(old_set)} | {shown(new_set)} | {len(rows)} "
            f"| {statistics.median(p['old_compile_s'] for p in rows):.1f} "
            f"| {statistics.median(p['new_compile_s'] for p in rows):.1f} | {fmt_ratio(ratios(rows, 'compile_s'))} "
            f"| {f'{statistics.median(beside_old):.1f}' if beside_old else '-'} "
            f"| {f'{statistics.median(beside_new):.1f}' if beside_new else '-'} |"
        )

    canaried = [
        p for p in passing if p["new_host_launch_us"] and p["old_speedup"] and p["new_speedup"]
    ]
    if canaried:
        readings = [p["new_host_launch_us"] for p in canaried]
        print("\n## The launch canary of the new rows\n")
        print(
            f"{len(canaried)} passing pairs' new rows carry the launch canary "
            f"(`host_launch_us`): median {statistics.median(readings):.2f} µs, "
            f"{min(readings):.2f}-{max(readings):.2f}. Its rank correlation with how far "
            "the speedup moved (|log new/old|), by the old eager side:\n"
        )
        for side in sorted({bound(p) for p in canaried}):
            these = [p for p in canaried if bound(p) == side]
            rho = rank_correlation(
                [p["new_host_launch_us"] for p in these],
                [abs(math.log(p["new_speedup"] / p["old_speedup"])) for p in these],
            )
            print(f"- {side}: {rho_text(rho)} ({len(these)} pairs)")
        print(
            '\nWhat a slow-host flag would read it against (docs/PERFORMANCE.md, "Read it '
            'during the timed calls"): its rank correlation, over the same new rows, with\n'
        )
        for label, against in (
            ("the cells timing beside it (`timing_beside`)", "new_timing_beside"),
            ("the new eager side's wall time over its GPU time", "eager_host_share"),
        ):
            these = [p for p in canaried if p.get(against) is not None]
            rho = rank_correlation(
                [p["new_host_launch_us"] for p in these], [p[against] for p in these]
            )
            print(f"- {label}: {rho_text(rho)} ({len(these)} rows)")
        mid = statistics.median(readings)
        print(
            f"\n{sum(r > 1.1 * mid for r in readings)} read over 1.1x their median, "
            f"{sum(r < 0.8 * mid for r in readings)} under 0.8x."
        )

    print(f"\n## The {TOP} largest moves of the speedup\n")
    print(
        "| model | column | speedup, old -> new | eager ms, old -> new | canary µs, new "
        "| disturbed |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    moved = sorted(
        (p for p in passing if p["old_speedup"] and p["new_speedup"]),
        key=lambda p: -abs(math.log(p["new_speedup"] / p["old_speedup"])),
    )
    for p in moved[:TOP]:
        old, new = p["old_eager_ms"], p["new_eager_ms"]
        eager = f"{old:.2f} -> {new:.2f}" if old and new else "-"
        print(
            f"| {cell(p['model_id'])} | {cell(p['column'])} "
            f"| {p['old_speedup']:.2f}x -> {p['new_speedup']:.2f}x | {eager} "
            f"| {_canary(p)} | {'yes' if disturbed(p) else ''} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
