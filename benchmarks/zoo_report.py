"""The zoo report: what the headline column says so far, as markdown for docs/.

Reads the shipped parquet runs (and/or a database) and prints: pass rate per suite and
family, the speedup distribution (wall-clock and GPU time), the commonest failure
signatures and graph-break types, the models slower compiled than eager, and the
launch-bound and disturbed shares. Every figure is over the newest row of each headline cell (inductor
default, dynamic false, bf16, inference, CUDA), but the last table's: the core set's
models across its columns, each against the headline's speedup::

    python benchmarks/zoo_report.py > docs/zoo-h200.md
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import shipped  # noqa: E402
from dashboard.queries import FAILURE_SIGNATURE  # noqa: E402
from runner.backends.registry import BACKENDS  # noqa: E402
from runner.matrix import break_types, columns  # noqa: E402
from runner.matrix.cells import CellConfig  # noqa: E402
from runner.matrix.labels import (  # noqa: E402
    DISTURBED_RATIO,
    LAUNCH_BOUND_RATIO,
    is_launch_bound,
)
from runner.matrix.results import CROWDED  # noqa: E402
from runner.measure.accuracy import accuracy_tolerance, rmse_bound  # noqa: E402
from runner.report import geomean  # noqa: E402
from runner.store.schema import one_autocast_region  # noqa: E402
from zoo.catalog import select  # noqa: E402

HEADLINE = "backend = 'inductor' AND mode = 'default' AND dynamic = 'false' AND precision = 'bf16' AND step = 'infer' AND device = 'cuda'"
TOP = 15
# The backends a failing cell can be triaged on (runner.backends.registry's ``ladder``).
LADDER = ", ".join(f"'{name}'" for name, entry in BACKENDS.items() if entry.ladder)


def quantiles(values: list[float]) -> str:
    if len(values) < 2:
        return "-"
    cuts = statistics.quantiles(values, n=10, method="inclusive")
    return f"p10 {cuts[0]:.2f}x, median {statistics.median(values):.2f}x, p90 {cuts[-1]:.2f}x"


def _loses_on(gpu_speedup: float | None) -> str:
    """Where a cell slower compiled than eager loses, by its GPU-time speedup: its
    compiled kernels keep the GPU busy longer, or they do not and the loss is the host's
    (launching, guards, Python between graphs)."""
    if not gpu_speedup:
        return "no profile"
    return "GPU kernels" if gpu_speedup < 1.0 else "host"


def _in_one_region(rows: list) -> int:
    """How many of the report's rows were timed inside one autocast region (their last
    field: ``runner.store.schema.one_autocast_region``)."""
    return sum(1 for r in rows if r[13])


def _slower(slower: list, passing: list) -> None:
    """The headline's passing cells (``passing``) slower compiled than eager: where they
    lose, with what tells (launch-bound eager, disturbed timing, graph breaks), how often
    a cell with graph breaks is slower against one without, then the 30 slowest."""
    kinds = [_loses_on(r[2]) for r in slower]
    host = [r for r, kind in zip(slower, kinds, strict=True) if kind == "host"]
    launch = sum(1 for r in host if r[5] and is_launch_bound(r[4] or r[3], r[5]))
    disturbed = sum(1 for r in host if r[7] is not None and r[7] >= DISTURBED_RATIO)
    broken = sum(1 for r in host if r[8])
    print(
        f"By the GPU time of one profiled call per side: {kinds.count('host')} of "
        f"{len(slower)} are faster compiled on the GPU and lose on the host (launching "
        f"kernels, checking guards, Python between graphs): {broken} of them have graph "
        f"breaks, {launch} a launch-bound eager side, {disturbed} a disturbed timing. "
        f"{kinds.count('GPU kernels')} are slower on the GPU too: their compiled kernels "
        f"are slower. {kinds.count('no profile')} have no profile (rows older than the "
        "GPU-time columns, or whose profile failed)."
    )
    # The host's part of each side's median call (its wall time less its GPU busy time)
    # per kernel it launched.
    per_kernel = [
        (r[9] / r[11] * 1000, r[10] / r[12] * 1000)
        for r in host
        if None not in (r[9], r[10]) and r[11] and r[12]
    ]
    if per_kernel:
        fewer = sum(1 for r in host if r[11] and r[12] and r[12] < r[11])
        print(
            f"\n{fewer} of these {len(host)} launch fewer kernels compiled than eager, yet "
            "their compiled call spends longer on the host: per kernel launched, a median "
            f"{statistics.median(c for _, c in per_kernel):.0f} µs against "
            f"{statistics.median(e for e, _ in per_kernel):.0f} µs eager (over the "
            f"{len(per_kernel)} with both figures). The compiled side's host time holds "
            "dynamo's guards and Inductor's generated Python wrapper; eager's, PyTorch's C++ "
            "dispatch."
        )
        if one_region := _in_one_region(host):
            print(
                f"{one_region} of the {len(host)} were timed inside one autocast region: "
                "eager's timed calls after the first reused its weight casts, which the "
                "profiled call that counts its kernels made, so eager's host time per kernel "
                'reads low (docs/PERFORMANCE.md, "Autocast\'s scope").'
            )
    with_breaks = [r for r in passing if r[8]]
    without = [r for r in passing if not r[8]]
    if with_breaks and without:
        slow_with = sum(1 for r in with_breaks if r[1] < 1.0)
        slow_without = sum(1 for r in without if r[1] < 1.0)
        print(
            f"\nA passing cell with graph breaks is slower than eager {slow_with} times in "
            f"{len(with_breaks)} ({slow_with / len(with_breaks):.0%}); one without, "
            f"{slow_without} in {len(without)} ({slow_without / len(without):.0%})."
        )
    print()
    print("| model | speedup | GPU-time speedup | loses on | graph breaks |")
    print("| --- | --- | --- | --- | --- |")
    for row, kind in list(zip(slower, kinds, strict=True))[:30]:
        model, speedup, gpu_speedup = row[:3]
        shown = f"{gpu_speedup:.2f}x" if gpu_speedup else "-"
        print(f"| {model} | {speedup:.2f}x | {shown} | {kind} | {row[8] or 0} |")


def main() -> int:
    parser = shipped.parser(__doc__)
    args = parser.parse_args()
    con = shipped.connect(args)
    con.execute(f"CREATE TEMP VIEW headline AS SELECT * FROM latest_results WHERE {HEADLINE}")
    (cells,) = con.execute("SELECT count(*) FROM headline").fetchone()
    listed = [spec.id for spec in select(["@headline"])]
    core = [spec.id for spec in select(["@core"])]
    (beyond, in_core) = con.execute(
        "SELECT count(DISTINCT model_id), count(DISTINCT model_id) FILTER "
        "(WHERE list_contains($core, model_id)) FROM headline "
        "WHERE NOT list_contains($listed, model_id)",
        {"listed": listed, "core": core},
    ).fetchone()
    print("# The headline column so far\n")
    print(
        f"{cells:,} cells (inductor default, dynamic false, bf16 autocast, inference, one "
        "H200); the newest row of each: the `@headline` selection's, and "
        f"{beyond} more of models outside it ({in_core} of them in `@core`). Made by "
        "`python benchmarks/zoo_report.py`. What some of it means, checked model by "
        "model: [zoo-findings.md](zoo-findings.md).\n"
    )
    print("## Pass rate per suite\n\n| suite | cells | pass | failing | pass rate |")
    print("| --- | --- | --- | --- | --- |")
    for suite, total, passed in con.execute(
        "SELECT suite, count(*), count(*) FILTER (WHERE status = 'pass') FROM headline "
        "GROUP BY suite ORDER BY suite"
    ).fetchall():
        print(f"| {suite} | {total} | {passed} | {total - passed} | {passed / total:.0%} |")
    crowded = con.execute(
        "SELECT model_id FROM headline WHERE status = 'oom' AND contains(notes, ?) "
        "ORDER BY model_id",
        [CROWDED],
    ).fetchall()
    if crowded:
        names = ", ".join(model for (model,) in crowded)
        print(
            f"\nOf the failing cells, {len(crowded)} `oom` rows ran out of memory while other "
            "processes (the sweep's neighbours) held most of the GPU's, and may pass on a "
            f"retry (`zoo-run --retry-failed` reruns them): {names}."
        )
    print("\n## Pass rate per family (the 15 largest)\n\n| family | cells | pass rate |")
    print("| --- | --- | --- |")
    for family, total, passed in con.execute(
        "SELECT family, count(*), count(*) FILTER (WHERE status = 'pass') FROM headline "
        f"GROUP BY family ORDER BY count(*) DESC, family LIMIT {TOP}"
    ).fetchall():
        print(f"| {family} | {total} | {passed / total:.0%} |")
    rows = con.execute(
        "SELECT model_id, speedup, gpu_speedup, eager_ms, eager_fastest_ms, eager_gpu_ms, "
        "memory_ratio, timing_disturbance, graph_break_count, eager_host_ms, "
        f"compiled_host_ms, eager_kernels, compiled_kernels, {one_autocast_region()} FROM headline "
        "WHERE status = 'pass' AND speedup > 0"
    ).fetchall()
    wall = [r[1] for r in rows]
    gpu = [r[2] for r in rows if r[2]]
    print("\n## Speedups of passing cells\n")
    print(f"- wall-clock ({len(wall)} cells): geomean {geomean(wall) or 0:.2f}x; {quantiles(wall)}")
    if gpu:
        print(
            f"- GPU time ({len(gpu)} cells with a profile): geomean {geomean(gpu):.2f}x; "
            f"{quantiles(gpu)}"
        )
    profiled = [r for r in rows if r[5]]
    # By the fastest eager sample where the row keeps samples (runner.matrix.labels).
    bound = [r for r in profiled if is_launch_bound(r[4] or r[3], r[5])]
    gpu_bound = [r for r in profiled if not is_launch_bound(r[4] or r[3], r[5])]
    if profiled:
        print(
            f"- launch-bound (fastest eager sample {LAUNCH_BOUND_RATIO:g}x its GPU time or "
            f"more): {len(bound)} of {len(profiled)} profiled cells"
        )
    disturbed = con.execute(
        "SELECT suite, count(*), count(*) FILTER (WHERE timing_disturbance >= ?) "
        "FROM headline WHERE status = 'pass' GROUP BY suite ORDER BY suite",
        [DISTURBED_RATIO],
    ).fetchall()
    shares = "; ".join(f"{suite} {n} of {total} ({n / total:.0%})" for suite, total, n in disturbed)
    print(
        f"- timing disturbed (a side's median {DISTURBED_RATIO:g}x its fastest sample or "
        f"more: something ran beside it): {shares}. Their GPU-time speedups, from one "
        "profiled call's kernels, are the figure less exposed to it; `zoo-run "
        "--retry-disturbed` with fewer workers reruns them"
    )
    if profiled:
        # Where the disturbance falls: a launch-bound side's time is the host's, which the
        # neighbours' compiles share; a GPU-bound side waits on the GPU, which they do not.
        def share(cells: list) -> str:
            hit = sum(1 for r in cells if r[7] is not None and r[7] >= DISTURBED_RATIO)
            return f"{hit} of {len(cells)} ({hit / len(cells):.0%})" if cells else "none"

        print(
            f"  - disturbed among the launch-bound cells: {share(bound)}; among the "
            f"GPU-bound ones: {share(gpu_bound)}"
        )
    memory = [r[6] for r in rows if r[6]]
    if memory:
        print(f"- peak memory compiled / eager: median {statistics.median(memory):.2f}")
    if one_region := _in_one_region(rows):
        print(
            f"- timed inside one autocast region: {one_region} of {len(rows)}. Their eager "
            "calls after the first reused autocast's weight casts, so their compiled memory "
            "reads high beside cells timed per call, and launch-bound cells' speedups low "
            "(measured again on the H200: launch-bound ones rose a median 1.19-1.28x, "
            "GPU-bound ones moved within noise; `benchmarks/remeasure_pairs.py`). zoo-run "
            'measures them again (docs/PERFORMANCE.md, "Autocast\'s scope")'
        )
    slower = sorted((r for r in rows if r[1] < 1.0), key=lambda r: r[1])
    print(f"\n## Slower compiled than eager ({len(slower)})\n")
    if slower:
        _slower(slower, rows)
    print("\n## The commonest failure signatures\n\n| status | signature | cells |")
    print("| --- | --- | --- |")
    for status, signature, count in con.execute(
        f"SELECT status, {FAILURE_SIGNATURE}, count(*) FROM headline "
        "WHERE status <> 'pass' GROUP BY ALL ORDER BY count(*) DESC, 1, 2 "
        f"LIMIT {TOP}"
    ).fetchall():
        text = signature.replace("|", "\\|")[:160]
        print(f"| {status} | {text} | {count} |")
    _accuracy_margins(con)
    print("\n## Graph-break types\n\n| type | registry id | models | breaks |")
    print("| --- | --- | --- | --- |")
    for break_type, registry_id, models, breaks in con.execute(
        "SELECT coalesce(g.break_type, g.reason), coalesce(g.registry_id, 'unregistered'), "
        "count(DISTINCT h.model_id), sum(g.count) FROM headline h "
        "JOIN graph_breaks g USING (result_id) GROUP BY 1, 2 "
        f"ORDER BY 3 DESC, 4 DESC, 1, 2 LIMIT {TOP}"
    ).fetchall():
        print(f"| {break_type.replace('|', '/')[:120]} | {registry_id} | {models} | {breaks} |")
    print(
        "\n## Graph-break types in every shipped cell\n\nEvery config, the newest row of "
        "each cell. Breaks recorded before break types were (schema < 4) are typed by "
        "their reason, as the dashboard types them.\n\n| type | registry id | models | cells | breaks |\n"
        "| --- | --- | --- | --- | --- |"
    )
    splits = []
    for break_type, registry_id, models, cells, breaks in con.execute(
        "SELECT coalesce(g.break_type, g.reason), coalesce(g.registry_id, 'unregistered'), "
        "count(DISTINCT r.model_id), count(DISTINCT r.cell_key), sum(g.count) "
        "FROM latest_results r JOIN graph_breaks g USING (result_id) GROUP BY 1, 2 "
        f"ORDER BY 3 DESC, 5 DESC, 1, 2 LIMIT {TOP}"
    ).fetchall():
        shown = break_type.replace("|", "/")[:120]
        print(f"| {shown} | {registry_id} | {models} | {cells} | {breaks} |")
        splits.append(break_type)
    for name in dict.fromkeys(splits):
        if (meaning := break_types.about(name)) is not None:
            print(f"\n`{name}` is no registry type. {meaning}")
    print(
        "\n## Triage of failing cells\n\nCells of a torch.compile backend that failed "
        "(`compile_error`, `fail_accuracy`, `crash`), every config, the newest row of each, "
        "by the first rung of the backend ladder that failed (`zoo-run --triage ladder`)."
        "\n\n| rung | cells | models |\n| --- | --- | --- |"
    )
    for rung, cells, models in con.execute(
        "SELECT coalesce(triage_rung, 'not triaged'), count(*), "
        "string_agg(DISTINCT model_id, ', ' ORDER BY model_id) FROM latest_results "
        "WHERE status IN ('compile_error', 'fail_accuracy', 'crash') "
        f"AND backend IN ({LADDER}) GROUP BY 1 ORDER BY 2 DESC, 1"
    ).fetchall():
        print(f"| {rung} | {cells} | {models} |")
    _core_columns(con, core)
    return 0


def _core_columns(con, models: list[str]) -> None:
    """Each column of the core set (``--configs @core``) over the ``@core`` models: how
    many cells are recorded and pass, their geomean speedups over eager (wall-clock and
    GPU time), and, over the models that pass both, how the column compares with the
    headline's inductor default: a geomean of each model's speedup here over its speedup
    there (above 1: this column is faster than inductor's default on those models).
    ``models``: the ``@core`` model ids."""
    rows = con.execute(
        "SELECT backend, mode, dynamic, precision, step, model_id, status, speedup, "
        "gpu_speedup FROM latest_results WHERE device = 'cuda' "
        "AND list_contains($models, model_id) ORDER BY recorded_at DESC, result_id DESC",
        {"models": models},
    ).fetchall()
    # One row per model and column (another batch or size of a column counts once).
    newest: dict[tuple[CellConfig, str], tuple[str, float | None, float | None]] = {}
    for *axes, model_id, status, speedup, gpu_speedup in rows:
        newest.setdefault((CellConfig(*axes), model_id), (status, speedup, gpu_speedup))
    headline = columns.HEADLINE
    base = {
        model: speedup
        for (column, model), (status, speedup, _) in newest.items()
        if column == headline and status == "pass" and speedup
    }
    print(
        f"\n## The core set across its columns\n\nThe {len(models)} `@core` models in each "
        "column of `--configs @core` recorded so far (data/runs/README.md has what is "
        "left), the newest row of each. Speedups are over eager in the same cell; "
        '"vs inductor default" is the geomean, over the models passing both, of each '
        "model's speedup in the column over its speedup in the headline column.\n\n"
        "| config | recorded | pass | wall-clock | GPU time | vs inductor default (models) |\n"
        "| --- | --- | --- | --- | --- | --- |"
    )
    for column in columns.columns("@core"):
        cells = {m: v for (c, m), v in newest.items() if c == column}
        if not cells:
            print(f"| {column.label()} | 0 | - | - | - | - |")
            continue
        passed = {m: v for m, v in cells.items() if v[0] == "pass"}
        wall = geomean([v[1] for v in passed.values() if v[1]])
        gpu = geomean([v[2] for v in passed.values() if v[2]])
        ratios = [v[1] / base[m] for m, v in passed.items() if v[1] and m in base]
        versus = geomean(ratios) if column != headline else None
        shown = [f"{x:.2f}x" if x else "-" for x in (wall, gpu)]
        against = f"{versus:.2f}x ({len(ratios)})" if versus else "-"
        print(
            f"| {column.label()} | {len(cells)} | {len(passed)} | {shown[0]} | {shown[1]} | "
            f"{against} |"
        )


def _accuracy_margins(con) -> None:
    """The headline's ``fail_accuracy`` cells, by how far past the RMSE rule's bound they
    are: a cell a hair past it (the bf16 rule: 3 x eager's RMSE + 0.001) is another
    matter than one wrong by orders of magnitude. A cell failed by something other than
    the rule (integer outputs that differ, a shape) says what instead."""
    tol, multiplier = accuracy_tolerance("bf16", "cuda")
    rows = con.execute(
        "SELECT model_id, rmse, eager_rmse, max_abs_error, coalesce(triage_rung, 'not triaged'), "
        "notes FROM headline WHERE status = 'fail_accuracy'"
    ).fetchall()
    if not rows:
        return

    def ratio(row) -> float | None:
        rmse, eager_rmse = row[1], row[2]
        if rmse is None or eager_rmse is None:
            return None
        bound = rmse_bound(eager_rmse, tol, multiplier)
        return rmse / bound if rmse > bound else None

    rows.sort(key=lambda row: (ratio(row) is None, ratio(row) or 0.0, row[0]))
    print(
        f"\n## How far past the accuracy bound ({len(rows)} `fail_accuracy` cells)\n\n"
        f"The rule (PyTorch's harness): a bf16 output passes if its RMSE against a float64 "
        f"reference is at most {multiplier:g} x eager's + {tol / 10:g}. The ratio is the "
        "compiled RMSE over that bound for the output failing worst: just above 1 is a "
        "hair past it. A cell that failed otherwise says how.\n\n"
        "| model | RMSE / bound | compiled RMSE | eager RMSE | max abs error | triage |\n"
        "| --- | --- | --- | --- | --- | --- |"
    )
    for row in rows:
        model, rmse, eager_rmse, max_abs, rung, notes = row
        found = ratio(row)
        if found is None:
            failure = _accuracy_note(notes) or "not the RMSE rule"
            shown = failure.replace("|", "/")[:80]
            print(f"| {model} | {shown} | - | - | - | {rung} |")
            continue
        biggest = f"{max_abs:.3g}" if max_abs is not None else "-"
        print(f"| {model} | {found:.2f} | {rmse:.3g} | {eager_rmse:.3g} | {biggest} | {rung} |")


def _accuracy_note(notes: str | None) -> str | None:
    """The accuracy check's own words in a row's notes (``accuracy: output 3: ...``)."""
    for part in (notes or "").split("; "):
        if part.startswith("accuracy: "):
            return part.removeprefix("accuracy: ")
    return None


if __name__ == "__main__":
    sys.exit(main())
