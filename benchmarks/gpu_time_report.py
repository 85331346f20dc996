"""How stable wall-clock and GPU-time speedups are: two runs of the same cells, timm's
own benchmark beside them, and a run against the shipped results it repeats.

Reads recorded results only (shipped parquet runs and/or a database), nothing is timed
here; the runs come from the GPU machine (docs/PERFORMANCE.md, "GPU time"):

    python benchmarks/gpu_time_report.py --a check-a --b check-b \\
        --timm docs/logs/gpu_time_h200/timm_benchmark.txt --shipped-vs check-a,check-a-xla

``--a``/``--b`` are run labels (or run ids) of two runs of the same cells; ``--timm``
is the ``TIMMBENCH model variant step_ms samples_per_s`` lines the device call printed
for timm's benchmark.py (eager, then ``--torchcompile inductor``); ``--shipped-vs``
compares those labels' cells with the latest shipped row of the same key recorded
before them (status and speedup, and whether the new speedup is inside the old one's
quartile interval).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dashboard.data import load  # noqa: E402
from runner.matrix.labels import LAUNCH_BOUND_RATIO, launch_ratio  # noqa: E402


def cells(con, name: str) -> dict[tuple[str, str], dict]:
    """(model, backend) -> the row of the run(s) labelled (or with id) ``name``."""
    cursor = con.execute(
        "SELECT r.*, r.eager_fastest_ms AS fastest_eager FROM results r "
        "JOIN runs u USING (run_id) WHERE u.label = ? OR u.run_id = ?",
        [name, name],
    )
    names = [d[0] for d in cursor.description]
    rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    return {(row["model_id"], row["backend"]): row for row in rows}


def relative(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not a:
        return None
    return abs(b / a - 1)


def describe(values: list[float]) -> str:
    if not values:
        return "-"
    return f"median {statistics.median(values):.1%}, largest {max(values):.1%}"


def stability(con, a_name: str, b_name: str) -> None:
    a, b = cells(con, a_name), cells(con, b_name)
    both = sorted(set(a) & set(b))
    print(f"\n{a_name} vs {b_name}: {len(both)} cells in both")
    print(
        f"{'model':34} {'wall A':>7} {'wall B':>7} {'GPU A':>7} {'GPU B':>7} "
        f"{'eager/GPU A':>11} {'B':>5} {'kernels e/c':>12} {'profile s':>9}"
    )
    wall, gpu = [], []
    for key in both:
        x, y = a[key], b[key]
        wall_move = relative(x["speedup"], y["speedup"])
        gpu_move = relative(x["gpu_speedup"], y["gpu_speedup"])
        if wall_move is not None:
            wall.append(wall_move)
        if gpu_move is not None:
            gpu.append(gpu_move)
        ratio_a = launch_ratio(x["fastest_eager"], x["eager_gpu_ms"])
        ratio_b = launch_ratio(y["fastest_eager"], y["eager_gpu_ms"])
        print(
            f"{key[0].removeprefix('timm/'):34} {_x(x['speedup'])} {_x(y['speedup'])} "
            f"{_x(x['gpu_speedup'])} {_x(y['gpu_speedup'])} {_r(ratio_a):>11} {_r(ratio_b):>5} "
            f"{x['eager_kernels'] or '-':>6}/{x['compiled_kernels'] or '-':<5} "
            f"{x['profile_s'] or 0:9.2f}"
        )
    print(f"wall-clock speedups moved: {describe(wall)}")
    print(f"GPU-time speedups moved:   {describe(gpu)}")
    costs = [row["profile_s"] for row in (*a.values(), *b.values()) if row["profile_s"]]
    if costs:
        print(
            f"profiling both sides cost {statistics.median(costs):.3f} s a cell (median), "
            f"{max(costs):.3f} s at most, over {len(costs)} cells"
        )


def launch_bound(con, names: list[str]) -> None:
    ratios = sorted(
        ratio
        for name in names
        for row in cells(con, name).values()
        if (ratio := launch_ratio(row["fastest_eager"], row["eager_gpu_ms"])) is not None
    )
    if not ratios:
        return
    at = [0.1, 0.25, 0.5, 0.75, 0.9]
    quantiles = ", ".join(f"p{int(q * 100)} {ratios[int(q * (len(ratios) - 1))]:.2f}" for q in at)
    above = sum(r >= LAUNCH_BOUND_RATIO for r in ratios)
    print(
        f"\nfastest eager sample / eager GPU busy time over {len(ratios)} cells: {quantiles}; "
        f"{above} at or above the launch-bound line {LAUNCH_BOUND_RATIO:g}"
    )


def timm_benchmark(con, path: Path, names: list[str]) -> None:
    steps: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 5 and parts[0] == "TIMMBENCH" and parts[3] != "None":
            steps.setdefault(parts[1], {})[parts[2]] = float(parts[3])
    print(f"\ntimm's benchmark.py (batch 64, bf16 AMP) beside zoo-run's cells ({', '.join(names)})")
    print(
        f"{'model':28} {'timm eager ms':>13} {'compiled ms':>11} {'timm x':>7} "
        + " ".join(f"{name + ' wall':>16} {name + ' GPU':>14}" for name in names)
    )
    runs = {name: cells(con, name) for name in names}
    for model, sides in steps.items():
        eager, compiled = sides.get("eager"), sides.get("--torchcompile_inductor")
        if not eager or not compiled:
            continue
        ours = " ".join(
            f"{_x(row.get('speedup')):>16} {_x(row.get('gpu_speedup')):>14}"
            for row in (runs[name].get((f"timm/{model}", "inductor"), {}) for name in names)
        )
        print(f"{model:28} {eager:13.3f} {compiled:11.3f} {eager / compiled:6.2f}x {ours}")


def against_shipped(con, names: list[str]) -> None:
    """Each cell of the named runs against the latest earlier row of its key."""
    for name in names:
        new = cells(con, name)
        statuses, inside, moves = 0, 0, []
        print(f"\n{name} against the shipped rows of the same cell keys")
        for key, row in sorted(new.items()):
            old = con.execute(
                "SELECT status, speedup, eager_ms_p25 / compiled_ms_p75 AS low, "
                "eager_ms_p75 / compiled_ms_p25 AS high FROM results "
                "WHERE cell_key = ? AND recorded_at < ? ORDER BY recorded_at DESC LIMIT 1",
                [row["cell_key"], row["recorded_at"]],
            ).fetchone()
            if old is None:
                print(f"  {key[0]} {key[1]}: no shipped row")
                continue
            status, speedup, low, high = old
            statuses += status != row["status"]
            if speedup and row["speedup"]:
                moves.append(relative(speedup, row["speedup"]))
                inside += low <= row["speedup"] <= high
            print(
                f"  {key[0].removeprefix('timm/'):32} {key[1]:9} {status:>13} -> {row['status']:<13} "
                f"{_x(speedup)} -> {_x(row['speedup'])} (shipped quartiles {_x(low)}-{_x(high)})"
            )
        print(
            f"  {len(moves)} compared: {statuses} status differences; speedups moved "
            f"{describe(moves)}; {inside} inside the shipped row's quartile interval"
        )


def _x(value) -> str:
    return "-" if value is None else f"{value:6.2f}x"


def _r(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "data" / "runs")
    parser.add_argument("--db", type=Path, default=None)
    parser.add_argument("--a", required=True)
    parser.add_argument("--b", required=True)
    parser.add_argument("--timm", type=Path, default=None)
    parser.add_argument("--shipped-vs", default="", help="labels to compare with shipped rows")
    parser.add_argument(
        "--launch-bound-in",
        default="",
        help="labels whose cells the launch-bound ratio is read over",
    )
    args = parser.parse_args()
    con, sources = load(args.runs_dir, args.db)
    for problem in sources.problems:
        print(f"warning: {problem}", file=sys.stderr)
    stability(con, args.a, args.b)
    launch_bound(con, [args.a, args.b, *filter(None, args.launch_bound_in.split(","))])
    if args.timm:
        timm_benchmark(con, args.timm, [args.a, args.b])
    if args.shipped_vs:
        against_shipped(con, args.shipped_vs.split(","))
    return 0


if __name__ == "__main__":
    sys.exit(main())
