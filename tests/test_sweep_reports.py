"""The sweep's report scripts over the shipped runs: the progress table of issue 20 (per
column and suite of a selection) and the zoo report's accuracy margins, checked against
the parquet read independently."""

from __future__ import annotations

import functools
import math
import re
import sys
from pathlib import Path

import duckdb
import pytest

from runner.matrix import columns
from runner.matrix.results import CROWDED, STATUSES
from runner.measure import tuning
from runner.store.db import Store
from runner.store.schema import RunRecord, latest_row
from tests.results import make_result
from tests.scripts import run_benchmark as _run
from zoo.catalog import select

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "data" / "runs"
# The shipped results the reports count by default: the CUDA rows of the GPU with the
# most (the H200's; an H100's sweep of the core set ships beside them) and every other
# device's.
CARD = "NVIDIA H200"
RESULTS = (
    f"(SELECT * FROM read_parquet('{RUNS}/*/results.parquet', union_by_name=true) "
    "WHERE device <> 'cuda' OR env_id IN (SELECT env_id FROM read_parquet("
    f"'{RUNS}/*/environments.parquet', union_by_name=true) WHERE gpu = '{CARD}'))"
)
# One process runs them all, so that each script runs once (``_script``).
pytestmark = pytest.mark.xdist_group("sweep-reports")


@functools.cache
def _script(name: str, *args: str) -> str:
    """The script's output, run once per arguments (the shipped runs do not change)."""
    return _run(name, *args, check=True).stdout


def _script_on(db: Path, name: str, *args: str) -> str:
    """The script's output over the database ``db`` alone (no shipped runs)."""
    empty = db.parent / "no-runs"
    empty.mkdir(exist_ok=True)
    return _script(name, "--runs-dir", str(empty), "--db", str(db), *args)


def _latest(column, field: str) -> list:
    """``field`` of the newest row of each CUDA cell of ``column``, straight from parquet."""
    rows = duckdb.sql(
        f"SELECT {field} FROM {RESULTS} WHERE device = 'cuda' AND backend = $1 AND mode = $2 "
        "AND dynamic = $3 AND precision = $4 AND step = $5 "
        f"QUALIFY {latest_row()}",
        params=[column.backend, column.mode, column.dynamic, column.precision, column.step],
    ).fetchall()
    return [value for (value,) in rows]


def _latest_models(column) -> set[str]:
    """The models with a CUDA row of ``column``."""
    return set(_latest(column, "model_id"))


def _to_measure_again(column) -> set[str]:
    """The models whose newest row of ``column`` is a pass timed inside one autocast
    region (labelled `autocast bf16`, not `... per call`), straight from parquet."""
    flagged = _latest(
        column,
        "model_id || ' ' || (status = 'pass' AND "
        "coalesce(precision_treatment = 'autocast ' || precision, false))::VARCHAR",
    )
    return {value.rsplit(" ", 1)[0] for value in flagged if value.endswith(" true")}


def test_core_progress_has_every_column_and_suite_with_the_shipped_counts():
    out = _script("sweep_progress.py", "--models", "@core", "--configs", "@core")
    out = out.split("Device time left")[0]
    table = [
        line
        for line in out.splitlines()
        if re.match(r"\| (inductor|eager|aot|cuda|xla|export)", line)
    ]
    core = columns.columns("@core")
    assert len(table) == 2 * len(core)
    specs = select(["@core"])
    for column in (core[0], core[-1]):
        found = _latest_models(column)
        for suite in ("hf", "timm"):
            ids = {spec.id for spec in specs if spec.suite == suite}
            recorded = sum(model in ids for model in found)
            row = next(r for r in table if r.startswith(f"| {column.label()} | {suite} |"))
            assert f"| {recorded} / {len(ids)} |" in row, row
            again = len(_to_measure_again(column) & ids)
            assert row.endswith(f" | {again} |"), row


def test_time_left_counts_the_cells_left_and_prices_them_from_the_shipped_walls():
    out = _script("sweep_progress.py", "--models", "@core", "--configs", "@core")
    _, left = out.split("Device time left")
    found = re.search(r"parallelism (\d+\.\d+), from the (\S+) chunks", left)
    parallel = float(found[1])
    # The chunks' cells' wall seconds over their own (a chunk that recorded nothing counts;
    # one whose run has no end, a chunk lost with its machine, does not)
    ((expected,),) = duckdb.sql(
        "SELECT sum(coalesce(walls, 0)) / "
        "sum(epoch(finished_at::TIMESTAMP) - epoch(started_at::TIMESTAMP)) "
        f"FROM read_parquet('{RUNS}/*/runs.parquet', union_by_name=true) LEFT JOIN ("
        f"SELECT run_id, sum(wall_s) AS walls FROM read_parquet('{RUNS}/*/results.parquet', "
        "union_by_name=true) GROUP BY run_id) USING (run_id) "
        "WHERE label = $1 AND finished_at IS NOT NULL",
        params=[found[2]],
    ).fetchall()
    assert abs(parallel - expected) < 0.06
    rows = {
        line.split(" | ")[0][2:]: line.split(" | ")[1:]
        for line in left.splitlines()
        if line.startswith("| ") and not line.startswith("| ---")
    }
    specs = {spec.id for spec in select(["@core"])}
    total = unpriced = 0
    hours_left = 0.0
    for column in columns.columns("@core"):
        cells = len(specs) - len(_latest_models(column) & specs)
        cells += len(_to_measure_again(column) & specs)
        total += cells
        if not cells:
            assert column.label() not in rows
            continue
        found, wall, timed, hours = rows[column.label()]
        assert int(found) == cells
        walls = [w for w in _latest(column, "wall_s") if w and w > 0]
        if not walls:
            assert wall == "not measured" and hours == "- |"
            unpriced += cells
            continue
        mean = sum(walls) / len(walls)
        assert wall == f"{mean:.0f} ({len(walls)})"
        holds = [h for h in _latest(column, "gpu_timing_s + gpu_tuning_s") if h is not None]
        if column.mode.startswith("max-autotune") and not holds:
            # Priced by a timing plan it would read a few seconds a cell: left unpriced.
            assert timed == "not recorded" and hours == "- |"
            unpriced += cells
            continue
        per_cell = max(mean / parallel, float(timed))
        assert abs(float(hours.rstrip(" |")) - cells * per_cell / 3600) <= 0.06
        hours_left += cells * per_cell / 3600
    assert rows["all"][0] == str(total)
    # The sum of the priced columns, and the cells of those that could not be priced.
    assert abs(float(rows["all"][-1].split(",")[0].rstrip(" |")) - hours_left) <= 0.06
    if unpriced:
        assert f"and {unpriced} cells of configs not priced" in rows["all"][-1]
    else:
        assert "not priced" not in rows["all"][-1]


