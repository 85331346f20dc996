"""The XLA column against inductor: pass counts, speedup distributions, failure signatures,
and how far the eager baselines of one model agree (a measure of the timing noise).

Reads shipped runs and/or a database (the dashboard's loader: the newest row per cell),
keeps the cells of the given run labels, and prints tables:

    python benchmarks/xla_report.py --labels h200-xla-bf16,h200-xla-fp32
    python benchmarks/xla_report.py --db sweep.duckdb --runs-dir none

Cells compare within one precision: fp32 is the same treatment on every route (TF32 off),
so there the inductor cell's eager latency (timed call by call, interleaved with the
compiled calls) is a second eager baseline for the XLA cells of that model. bf16 is
autocast for inductor and a cast of model and inputs for XLA (autocast does not reach
JAX): their eager baselines differ by design, so XLA and inductor compare by latency.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import Counter
from pathlib import Path

ROUTES = ("inductor", "xla", "xla_export", "torch_xla")


def _cells(args):
    from dashboard.data import load

    runs_dir = None if args.runs_dir == "none" else Path(args.runs_dir)
    con, sources = load(runs_dir or Path("/nonexistent"), Path(args.db) if args.db else None)
    for problem in sources.problems:
        print(f"warning: {problem}", file=sys.stderr)
    where, params = "", []
    if args.labels:
        where = "WHERE r.run_id IN (SELECT run_id FROM runs WHERE list_contains(?, label))"
        params = [args.labels.split(",")]
    cursor = con.execute(
        f"""
        SELECT r.* FROM latest_results r {where}
        ORDER BY model_id, precision, backend
        """,
        params,
    )
    names = [d[0] for d in cursor.description]
    # Each row carries eager_fastest_ms: the loader keeps the fastest sample of each side.
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _route(cell) -> str:
    if cell["backend"] == "inductor" and cell["mode"] != "default":
        return f"inductor/{cell['mode']}"
    return cell["backend"]


def _passed(cells: list[dict], precision: str, route: str, needed: str) -> list[dict]:
    """The passing cells of one precision and route that have a value for ``needed``."""
    return [
        c
        for c in cells
        if c["precision"] == precision
        and _route(c) == route
        and c["status"] == "pass"
        and c[needed]
    ]


def _dist(values: list[float]) -> str:
    if not values:
        return "-"
    values = sorted(values)
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    geomean = math.exp(statistics.fmean(math.log(v) for v in values))
    return (
        f"n={len(values):<3} geomean {geomean:5.2f}x  min {values[0]:5.2f}  p25 {q[0]:5.2f}  "
        f"median {q[1]:5.2f}  p75 {q[2]:5.2f}  max {values[-1]:5.2f}"
    )


def _print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    print(f"\n## {title}\n")
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)).rstrip())


def report(cells: list[dict]) -> None:
    by_key: dict[tuple[str, str], dict[str, dict]] = {}
    for cell in cells:
        by_key.setdefault((cell["model_id"], cell["precision"]), {})[_route(cell)] = cell
    precisions = sorted({c["precision"] for c in cells})
    models = sorted({c["model_id"] for c in cells})
    print(f"{len(cells)} cells, {len(models)} models ({', '.join(precisions)})")

    rows = []
    for precision in precisions:
        for route in ROUTES:
            here = [c for c in cells if c["precision"] == precision and _route(c) == route]
            if not here:
                continue
            statuses = Counter(c["status"] for c in here)
            rows.append(
                [
                    precision,
                    route,
                    f"{statuses.get('pass', 0)}/{len(here)}",
                    ", ".join(f"{n} {s}" for s, n in statuses.most_common() if s != "pass") or "-",
                ]
            )
    _print_table("Pass counts", ["precision", "route", "pass", "other"], rows)

    print("\n## Speedup over the cell's own eager baseline (as recorded)\n")
    for precision in precisions:
        for route in ROUTES:
            values = [c["speedup"] for c in _passed(cells, precision, route, "speedup")]
            if values:
                print(f"{precision:5} {route:11} {_dist(values)}")

    print("\n## Inductor latency / XLA latency, same model and precision (>1: XLA faster)\n")
    for precision in precisions:
        for route in ("xla", "xla_export"):
            values = []
            for (_, p), routes in by_key.items():
                a, b = routes.get("inductor"), routes.get(route)
                if p == precision and a and b and a["status"] == b["status"] == "pass":
                    values.append(a["compiled_ms"] / b["compiled_ms"])
            if values:
                print(f"{precision:5} {route:11} {_dist(values)}")

    rows = []
    spreads: dict[str, list[float]] = {}
    for (model, precision), routes in sorted(by_key.items()):
        passed = {r: c for r, c in routes.items() if c["status"] == "pass" and c["eager_ms"]}
        xla_sides = [r for r in ("xla", "xla_export") if r in passed]
        if not xla_sides:
            continue
        # fp32: every route's eager is the same treatment; bf16: only the XLA routes'.
        sides = xla_sides + (["inductor"] if precision == "fp32" and "inductor" in passed else [])
        if len(sides) < 2:
            continue
        eager = {r: passed[r]["eager_ms"] for r in sides}
        spread = max(eager.values()) / min(eager.values()) - 1
        spreads.setdefault(precision, []).append(spread)
        rows.append(
            [
                model,
                precision,
                *(f"{eager[r]:.2f}" if r in eager else "-" for r in ROUTES[:3]),
                f"{spread:.0%}",
            ]
        )
    _print_table(
        "Eager baseline of one model in its different cells (ms): the timing noise",
        ["model", "precision", "inductor", "xla", "xla_export", "spread"],
        rows,
    )
    for precision, values in sorted(spreads.items()):
        print(
            f"{precision}: spread median {statistics.median(values):.0%}, "
            f"max {max(values):.0%} over {len(values)} models"
        )

    print(
        "\n## Eager baseline: its median over its fastest sample "
        "(a quiet GPU and host give about 1.01)\n"
    )
    for precision in precisions:
        for route in ROUTES[:3]:
            ratios = [
                c["eager_ms"] / c["eager_fastest_ms"]
                for c in _passed(cells, precision, route, "eager_fastest_ms")
            ]
            if ratios:
                above = sum(r > 1.2 for r in ratios)
                print(
                    f"{precision:5} {route:11} n={len(ratios):<3} median "
                    f"{statistics.median(ratios):.2f}  max {max(ratios):.2f}  above 1.2: {above}"
                )

    fp32 = []
    for (_, precision), routes in by_key.items():
        ind = routes.get("inductor")
        for route in ("xla", "xla_export"):
            cell = routes.get(route)
            if precision == "fp32" and ind and cell and ind["status"] == cell["status"] == "pass":
                fp32.append((route, ind["eager_ms"] / cell["compiled_ms"]))
    if fp32:
        print(
            "\n## fp32 XLA speedup over the inductor cell's eager (same treatment, "
            "timed interleaved)\n"
        )
        for route in ("xla", "xla_export"):
            values = [v for r, v in fp32 if r == route]
            if values:
                print(f"fp32  {route:11} {_dist(values)}")

    failures = Counter(
        (_route(c), (c["error_signature"] or c["error_message"] or "")[:110])
        for c in cells
        if c["status"] not in ("pass",)
    )
    _print_table(
        "Failure signatures",
        ["route", "cells", "signature"],
        [[route, str(n), signature] for (route, signature), n in failures.most_common()],
    )

    rows = []
    for (model, precision), routes in sorted(by_key.items()):
        row = [model, precision]
        for route in ROUTES[:3]:
            c = routes.get(route)
            if c is None:
                row.append("-")
            elif c["status"] != "pass":
                row.append(c["status"])
            else:
                row.append(
                    f"{c['speedup']:.2f}x {c['compiled_ms']:.2f}ms c{c['compile_s'] or 0:.0f}s"
                )
        rows.append(row)
    _print_table(
        "Per cell: speedup, compiled latency, compile seconds",
        ["model", "precision", *ROUTES[:3]],
        rows,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs-dir", default="data/runs", help="shipped runs, or 'none'")
    parser.add_argument("--db", help="a zoo-run database to read as well")
    parser.add_argument("--labels", help="run labels to keep, comma-separated (default: all)")
    args = parser.parse_args(argv)
    cells = _cells(args)
    if not cells:
        print("no cells found", file=sys.stderr)
        return 1
    report(cells)
    return 0


if __name__ == "__main__":
    sys.exit(main())