def test_the_hindcast_checks_the_rule_on_the_label_s_large_finished_chunks():
    """The estimate's track record: one ratio per finished chunk of the source label
    with enough cells, the chunk's minutes over the rule's price of its own cells."""
    out = _script("sweep_progress.py", "--models", "@core", "--configs", "@core")
    source = re.search(r"from the (\S+) chunks", out)[1]
    found = re.search(
        rf"the (\d+) finished {source} chunks of (\d+) cells or more took a median "
        r"(\d+\.\d+) of the priced time \((\d+\.\d+)-(\d+\.\d+)\)",
        out,
    )
    assert found, out[-400:]
    count, least, median, low, high = found.groups()
    ((expected,),) = duckdb.sql(
        f"SELECT count(*) FROM read_parquet('{RUNS}/*/runs.parquet', union_by_name=true) u "
        f"WHERE label = $1 AND finished_at IS NOT NULL AND finished_at > started_at AND "
        f"(SELECT count(*) FROM read_parquet('{RUNS}/*/results.parquet', union_by_name=true) "
        "r WHERE r.run_id = u.run_id) >= $2",
        params=[source, int(least)],
    ).fetchall()
    assert int(count) == expected > 0
    assert 0 < float(low) <= float(median) <= float(high)


def test_accuracy_margins_are_past_the_bound_and_in_order():
    out = _script("zoo_report.py")
    section = out.split("## How far past the accuracy bound", 1)[1].split("\n## ", 1)[0]
    ratios = [float(m) for m in re.findall(r"^\| \S+ \| (\d+\.\d+) \|", section, re.M)]
    assert ratios and all(ratio > 1 for ratio in ratios)
    assert ratios == sorted(ratios)
    (count,) = re.findall(r"\((\d+) `fail_accuracy` cells\)", section)
    rows = [
        line
        for line in section.splitlines()
        if line.startswith("| hf/") or line.startswith("| timm/")
    ]
    assert len(rows) == int(count)
    # The signatures table splits them by where the triage placed them, as the
    # dashboard's Failures page does; the two verdicts the shipped rows hold lead it.
    signatures = out.split("## The commonest failure signatures", 1)[1].split("\n## ", 1)[0]
    accuracy = re.findall(r"^\| fail_accuracy \| (.+?) \| (\d+) \|$", signatures, re.M)
    assert {name for name, _ in accuracy} >= {
        "fail_accuracy: fails in inductor",
        "fail_accuracy: fails in dynamo",
    }
    assert sum(int(cells) for _, cells in accuracy) <= int(count)


def test_the_slower_cells_are_split_by_where_they_lose():
    out = _script("zoo_report.py")
    section = out.split("## Slower compiled than eager (", 1)[1].split("\n## ", 1)[0]
    total = int(section.split(")", 1)[0])
    host, kernels, unprofiled = (
        int(n)
        for n in re.search(
            r"(\d+) of \d+ are faster compiled on the GPU.*?(\d+) are slower on the GPU "
            r"too.*?(\d+) have no profile",
            section,
            re.S,
        ).groups()
    )
    assert host + kernels + unprofiled == total
    fewer, of_host = re.search(r"(\d+) of these (\d+) launch fewer kernels", section).groups()
    assert int(of_host) == host and int(fewer) <= host
    compiled_us, eager_us = re.search(r"a median (\d+) µs against (\d+) µs eager", section).groups()
    assert int(compiled_us) > 0 and int(eager_us) > 0
    # The shipped rows were timed inside one autocast region: the figure says so.
    one_region = re.search(r"(\d+) of the (\d+) were timed inside one autocast region", section)
    assert one_region and int(one_region[2]) == host and 0 < int(one_region[1]) <= host
    table = re.findall(r"^\| \S+ \| ([\d.]+)x \| (\S+) \| ([^|]+) \| (\d+) \|$", section, re.M)
    assert table and len(table) == min(total, 30)
    for speedup, gpu, loses_on, _breaks in table:
        assert float(speedup) < 1
        expected = (
            "no profile"
            if gpu == "-"
            else ("GPU kernels" if float(gpu.rstrip("x")) < 1 else "host")
        )
        assert loses_on.strip() == expected
    with_breaks, without = re.search(
        r"slower than eager \d+ times in (\d+) .*?one without, \d+ in (\d+)", section
    ).groups()
    (passing,) = re.findall(r"- wall-clock \((\d+) cells\)", out)
    assert int(with_breaks) + int(without) == int(passing)


def test_the_disturbed_share_splits_by_launch_bound_over_the_profiled_cells():
    out = _script("zoo_report.py")
    (bound_line,) = re.findall(r"^- launch-bound .*: (\d+) of (\d+) profiled cells$", out, re.M)
    (split,) = re.findall(
        r"launch-bound cells: (\d+) of (\d+) \(\d+%\); among the GPU-bound ones: "
        r"(\d+) of (\d+) \(\d+%\)",
        out,
    )
    bound_hit, bound, free_hit, free = map(int, split)
    assert (bound, bound + free) == tuple(map(int, bound_line))
    headline = columns.columns("@headline")[0]
    rows = _latest(headline, "(status, eager_gpu_ms, timing_disturbance, speedup)")
    hits = sum(
        1
        for status, gpu_ms, ratio, speedup in rows
        if status == "pass" and gpu_ms and speedup and ratio is not None and ratio >= 1.2
    )
    assert bound_hit + free_hit == hits > 0


def test_the_report_names_the_oom_rows_that_were_crowded():
    out = _script("zoo_report.py")
    headline = columns.columns("@headline")[0]
    expected = sorted(
        model
        for model, status, notes in _latest(headline, "(model_id, status, notes)")
        if status == "oom" and CROWDED in (notes or "")
    )
    if not expected:
        assert "`oom` rows ran out of memory while other" not in out
        return
    (line,) = re.findall(r"^Of the failing cells, (\d+) `oom` rows .*: (.*)\.$", out, re.M)
    assert int(line[0]) == len(expected) and line[1].split(", ") == expected


def test_the_core_table_counts_each_column_and_compares_it_with_the_headline():
    out = _script("zoo_report.py")
    section = out.split("## The core set across its columns", 1)[1]
    rows = {
        line.split(" | ")[0].lstrip("| "): line.strip("| ").split(" | ")
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith("| config") and "---" not in line
    }
    core = {spec.id for spec in select(["@core"])}
    assert set(rows) == {column.label() for column in columns.columns("@core")}
    headline = columns.columns("@headline")[0]

    def newest(column) -> dict[str, tuple]:
        """model -> (status, speedup) of its newest CUDA row of ``column``, from parquet."""
        found = duckdb.sql(
            f"SELECT model_id, status, speedup FROM {RESULTS} "
            "WHERE device = 'cuda' AND backend = $1 AND mode = $2 "
            "AND dynamic = $3 AND precision = $4 AND step = $5 "
            "QUALIFY row_number() OVER (PARTITION BY model_id ORDER BY recorded_at DESC) = 1",
            params=[column.backend, column.mode, column.dynamic, column.precision, column.step],
        ).fetchall()
        return {model: (status, speedup) for model, status, speedup in found if model in core}

    base = {m: s for m, (status, s) in newest(headline).items() if status == "pass" and s}
    checked = 0
    for column in columns.columns("@core"):
        cells = newest(column)
        _, recorded, passed, *_, versus = rows[column.label()]
        assert int(recorded) == len(cells)
        if not cells:
            continue
        assert int(passed) == sum(status == "pass" for status, _ in cells.values())
        ratios = [
            s / base[m] for m, (status, s) in cells.items() if status == "pass" and s and m in base
        ]
        if column != headline and ratios:
            mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
            assert versus == f"{mean:.2f}x ({len(ratios)})", column.label()
            checked += 1
    assert checked >= 3


def test_the_report_counts_the_headline_cells_outside_the_selection():
    out = _script("zoo_report.py")
    (cells, beyond) = re.findall(
        r"^([\d,]+) cells \(inductor default.*?and (\d+) more of models outside it", out, re.M
    )[0]
    headline = columns.columns("@headline")[0]
    models = set(_latest(headline, "model_id"))
    listed = {spec.id for spec in select(["@headline"])}
    assert int(beyond) == len(models - listed) > 0
    assert int(cells.replace(",", "")) == len(_latest(headline, "model_id"))


def _headline_axes() -> dict[str, str]:
    """A full-size timm resnet cell's fields in the headline column, on CUDA."""
    headline = columns.HEADLINE
    return {
        "backend": headline.backend,
        "mode": headline.mode,
        "dynamic": headline.dynamic,
        "precision": headline.precision,
        "step": headline.step,
        "device": "cuda",
        "family": "resnet",
        "size": "full",
    }


@pytest.mark.parametrize("older, newer", [("oom", "pass"), ("pass", "oom")])
def test_progress_counts_a_models_newest_row_of_a_column(tmp_path, older, newer):
    """Two batches of one model in one column are one cell asked twice: the newer
    row's status counts, in whichever order the two were written."""
    db = tmp_path / "zoo.duckdb"
    store = Store.open(db)
    headline = columns.HEADLINE
    axes = {**_headline_axes(), "model_id": "timm/resnet50"}
    for key, status, batch in (("first", older, 64), ("second", newer, 32)):
        run = RunRecord(command="zoo-run", env_id="env-a", label="zoo-headline")
        store.start_run(run)
        store.write_results(run.run_id, [make_result(key, status, batch_size=batch, **axes)])
        store.finish_run(run.run_id, "finished", 1)
    out = _script_on(db, "sweep_progress.py", "--models", "resnet50")
    row = next(line for line in out.splitlines() if line.startswith(f"| {headline.label()} |"))
    counts = dict(zip(STATUSES, (c.strip() for c in row.split("|")[4:-2]), strict=True))
    assert counts[newer] == "1" and counts[older] == "0", row


def test_progress_counts_one_gpus_rows(tmp_path):
    """A run on another card (a user's own) is not the sweep's: by default the GPU with
    the most CUDA rows counts, the others are left out and said to be; --gpu picks."""
    from tests.dashboard_data import ENV

    db = tmp_path / "zoo.duckdb"
    store = Store.open(db)
    h100 = "NVIDIA H100 80GB HBM3"
    store.record_environment(dict(ENV, env_id="env-h200"))
    store.record_environment(dict(ENV, env_id="env-h100", gpu=h100))
    headline = columns.HEADLINE
    axes = _headline_axes()
    for env_id, model, status in (
        ("env-h200", "timm/resnet50", "pass"),
        ("env-h200", "timm/resnet18", "pass"),
        ("env-h100", "timm/resnet50", "oom"),
    ):
        run = RunRecord(command="zoo-run", env_id=env_id, label="zoo-headline")
        store.start_run(run)
        row = make_result(f"{env_id}-{model}", status, model_id=model, env_id=env_id, **axes)
        store.write_results(run.run_id, [row])
        store.finish_run(run.run_id, "finished", 1)

    def counts(*extra: str) -> tuple[dict[str, str], str]:
        out = _script_on(db, "sweep_progress.py", "--models", "resnet50", *extra)
        row = next(line for line in out.splitlines() if line.startswith(f"| {headline.label()} |"))
        gpu = next(line for line in out.splitlines() if line.startswith("GPU: "))
        return dict(zip(STATUSES, (c.strip() for c in row.split("|")[4:-2]), strict=True)), gpu

    shown, gpu = counts()
    assert (shown["pass"], shown["oom"]) == ("1", "0")
    assert gpu == "GPU: NVIDIA H200; 1 cell keys of other GPUs left out."
    shown, gpu = counts("--gpu", h100)
    assert (shown["pass"], shown["oom"]) == ("0", "1")
    assert gpu == f"GPU: {h100}; 2 cell keys of other GPUs left out."
    # A part of one card's name picks that card, case aside.
    assert counts("--gpu", "h100") == (shown, gpu)
    # A name no card has, or one that two cards share, is bad input: status 2, and the
    # message names the recorded cards.
    empty = tmp_path / "no-runs"
    for asked, problem in (("A100", "names no card"), ("NVIDIA", "names more than one card")):
        args = ("--runs-dir", str(empty), "--db", str(db), "--models", "resnet50", "--gpu", asked)
        done = _run("sweep_progress.py", *args)
        assert done.returncode == 2, done.stderr
        assert f"--gpu '{asked}' {problem}" in done.stderr
        assert f"'{h100}', 'NVIDIA H200'." in done.stderr
        assert done.stdout == ""


def test_the_tuning_report_splits_max_autotune_cells_by_how_they_tuned(tmp_path):
    """benchmarks/tuning_report.py: cold, partner and pool cells apart, with their GPU
    tuning seconds and the pooled cells' counts; other columns left out."""
    db = tmp_path / "zoo.duckdb"
    store = Store.open(db)
    run = RunRecord(command="zoo-run", env_id="env-a")
    store.start_run(run)
    pooled = tuning.pooled_note(tuning.PoolStart(30, 120, frozenset()), 4)
    cells = [
        ("cold", "max-autotune", None, 300.0, 200.0),
        ("partner", "max-autotune-no-cudagraphs", tuning.reused_note("max-autotune"), 90.0, 0.5),
        ("pool", "max-autotune", f"another note; {pooled}", 150.0, 60.0),
        ("pool-2", "max-autotune", pooled.replace("benchmarked 4", "benchmarked 8"), 170.0, 80.0),
        ("headline", "default", None, 40.0, 3.0),
    ]
    store.write_results(
        run.run_id,
        [
            make_result(
                key,
                mode=mode,
                notes=notes,
                compile_s=compile_s,
                gpu_tuning_s=tuning_s,
                device="cuda",
                model_id=f"timm/{key}",
            )
            for key, mode, notes, compile_s, tuning_s in cells
        ],
    )
    store.finish_run(run.run_id, "finished", len(cells))
    out = _script_on(db, "tuning_report.py")
    assert "max-autotune cells on cuda: 4" in out
    assert "| cold | 1 | 1 | 300.0 | 200.0 | 200 |" in out
    assert "| partner | 1 | 1 | 90.0 | 0.5 | 0 |" in out
    assert "| pool | 2 | 2 | 160.0 | 70.0 | 140 |" in out
    assert "Pooled cells: 2; at hand, 60 GEMM/convolution shapes and 240 Triton configs" in out
    assert "benchmarked themselves 12 shapes (median 6 a cell)" in out


def test_remeasured_pairs_match_the_parquet():
    """benchmarks/remeasure_pairs.py pairs each cell's passing one-region row with its
    newer per-call row on the same GPU; its counts and geomeans, from parquet."""
    out = _script("remeasure_pairs.py")
    rows = duckdb.sql(
        f"""
        WITH r AS (
            SELECT r.cell_key, r.status, r.speedup, r.recorded_at, u.gpu,
                   r.precision_treatment = 'autocast ' || r.precision AS one_region
            FROM read_parquet('{RUNS}/*/results.parquet', union_by_name=true) r
            JOIN read_parquet('{RUNS}/*/runs.parquet', union_by_name=true) u USING (run_id)
            WHERE r.device = 'cuda' AND r.precision_treatment LIKE 'autocast %'
        ),
        o AS (SELECT * FROM r WHERE one_region AND status = 'pass'
              QUALIFY row_number() OVER (PARTITION BY cell_key, gpu
                                         ORDER BY recorded_at DESC) = 1),
        n AS (SELECT * FROM r WHERE NOT one_region
              QUALIFY row_number() OVER (PARTITION BY cell_key, gpu
                                         ORDER BY recorded_at DESC) = 1)
        SELECT o.speedup, n.speedup, n.status FROM o JOIN n USING (cell_key, gpu)
        WHERE n.recorded_at > o.recorded_at
        """
    ).fetchall()
    assert rows, "the shipped runs hold cells measured again per call (run 5a1a2357)"
    (count,) = re.findall(r"^(\d+) cells with a passing row timed inside one", out, re.M)
    assert int(count) == len(rows)
    table = re.findall(
        r"^\| (?:hf|timm) \| [^|]+ \| (?:launch-bound|GPU-bound|no profile) \| (\d+) \| (\d+) \|",
        out,
        re.M,
    )
    assert sum(int(cells) for cells, _ in table) == len(rows)
    passing = [(old, new) for old, new, status in rows if status == "pass"]
    assert sum(int(p) for _, p in table) == len(passing)
    old_geo, new_geo = (
        math.exp(sum(math.log(v) for v in side) / len(side)) for side in zip(*passing, strict=True)
    )
    (shown,) = re.findall(r"geomean speedup (\d+\.\d+)x -> (\d+\.\d+)x", out)
    assert (float(shown[0]), float(shown[1])) == (round(old_geo, 2), round(new_geo, 2))
    movers = re.findall(r"^\| \S+ \| [^|]+ \| ([\d.]+)x -> ([\d.]+)x \|", out, re.M)
    assert 0 < len(movers) <= min(10, len(passing))


def test_remeasured_pairs_set_the_launch_canary_beside_the_speedups_moves(tmp_path):
    """Where the new rows carry the launch canary (schema 9), remeasure_pairs.py gives its
    spread, its rank correlation with how far each speedup moved, by eager side, and with
    what a slow-host flag would read it against: the cells beside it and eager's host
    share."""
    db = tmp_path / "zoo.duckdb"
    store = Store.open(db)
    axes = {**_headline_axes(), "batch_size": 64}
    moved = {"timm/a": 1.0, "timm/b": 1.1, "timm/c": 1.3, "timm/d": 1.6}
    canary = {"timm/a": 6.0, "timm/b": 7.0, "timm/c": 8.0, "timm/d": 9.0}
    beside = {"timm/a": 3.0, "timm/b": 2.0, "timm/c": 1.0, "timm/d": 0.0}
    for treatment in ("autocast bf16", "autocast bf16 per call"):
        run = RunRecord(command="zoo-run", env_id="env-a", gpu="NVIDIA H200")
        store.start_run(run)
        new = treatment.endswith("per call")
        store.write_results(
            run.run_id,
            [
                make_result(
                    f"{model}-key",
                    "pass",
                    model_id=model,
                    precision_treatment=treatment,
                    speedup=moved[model] if new else 1.0,
                    # The new rows' wall over GPU time rises with the canary.
                    eager_ms=10.0 + canary[model] if new else 10.0,
                    eager_samples_ms=[10.0, 10.1, 10.2],
                    eager_gpu_ms=10.0,  # GPU-bound: its fastest call is its GPU time
                    host_launch_us=canary[model] if new else None,
                    timing_beside=beside[model] if new else None,
                    **axes,
                )
                for model in moved
            ],
        )
        store.finish_run(run.run_id, "finished", len(moved))
    out = _script_on(db, "remeasure_pairs.py")
    assert "4 passing pairs' new rows carry the launch canary (`host_launch_us`): median " in out
    assert "7.50 µs, 6.00-9.00" in out
    assert "- GPU-bound: 1.00 (4 pairs)" in out
    assert "- the cells timing beside it (`timing_beside`): -1.00 (4 rows)" in out
    assert "- the new eager side's wall time over its GPU time: 1.00 (4 rows)" in out
    assert "1 read over 1.1x their median, 0 under 0.8x." in out
    movers = re.findall(r"^\| (timm/\w) \| [^|]+ \| [^|]+ \| [^|]+ \| ([\d.]+) \|", out, re.M)
    assert movers[0] == ("timm/d", "9.00")


def test_run_pairs_compares_the_cells_two_runs_share():
    """benchmarks/run_pairs.py: the cells both runs recorded, and their compile seconds,
    from parquet; a prefix naming no run is a usage error (exit 2)."""
    a, b = "e88efb9e", "b7c7295d"
    shared = duckdb.sql(
        f"SELECT x.compile_s, y.compile_s FROM read_parquet('{RUNS}/*/results.parquet', "
        "union_by_name=true) x JOIN read_parquet("
        f"'{RUNS}/*/results.parquet', union_by_name=true) y USING (cell_key) "
        "WHERE starts_with(x.run_id, $a) AND starts_with(y.run_id, $b)",
        params={"a": a, "b": b},
    ).fetchall()
    out = _script("run_pairs.py", a, b)
    assert re.search(rf"^{len(shared)} cells in both\.$", out, re.M) and len(shared) == 24
    totals = re.search(r"compile seconds in all: (\d+) \(A\), (\d+) \(B\)", out).groups()
    assert [int(t) for t in totals] == [round(sum(side)) for side in zip(*shared, strict=True)]
    rows = re.findall(r"^\| (?:hf|timm)/\S+ \| pass / pass \|", out, re.M)
    assert len(rows) == len(shared)
    done = _run("run_pairs.py", "zzzz", b)
    assert done.returncode == 2 and "no run with an id starting 'zzzz'" in done.stderr


def test_progress_writes_its_tables_in_place_of_the_same_configs_block(tmp_path):
    """--readme replaces the block of the configs' tables (from its 'Columns of' line
    through its hindcast line) and keeps the text around it and other configs' blocks;
    with --gpu, the block of those configs on that card, beside another card's block of
    the same configs; a file without such a block is an error that leaves the file as
    it was."""
    from tests.dashboard_data import ENV

    db = tmp_path / "zoo.duckdb"
    store = Store.open(db)
    h100 = "NVIDIA H100 80GB HBM3"
    store.record_environment(dict(ENV, env_id="env-a"))
    store.record_environment(dict(ENV, env_id="env-h100", gpu=h100))
    for env_id, status in (("env-a", "pass"), ("env-h100", "oom")):
        run = RunRecord(command="zoo-run", env_id=env_id, label="zoo-headline")
        store.start_run(run)
        axes = {**_headline_axes(), "model_id": "timm/resnet50", "env_id": env_id}
        store.write_results(run.run_id, [make_result(f"one-{env_id}", status, **axes)])
        store.finish_run(run.run_id, "finished", 1)
    readme = tmp_path / "README.md"
    before = "# Runs\n\nIntro.\n\n"
    core = "Columns of @core (on CUDA), selection @core:\n\nold core\n\nHindcast: core.\n"
    after = "\nAfter the tables.\n"
    stale = "Columns of @headline (on CUDA), selection @headline:\n\nold\n\nHindcast: old.\n"
    on_h100 = (
        f"Columns of @headline (on CUDA, {h100}), selection @headline:\n\nold\n\nHindcast: x.\n"
    )
    readme.write_text(before + stale + "\n" + on_h100 + "\n" + core + after)
    empty = tmp_path / "no-runs"
    empty.mkdir()
    args = ["--runs-dir", str(empty), "--db", str(db), "--models", "resnet50"]
    _run("sweep_progress.py", *args, "--readme", str(readme), check=True)
    tables = _script_on(db, "sweep_progress.py", "--models", "resnet50")
    assert tables.startswith("Columns of @headline (on CUDA), selection resnet50:")
    assert readme.read_text() == (
        before + tables.strip("\n") + "\n\n" + on_h100 + "\n" + core + after
    )

    _run("sweep_progress.py", *args, "--gpu", h100, "--readme", str(readme), check=True)
    h100_tables = _script_on(db, "sweep_progress.py", "--models", "resnet50", "--gpu", h100)
    assert h100_tables.startswith(f"Columns of @headline (on CUDA, {h100}), selection resnet50:")
    assert f"GPU: {h100}; 1 cell keys of other GPUs left out." in h100_tables
    assert h100_tables != tables
    assert readme.read_text() == (
        before + tables.strip("\n") + "\n\n" + h100_tables.strip("\n") + "\n\n" + core + after
    )

    readme.write_text(before + on_h100 + after)
    done = _run("sweep_progress.py", *args, "--readme", str(readme))
    assert done.returncode == 2
    assert "no block of tables (a line starting 'Columns of @headline (on CUDA)'" in done.stderr
    assert readme.read_text() == before + on_h100 + after


def test_the_memory_replay_ends_more_cells_early_with_large_ones_spread(tmp_path):
    """benchmarks/memory_order.py replays the executor's memory rule over recorded walls
    and peaks. Three models of 76 GiB (one at a time on a 100 GiB GPU, 90 filled) listed
    before twelve of 3.5 GiB, four workers, walls of 100 and 50 s: in the planned order
    the two large ones waiting hold the small ones back once they have waited a minute,
    and 8 cells end by 200 s; spread (each after four small ones), 13 do; backfilled
    (``MemoryBudget.kept_room``) in the planned order, 14."""
    db = tmp_path / "zoo.duckdb"
    store = Store.open(db)
    large = [f"timm/aimv2_1b_patch14_{px}" for px in (224, 336, 448)]
    small = [
        f"timm/{name}"
        for name in [
            "resnet10t",
            "resnet14t",
            "resnet18",
            "resnet18d",
            "resnet26",
            "resnet26d",
            "resnet26t",
            "resnet32ts",
            "resnet33ts",
            "resnet34",
            "resnet34d",
            "resnet50",
        ]
    ]
    run = RunRecord(command="zoo-run", env_id="env-a", label="zoo-headline")
    store.start_run(run)
    rows = [
        make_result(
            model,
            "pass",
            **{
                **_headline_axes(),
                "model_id": model,
                "family": model.split("/")[1].split("_")[0],
                "eager_peak_reserved_mb": 61_440 if model in large else 2_048,
                "wall_s": 100.0 if model in large else 50.0,
                "gpu_timing_s": 0.0,
                "gpu_tuning_s": 0.0,
            },
        )
        for model in large + small
    ]
    store.write_results(run.run_id, rows)
    store.finish_run(run.run_id, "finished", len(rows))
    models = ",".join(m.split("/")[1] for m in large + small)
    out = _script_on(
        db, "memory_order.py", "--models", models, "--workers", "4", "--gpu-gib", "100",
        "--seconds", "200",
    )  # fmt: skip
    table = {
        line.split("|")[2].strip(): [c.strip() for c in line.split("|")[3:-1]]
        for line in out.splitlines()
        if line.startswith("| 100.0 |")
    }
    assert table["planned"][0] == "8" and table["planned"][2] == "0"
    assert table["spread by need"][0] == "13" and table["spread by need"][2] == "3"
    # Backfilled, small cells start beside the large one under way, since they still
    # fit once it has ended beside the next, which waits for that: 14 end by 200 s.
    assert table["planned, backfilled"][0] == "14"
    assert table["spread, backfilled"][0] == "13"


def _margin_run(folder: Path, env_id: str, rows: list[tuple]) -> None:
    """An exported run folder (results and environments parquet) of ``rows``: (model,
    started, finished, peak reserved MiB[, resident MiB]) on an H200; without a resident
    figure, the rows are schema 9's (no ``resident_mb`` column)."""
    folder.mkdir(parents=True)
    resident = all(len(row) == 5 for row in rows)
    values = ", ".join(
        f"('{folder.name}-{i}', '{folder.name}', 'cell-{row[0]}', '{row[0]}', 'infer', 'cuda', "
        f"'{env_id}', 'pass', '', TIMESTAMP '2026-12-06 {row[2]}', '2026-12-06T{row[1]}+00:00', "
        f"'2026-12-06T{row[2]}+00:00', {row[3]}, NULL, NULL"
        + (f", {float(row[4])})" if resident else ")")
        for i, row in enumerate(rows)
    )
    duckdb.sql(
        "COPY (SELECT * FROM (VALUES " + values + ") t(result_id, run_id, cell_key, model_id, "
        "step, device, env_id, status, notes, recorded_at, started_at, finished_at, "
        "eager_peak_reserved_mb, compiled_peak_reserved_mb, reference_peak_reserved_mb"
        + (", resident_mb" if resident else "")
        + f")) TO '{folder / 'results.parquet'}' (FORMAT parquet)"
    )
    duckdb.sql(
        f"COPY (SELECT '{env_id}' AS env_id, 'NVIDIA H200' AS gpu) "
        f"TO '{folder / 'environments.parquet'}' (FORMAT parquet)"
    )


def test_the_memory_margin_weighs_the_card_s_readings_against_the_rule(tmp_path):
    """benchmarks/memory_margin.py: two cells, A (a 10 GiB peak this time, 8 GiB in the
    run before) and B (4 GiB both times), an idle worker beside them. The card held 17.5
    GiB while both ran with the idle worker: with a context of 1 GiB each, that is over
    what peaks x 1.00 expect (17) and under x 1.05 (17.7); the least margin that covers
    every reading is (17.5 - 3) / 14 on this run's peaks, / 12 on the planned ones.
    Going into their compiles A held 2 GiB and B 1 (schema 10's resident memory): with a
    context a process, the card held 1.1 / 3, 17.5 / 6 and 9.5 / 4 of that in the three
    readings with cells (median 2.375), and of the peaks' room beyond it (8 + 3, then 8)
    none, 11.5 / 11 and 5.5 / 8 (median 0.6875)."""
    runs = tmp_path / "runs"
    _margin_run(runs / "before", "env-a", [("timm/a", "09:00:00", "09:01:00", 8192),
                                           ("timm/b", "09:00:00", "09:01:00", 4096)])  # fmt: skip
    chunk = tmp_path / "chunk" / "now"
    _margin_run(chunk, "env-b", [("timm/a", "10:00:00", "10:01:00", 10240, 2048),
                                 ("timm/b", "10:00:10", "10:00:50", 4096, 1024)])  # fmt: skip
    smi = tmp_path / "smi.csv"
    readings = {
        "10:00:05": {"gpu": 1.1, 101: 0.6},
        "10:00:20": {"gpu": 17.5, 101: 11.0, 102: 5.0, 103: 0.5},
        "10:00:55": {"gpu": 9.5, 101: 9.0, 103: 0.5},
        "10:01:05": {"gpu": 0.5, 103: 0.5},
    }
    smi.write_text(
        "".join(
            f"2026-12-06T{at}.000,{who},{gib * 1024:.0f}\n"
            for at, held in readings.items()
            for who, gib in held.items()
        )
        + "No devices were found\n"
    )
    out = _run(
        "memory_margin.py", str(smi), str(chunk), "--runs-dir", str(runs),
        timeout=120, check=True,
    ).stdout  # fmt: skip
    assert "GPU: NVIDIA H200; 2 rows, 2 with a peak planned from before." in out
    # Three readings hold a process beyond one per cell (103 idle; at 10:01:05 no cell).
    assert "4 readings" in out and "3 readings with more GPU processes" in out
    # Process 101's least is 0.6 GiB, 103's 0.5; 102 is seen once.
    assert "(its least, 2 processes): median 0.55 GiB" in out
    sections = out.split("\nPeaks: ")[1:]
    own = next(s for s in sections if s.startswith("each row's own; context 1.00"))
    planned = next(s for s in sections if s.startswith("as planned; context 1.00"))
    rows = {line.split("|")[1].strip(): line.split("|")[2:-1] for line in own.splitlines()
            if line.startswith("| 1.")}  # fmt: skip
    assert [c.strip() for c in rows["1.00"][:2]] == ["3", "1"]
    assert [c.strip() for c in rows["1.05"][:2]] == ["3", "0"]
    assert f"covering 100% of the readings: {(17.5 - 3) / 14:.2f}" in own
    assert f"covering 100% of the readings: {(17.5 - 3) / 12:.2f}" in planned
    assert (
        "3 readings whose cells all record it; the card held a median 2.38x (at most "
        f"{17.5 / 6:.2f}x) their resident memory and contexts; of the room their peaks take "
        f"beyond that, a median 0.69 (at most {11.5 / 11:.2f}) in use." in out
    )


def test_the_memory_margin_refuses_a_missing_readings_file(tmp_path):
    done = _run("memory_margin.py", str(tmp_path / "smi.csv"), str(tmp_path), timeout=120)
    assert done.returncode == 2 and "no file" in done.stderr and "smi.csv" in done.stderr
    (tmp_path / "smi.csv").write_text("2026-12-06T10:00:05.000,gpu,1024\n")
    done = _run("memory_margin.py", str(tmp_path / "smi.csv"), str(tmp_path), timeout=120)
    assert done.returncode == 2 and "has no results.parquet" in done.stderr


def test_the_memory_margin_s_share_is_covered_by_the_value_it_names():
    """Nearest rank: 99% of 80 readings is the largest (the 79th leaves 1.25% above it),
    90% of 10 the 9th, 50% of 4 the 2nd; 100% is the largest."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import memory_margin
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    values = [float(v) for v in range(1, 81)]
    assert memory_margin.quantile(values, 0.99) == 80.0
    assert memory_margin.quantile(values[:10], 0.9) == 9.0
    assert memory_margin.quantile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.0
    assert memory_margin.quantile(values[:100], 1.0) == 80.0
    assert memory_margin.quantile([5.0], 0.01) == 5.0


def test_the_timing_budget_compares_a_window_with_all_pairs_and_with_the_rest():
    """benchmarks/timing_budget.py, hand-computed: 40 pairs, compiled 1 ms throughout,
    eager 2 ms for the first 10 and 3 ms after. The first quarter (10 pairs) reads 2.00x;
    all 40 read a median eager of 3 ms, 3.00x; the 30 after it 3.00x. A second cell with
    eager and compiled of unequal lengths (an XLA cell's blocks) whose rest is too short
    on one side is left out of the comparison with the rest only."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import timing_budget
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    steady = ([2.0] * 10 + [3.0] * 30, [1.0] * 40)
    uneven = ([2.0] * 40, [1.0] * 15)
    assert timing_budget.differences([steady], 0.25, False) == [pytest.approx(1 / 3)]
    assert timing_budget.differences([steady], 0.25, True) == [pytest.approx(1 / 3)]
    # Half: 20 pairs, eager median (2+3)/2 = 2.5 ms against 3 after it and overall.
    assert timing_budget.differences([steady], 0.5, True) == [pytest.approx(1 / 6)]
    assert timing_budget.differences([steady, uneven], 0.25, False)[1] == pytest.approx(0.0)
    assert len(timing_budget.differences([steady, uneven], 0.25, True)) == 1
    # After the first quarter: 30 eager calls of 3 ms and 30 compiled of 1 ms.
    assert timing_budget.saved_s([steady], 0.25) == [pytest.approx(0.12)]


def test_published_compare_ranks_our_speedups_against_the_reference(tmp_path):
    """benchmarks/published_compare.py pairs each passing headline timm cell with timm's
    published figure at the catalogue's image size, and ranks the two columns: overall,
    by whether timm's two sides ran at one batch, and the same cells' one-region rows
    against their per-call rows."""
    db = tmp_path / "zoo.duckdb"
    store = Store.open(db)
    axes = {**_headline_axes(), "batch_size": 64}
    # Ours, per call (the newest rows), and before that timed in one autocast region.
    per_call = {"resnet18": 0.8, "resnet34": 1.2, "resnet50": 1.5, "vit_small_patch16_224": 2.0}
    one_region = {"resnet18": 1.0, "resnet34": 0.7, "resnet50": 1.4, "vit_small_patch16_224": 1.9}
    per_call["resnet101"] = one_region["resnet101"] = 1.3
    for treatment, speedups in (
        ("autocast bf16", one_region),
        ("autocast bf16 per call", per_call),
    ):
        run = RunRecord(command="zoo-run", env_id="env-a", gpu="NVIDIA H200")
        store.start_run(run)
        store.write_results(
            run.run_id,
            [
                make_result(
                    f"{name}-key",
                    "pass",
                    model_id=f"timm/{name}",
                    precision_treatment=treatment,
                    speedup=speedup,
                    gpu_speedup=speedup * 1.5,
                    eager_ms=10.0,
                    eager_samples_ms=[10.0, 10.2],
                    # resnet18's eager side is launch-bound: twice its GPU busy time.
                    eager_gpu_ms=5.0 if name == "resnet18" else 10.0,
                    **axes,
                )
                for name, speedup in speedups.items()
            ],
        )
        store.finish_run(run.run_id, "finished", len(speedups))
    # timm's: ordered as our one-region rows; resnet101 only at another image size.
    reference = tmp_path / "timm.csv"
    published = {"resnet18": 1.1, "resnet34": 0.9, "resnet50": 1.6, "vit_small_patch16_224": 2.5}
    lines = [
        "model,img_size,eager_batch,eager_samples_per_sec,compiled_batch,compiled_samples_per_sec"
    ]
    # timm ran vit's compiled side at half its eager side's batch.
    compiled_batch = {"vit_small_patch16_224": 512}
    lines += [
        f"{name},224,1024,1000,{compiled_batch.get(name, 1024)},{1000 * ratio}"
        for name, ratio in published.items()
    ]
    lines.append("resnet101,288,1024,1000,1024,1500")
    reference.write_text("\n".join(lines) + "\n")
    assert {select([f"timm/{name}"])[0].input_size for name in per_call} == {(3, 224, 224)}

    out = _script_on(db, "published_compare.py", "--reference", str(reference))
    assert "4 cells paired, 1 not (no timm figure at that size)" in out
    # Ours r18 < r34 < r50 < vit against timm's r34 < r18 < r50 < vit: rho 1 - 6*2/60.
    assert "| all | 4 | 0.80 | 0.80 | 0.87 | 50% |" in out
    assert "| eager side launch-bound | 1 | - | - | 0.73 | 0% |" in out
    assert "| timed inside one autocast region | 4 | 1.00 | 1.00 |" in out
    assert "| timed per call | 4 | 0.80 | 0.80 |" in out
    # r18 < r34 < r50 against timm's r34 < r18 < r50: rho 1 - 6*2/24.
    assert "| timm's two sides at one batch | 3 | 0.50 | 0.50 |" in out
    assert "| timm's compiled side at a smaller batch | 1 | - | - | 0.80 | 100% |" in out
    assert "| timm's compiled side at a larger batch | 0 | - |" in out
    assert "2 models: 0 in both, 1 in ours only, 1 in timm's only." in out
    lowest = out.split("## Where ours reads lowest")[1]
    assert re.findall(r"^\| (timm/\w+) \|", lowest, re.M)[:2] == [
        "timm/resnet18",
        "timm/vit_small_patch16_224",
    ]


def test_published_compare_refuses_a_missing_reference(tmp_path):
    done = _run("published_compare.py", "--reference", str(tmp_path / "none.csv"))
    assert done.returncode == 2 and "no reference file at" in done.stderr


def test_published_figures_are_timm_s_alone_by_image_size():
    """zoo.published gives a timm model's shipped figures at each image size timm
    benchmarked it at, smallest first; none for an HF model or an unknown name."""
    from zoo import published

    figures = published.for_model("timm/resnet50")
    assert [f.size for f in figures] == sorted({f.size for f in figures})
    assert len(figures) > 1 and all(f.ratio > 0 for f in figures)
    assert figures[0].label().startswith(f"{figures[0].ratio:.2f}x at {figures[0].size} px (")
    # Each side's batch as timm ran it: the same on both sides, or both named.
    same = published.Figure(224, 1.5, 1024, 1024).label()
    assert same == "1.50x at 224 px (batch 1,024 both sides)"
    differ = published.Figure(600, 1.21, 256, 96).label()
    assert differ == "1.21x at 600 px (eager at batch 256, compiled at 96)"
    assert published.for_model("hf/BertModel") == []
    assert published.for_model("timm/no_such_model") == []


def test_card_pairs_sets_one_cards_cells_beside_anothers(tmp_path):
    """benchmarks/card_pairs.py: the headline cells both cards recorded, matched across
    environments (a timm cell has no sequence length), statuses that differ listed,
    speedup ratios grouped by how the rows were timed, and the pairs timed alike whose
    host took far longer around the same kernels on one card."""
    from tests.dashboard_data import ENV

    db = tmp_path / "zoo.duckdb"
    store = Store.open(db)
    h100 = "NVIDIA H100 80GB HBM3"
    store.record_environment(dict(ENV, env_id="env-h200"))
    store.record_environment(dict(ENV, env_id="env-h100", gpu=h100))
    per_call, one_region = "autocast bf16 per call", "autocast bf16"
    # model: (H100 status, H200 status, H200 timing, H100 wall ms, H200 wall ms); every
    # side's kernels take 10 ms on the H100 and 9 on the H200, compiled 5 and 4.5.
    cells = {
        "timm/resnet50": ("pass", "pass", per_call, (12, 6), (11, 5.4)),
        "timm/resnet18": ("pass", "pass", per_call, (12, 6), (36, 10.8)),
        "timm/vgg11": ("pass", "pass", one_region, (12, 6), (9.9, 6)),
        "timm/dla34": ("pass", "eager_error", per_call, (12, 6), (None, None)),
        "timm/only_h100": ("pass", None, per_call, (12, 6), (None, None)),
    }
    for model, (a_status, b_status, b_timing, a_ms, b_ms) in cells.items():
        for env_id, status, timing, (eager, compiled), kernels in (
            ("env-h100", a_status, per_call, a_ms, (10, 5)),
            ("env-h200", b_status, b_timing, b_ms, (9, 4.5)),
        ):
            if status is None:
                continue
            run = RunRecord(command="zoo-run", env_id=env_id, label="zoo-headline")
            store.start_run(run)
            measured = {}
            if status == "pass":
                measured = dict(
                    eager_ms=eager,
                    compiled_ms=compiled,
                    speedup=eager / compiled,
                    eager_gpu_ms=kernels[0],
                    compiled_gpu_ms=kernels[1],
                    gpu_speedup=kernels[0] / kernels[1],
                )
            row = make_result(
                f"{model}-{env_id}",
                status,
                **{**_headline_axes(), "model_id": model, "env_id": env_id, "batch_size": 64},
                precision_treatment=timing,
                **measured,
            )
            store.write_results(run.run_id, [row])
            store.finish_run(run.run_id, "finished", 1)
    empty = tmp_path / "no-runs"
    empty.mkdir()
    args = ("--runs-dir", str(empty), "--db", str(db), "--gpu", "H100", "--against", "H200")
    out = _script("card_pairs.py", *args)
    assert f"# {h100} beside NVIDIA H200" in out
    assert "4 cells on both cards; their statuses agree in 3." in out
    assert re.search(r"^\| timm/dla34 \| pass \| eager_error \| \d{4}-\d\d-\d\d \|", out, re.M)
    # Kernel time: 10 / 9 on the eager side, 5 / 4.5 compiled, whichever way timed.
    # vgg11: A 2.00x, B 1.65x (one region's eager read fast), the GPU-time speedups equal.
    assert "| both per call | 2 | " in out
    assert "| B in one autocast region | 1 | 1.21 | - | 1.00 | - |" in out
    per_call_row = next(line for line in out.splitlines() if line.startswith("| both per call"))
    # resnet50: A 2.00x, B 2.04x; resnet18: A 2.00x, B 3.33x: their median, 0.79.
    assert per_call_row.split(" | ")[2] == "0.79"
    assert per_call_row.endswith("| 1.11 | 1.11 |")
    # resnet18's H200 host took 36 / 9 = 4.0 of its kernels' time in eager against the
    # H100's 1.2: listed; resnet50's (1.22 against 1.2) and vgg11 (timed otherwise) not.
    assert "of those both timed per call: 1 of 2." in out
    assert re.search(
        r"^\| timm/resnet18 \| [0-9a-f]{8} \| 1\.20, 4\.00 \| 1\.20, 2\.40 \| 3\.33 \|", out, re.M
    )
    # The same card twice is bad input.
    done = _run("card_pairs.py", *args[:4], "--gpu", "H200", "--against", "NVIDIA H200")
    assert done.returncode == 2 and "name two cards" in done.stderr
