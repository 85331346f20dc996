"""How fast the dashboard shows the matrix on a large, synthetic data set.

Writes a SYNTHETIC run folder (200,000 result rows by default: 2,000 made-up models x 20
configs x 5 runs, ~140 timing samples per row like real cells) into a temporary
directory, never into data/runs, beside a copy of the shipped sweep (data/runs: the real
GPU results, unless ``--no-shipped``); starts the server on it as ``zoo-dashboard`` does
(tests/live_dashboard.py), which loads the results into DuckDB as it starts; drives
headless Chromium with Playwright and prints a table, each row the median of its trials.
Each time runs from the request (or key press) to the first frame the browser drew with
the result in it, checked at every frame:

- server start to data loaded: process start until the server says the results are in
  (with what it reads as it starts: the header, the filters' options and the first page
  of the unfiltered matrix, dashboard/serve.py);
- cold load: the first page asked of that server by a fresh browser (nothing cached):
  from the request to the first matrix tile shown;
- warm load: the same address again in a new tab (queries cached by the server);
- filter by URL: an address with filters (``?status=compile_error&backend=inductor``)
  in a new tab: a page load, bound by the blank-page floor, not a filter change;
- filter by widget: a model search typed in the sidebar (three per round, each new to
  the server) until the matrix shows the new rows;
- next page: the matrix's page 2 through its pager;
- cold load, browser cache warm: the same browser profile to the server restarted (a
  returning visitor: Streamlit's code comes from the browser's cache, the data does not);
- with ``--floors``, a blank Streamlit page and one tiny plotly chart, each on a fresh
  server and browser: what a page costs before any data of ours.

Needs ``pip install playwright`` and Debian's chromium (``apt-get install chromium``):

    python benchmarks/dashboard_speed.py [--rows 200000] [--samples 140] [--repeat 5] [--floors]
        [--no-shipped]

The machine's load average is printed beside the figures: on a shared machine they mean
little without it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dashboard import queries  # noqa: E402
from dashboard.data import load  # noqa: E402
from runner.matrix.cells import cell_key  # noqa: E402
from runner.store.schema import (  # noqa: E402
    ENVIRONMENT_COLUMNS,
    RESULT_TYPES,
    RUN_COLUMNS,
    SCHEMA_VERSION,
)
from tests.live_dashboard import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    free_port,
    live_dashboard,
    live_server,
)

SHIPPED_RUNS = REPO / "data" / "runs"
LABEL = "SYNTHETIC benchmark data (benchmarks/dashboard_speed.py)"
MATRIX_TILE = ".zoo-matrix a[title]"
VIEWPORT = {"width": 1400, "height": 1000}
MODELS, FAMILIES = 2_000, 150
CONFIGS = (
    [
        ("inductor", m, d, "bf16")
        for m in ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
        for d in ("false", "true", "auto")
    ]
    + [("inductor", "default", d, "fp32") for d in ("false", "true")]
    + [
        (b, "none", d, "bf16")
        for b in ("eager", "aot_eager", "cudagraphs")
        for d in ("false", "true")
    ]
)
STATUSES = {
    "pass": 0.80,
    "fail_accuracy": 0.05,
    "compile_error": 0.08,
    "eager_error": 0.02,
    "oom": 0.01,
    "timeout": 0.01,
    "crash": 0.01,
    "unsupported": 0.02,
}
SIGNATURES = [
    f"torch._dynamo.exc.Unsupported: synthetic failure #{i}: call_function <N> in <PATH>:<N>"
    for i in range(15)
]
TYPES = {
    "VARCHAR": pa.string(),
    "BIGINT": pa.int64(),
    "DOUBLE": pa.float64(),
    "BOOLEAN": pa.bool_(),
}


def write_synthetic_runs(out: Path, rows: int = 200_000, samples: int = 140, runs: int = 5) -> Path:
    """``out/<run_id>/{runs,results,graph_breaks,environments}.parquet``, all synthetic."""
    rng = np.random.default_rng(0)
    cells_per_run = rows // runs
    environments = [
        _environment("synthetic-env-torch-2.10", "2.10.0"),
        _environment("synthetic-env-torch-2.11", "2.11.0"),
    ]
    start = datetime(2026, 1, 1)
    for run_index in range(runs):
        run_id = str(uuid.uuid4())
        env = environments[0 if run_index < runs // 2 else 1]
        folder = out / run_id
        folder.mkdir(parents=True)
        started = start + timedelta(days=run_index)
        index = np.arange(cells_per_run)
        model = index % MODELS
        config = (index // MODELS) % len(CONFIGS)
        results = _results(rng, run_id, env["env_id"], model, config, samples, started)
        pq.write_table(results, folder / "results.parquet")
        pq.write_table(_graph_breaks(rng, results), folder / "graph_breaks.parquet")
        run = dict.fromkeys(RUN_COLUMNS)
        run.update(
            run_id=run_id,
            label=LABEL,
            command="synthetic: benchmarks/dashboard_speed.py",
            started_at=started,
            finished_at=started + timedelta(hours=10),
            status="finished",
            host="synthetic",
            device="cuda",
            gpu="SYNTHETIC GPU",
            env_id=env["env_id"],
            cells_planned=cells_per_run,
            cells_recorded=cells_per_run,
            schema_version=SCHEMA_VERSION,
        )
        pq.write_table(pa.Table.from_pylist([run]), folder / "runs.parquet")
        pq.write_table(pa.Table.from_pylist([env]), folder / "environments.parquet")
    (out / "README.txt").write_text(f"{LABEL}: made-up numbers, not measurements.\n")
    return out


def _environment(env_id: str, torch: str) -> dict:
    env = {name: "synthetic" for name in ENVIRONMENT_COLUMNS}
    env.update(env_id=env_id, torch=torch, gpu="SYNTHETIC GPU", gpu_count=1, gpu_memory_gb=1.0)
    env.update(cpu_count=1, schema_version=SCHEMA_VERSION)
    return env


def _results(rng, run_id, env_id, model, config, samples, started) -> pa.Table:
    n = len(model)
    names = [f"synthetic/f{m % FAMILIES:03d}_model{m:04d}" for m in model]
    axes = [CONFIGS[c] for c in config]
    status = rng.choice(list(STATUSES), size=n, p=list(STATUSES.values()))
    failed = ~np.isin(status, ["pass", "fail_accuracy"])
    signature = rng.integers(0, len(SIGNATURES), n)
    eager = rng.uniform(1, 50, n)
    speedup = np.exp(rng.normal(0.3, 0.3, n))
    compiled = eager / speedup
    breaks = np.where((status == "pass") & (rng.random(n) < 0.15), rng.integers(1, 4, n), 0)
    columns = {
        "cell_key": [
            cell_key(
                dict(
                    model_id=name,
                    size="full",
                    backend=b,
                    mode=m,
                    dynamic=d,
                    precision=p,
                    step="infer",
                    batch_size=64,
                    seq_len=None,
                    device="cuda",
                    env_id=env_id,
                )
            )
            for name, (b, m, d, p) in zip(names, axes, strict=True)
        ],
        "model_id": names,
        "suite": ["synthetic"] * n,
        "family": [f"f{m % FAMILIES:03d}" for m in model],
        "task": ["synthetic"] * n,
        "size": ["full"] * n,
        "backend": [a[0] for a in axes],
        "mode": [a[1] for a in axes],
        "dynamic": [a[2] for a in axes],
        "precision": [a[3] for a in axes],
        "step": ["infer"] * n,
        "batch_size": np.full(n, 64),
        "seq_len": pa.nulls(n, pa.int64()),
        "device": ["cuda"] * n,
        "env_id": [env_id] * n,
        "status": status,
        "error_type": np.where(failed, "Unsupported", None),
        "error_phase": np.where(failed, "dynamo trace", None),
        "error_signature": [
            SIGNATURES[s] if f else None for s, f in zip(signature, failed, strict=True)
        ],
        "error_message": [
            SIGNATURES[s] if f else None for s, f in zip(signature, failed, strict=True)
        ],
        "traceback_tail": [
            (
                "Traceback (most recent call last):\n"
                + '  File "synthetic.py", line 1\n' * 20
                + SIGNATURES[s]
            )
            if f
            else None
            for s, f in zip(signature, failed, strict=True)
        ],
        "graph_count": breaks + 1,
        "graph_break_count": breaks,
        "unique_break_count": breaks,
        "recompile_count": np.zeros(n, dtype=np.int64),
        "compile_s": rng.uniform(1, 60, n),
        "eager_ms": eager,
        "eager_ms_p25": eager * 0.99,
        "eager_ms_p75": eager * 1.01,
        "compiled_ms": compiled,
        "compiled_ms_p25": compiled * 0.99,
        "compiled_ms_p75": compiled * 1.01,
        "speedup": np.where(failed, np.nan, speedup),
        "memory_ratio": rng.uniform(0.3, 1.2, n),
        "accuracy_pass": status != "fail_accuracy",
        "input_shapes": ["[[64, 3, 224, 224]]"] * n,
    }
    offsets = pa.array(np.arange(n + 1, dtype=np.int32) * samples)
    for name in ("eager_samples_ms", "compiled_samples_ms"):
        columns[name] = pa.ListArray.from_arrays(offsets, pa.array(rng.uniform(1, 50, n * samples)))
    arrays = {}
    for name, sql in RESULT_TYPES.items():
        value = columns.get(name)
        if isinstance(value, pa.Array):
            arrays[name] = value
        elif value is None:
            arrays[name] = pa.nulls(n, TYPES.get(sql, pa.float64()))
        else:
            arrays[name] = pa.array(value, TYPES[sql], from_pandas=True)
    arrays["result_id"] = pa.array([str(uuid.uuid4()) for _ in range(n)])
    arrays["run_id"] = pa.array([run_id] * n)
    arrays["recorded_at"] = pa.array(
        [started + timedelta(seconds=int(i)) for i in range(n)], pa.timestamp("us")
    )
    arrays["schema_version"] = pa.array(np.full(n, SCHEMA_VERSION, dtype=np.int32))
    return pa.table(arrays)


def _graph_breaks(rng, results: pa.Table) -> pa.Table:
    counts = results.column("graph_break_count").to_numpy()
    rows = np.repeat(np.arange(len(counts)), counts)
    idx = np.concatenate([np.arange(c) for c in counts if c]) if len(rows) else np.array([])
    take = lambda name: results.column(name).take(pa.array(rows)).to_pylist()  # noqa: E731
    return pa.table(
        {
            "result_id": take("result_id"),
            "run_id": take("run_id"),
            "cell_key": take("cell_key"),
            "idx": pa.array(idx.astype(np.int32)),
            "reason": [f"synthetic break reason {int(i)}" for i in idx],
            "user_frame": [f"synthetic_model.py:{int(i) * 10 + 7}" for i in idx],
            "count": pa.array(np.ones(len(rows), dtype=np.int64)),
            "schema_version": pa.array(np.full(len(rows), SCHEMA_VERSION, dtype=np.int32)),
        }
    )


# The matrix's row labels (model ids), top to bottom, as a JavaScript expression.
ROW_LABELS = "[...document.querySelectorAll('.zoo-matrix a.model')].map(t => t.textContent)"


SEARCHES = ("model01", "f003_", "model19")
# Apps for the floors: what a browser needs before any of our data shows.
FLOOR_APPS = {
    "floor: blank page": ("st.markdown('floor-text')", "floor-text"),
    "floor: tiny plotly": (
        "import plotly.graph_objects as go\n"
        "st.plotly_chart(go.Figure(go.Scatter(x=[1, 2], y=[1, 2], mode='markers')))",
        ".js-plotly-plot .scatterlayer path.point",
    ),
}


def _first_row(page) -> str:
    return page.evaluate(f"{ROW_LABELS}[0]")


def _shown(page, expression: str, arg=None, timeout_ms: int = 60_000) -> None:
    """Wait until the JavaScript ``expression`` (a function of ``arg``) holds, checked at
    every frame the browser draws. Playwright's own waits check at 0, 20, 70, 170 and
    270 ms, then every 500 ms: a figure read with them could be half a second late."""
    page.wait_for_function(expression, arg=arg, polling="raf", timeout=timeout_ms)


# What the waits look for, as JavaScript.
TILE_SHOWN = f"() => document.querySelector('{MATRIX_TILE}') !== null"
TEXT_SHOWN = "text => document.body !== null && document.body.textContent.includes(text)"


def _browser(playwright, profile: Path):
    """Headless Chromium keeping its profile, HTTP cache included, in ``profile``."""
    return playwright.chromium.launch_persistent_context(
        profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS, viewport=VIEWPORT
    )


def measure(base: str, profile: Path, timeout_ms: int = 60_000) -> dict[str, list[float]]:
    """One round of the measurements against a freshly started server (data loaded, no
    page asked for yet) by a browser with an empty ``profile``: each name has one or
    more timings in seconds, from the request (or the key press) to the frame that
    showed the result."""
    from playwright.sync_api import sync_playwright

    times: dict[str, list[float]] = {}
    with sync_playwright() as p:
        context = _browser(p, profile)
        page = context.new_page()
        start = time.perf_counter()
        page.goto(base + "/", wait_until="commit")
        _shown(page, TEXT_SHOWN, "Models 1", timeout_ms)
        times["cold: caption shown"] = [time.perf_counter() - start]
        _shown(page, TILE_SHOWN, timeout_ms=timeout_ms)
        times["cold load"] = [time.perf_counter() - start]

        warm = context.new_page()
        start = time.perf_counter()
        warm.goto(base + "/", wait_until="commit")
        _shown(warm, TILE_SHOWN, timeout_ms=timeout_ms)
        times["warm load"] = [time.perf_counter() - start]
        warm.close()

        url_page = context.new_page()
        start = time.perf_counter()
        url_page.goto(base + "/?status=compile_error&backend=inductor", wait_until="commit")
        _shown(url_page, TILE_SHOWN, timeout_ms=timeout_ms)
        _shown(url_page, TEXT_SHOWN, "compile_error (", timeout_ms)
        times["filter by URL"] = [time.perf_counter() - start]
        url_page.close()

        # A page in the background draws no frames: the first one comes to the front.
        page.bring_to_front()
        # A change counts once the matrix itself is redrawn: its row labels are the new ones.
        first = _first_row(page)
        search = page.get_by_label("Model search")
        times["filter by widget"] = []
        for text in SEARCHES:
            search.fill(text)
            start = time.perf_counter()
            search.press("Enter")
            _shown(
                page,
                f"text => {{ const rows = {ROW_LABELS}; "
                "return rows.length > 0 && rows.every(t => t.includes(text)); }",
                text,
                timeout_ms,
            )
            times["filter by widget"].append(time.perf_counter() - start)

        search.fill("")
        search.press("Enter")
        _shown(page, f"first => {ROW_LABELS}[0] === first", first, timeout_ms)
        start = time.perf_counter()
        page.get_by_label("Page 2", exact=True).click()
        _shown(
            page,
            f"first => {{ const rows = {ROW_LABELS}; return rows.length && rows[0] !== first; }}",
            first,
            timeout_ms,
        )
        times["next page"] = [time.perf_counter() - start]
        context.close()
    return times


def measure_returning(base: str, profile: Path, timeout_ms: int = 60_000) -> float:
    """A browser that has seen the dashboard before (its ``profile`` holds Streamlit's
    code, which the server marks immutable) asks a freshly started server for the matrix."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = _browser(p, profile)
        page = context.new_page()
        start = time.perf_counter()
        page.goto(base + "/", wait_until="commit")
        _shown(page, TILE_SHOWN, timeout_ms=timeout_ms)
        elapsed = time.perf_counter() - start
        context.close()
    return elapsed


def measure_floors(folder: Path, timeout_ms: int = 60_000) -> dict[str, list[float]]:
    """A fresh browser to a fresh Streamlit server of a blank page, and of one tiny
    plotly chart: the least any Streamlit page, or any page with a plotly chart, costs."""
    from playwright.sync_api import sync_playwright

    times: dict[str, list[float]] = {}
    for name, (body, selector) in FLOOR_APPS.items():
        app = folder / f"{name.split()[-1]}.py"
        app.write_text(f"import streamlit as st\n{body}\n")
        command = ["-m", "streamlit", "run", str(app)]
        profile = Path(tempfile.mkdtemp(prefix="chromium-", dir=folder))
        with live_server(command, folder / f"{app.stem}.log") as server, sync_playwright() as p:
            context = _browser(p, profile)
            page = context.new_page()
            start = time.perf_counter()
            page.goto(server.url, wait_until="commit")
            if selector.startswith("."):
                _shown(page, "s => document.querySelector(s) !== null", selector, timeout_ms)
            else:
                _shown(page, TEXT_SHOWN, selector, timeout_ms)
            times[name] = [time.perf_counter() - start]
            context.close()
    return times


def _load() -> float:
    return os.getloadavg()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--samples", type=int, default=140, help="timing samples per row")
    parser.add_argument("--repeat", type=int, default=5, help="server restarts (cold loads)")
    parser.add_argument(
        "--floors", action="store_true", help="also time a blank and a tiny plotly page"
    )
    parser.add_argument(
        "--no-shipped", action="store_true", help="the synthetic rows alone, without data/runs"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="zoo-synthetic-") as tmp:
        runs_dir = write_synthetic_runs(Path(tmp) / "runs", args.rows, args.samples)
        shipped = [] if args.no_shipped else sorted(SHIPPED_RUNS.glob("*/results.parquet"))
        for results in shipped:
            shutil.copytree(results.parent, runs_dir / results.parent.name)
        print(f"with {len(shipped)} shipped runs from {SHIPPED_RUNS}")
        db_path = Path(tmp) / "no-user-database.duckdb"
        start = time.perf_counter()
        con, _ = load(runs_dir, db_path)
        load_s = time.perf_counter() - start
        for statement in queries.PREPARE:
            con.execute(statement)
        prepare_s = time.perf_counter() - start - load_s
        (rows,) = con.execute("SELECT count(*) FROM results").fetchone()
        con.close()
        print(
            f"{rows:,} result rows ({args.rows:,} synthetic, {args.samples} samples each, "
            f"the rest shipped) in {runs_dir}"
        )
        print(f"in this process: data.load {load_s:.2f} s, queries.PREPARE {prepare_s:.2f} s")
        rounds, loads = [], []
        for _ in range(args.repeat):
            before = _load()
            log = Path(tmp) / "zoo-dashboard.log"
            profile = Path(tempfile.mkdtemp(prefix="chromium-", dir=tmp))
            # The same port twice: a browser caches per origin.
            port = free_port()
            with live_dashboard(runs_dir, db_path, log, True, port) as server:
                times = {"server start to data loaded": [server.ready_s]}
                times.update(measure(server.url, profile))
            with live_dashboard(runs_dir, db_path, log, True, port) as server:
                times["cold load, browser cache warm"] = [measure_returning(server.url, profile)]
            if args.floors:
                times.update(measure_floors(Path(tmp)))
            rounds.append(times)
            loads.append((before, _load()))
            print(f"round {len(rounds)}: " + ", ".join(f"{k} {v[0]:.2f}" for k, v in times.items()))
    # The targets: the matrix within 2 s of a cold request, a filter within 0.5 s.
    # A filter given by URL is a page load (see the blank-page floor), not a filter change.
    targets = {"cold load": 2.0, "filter by widget": 0.5}
    print(
        f"\n{rows:,} result rows; {len(rounds)} rounds, each a fresh server (data and the "
        "unfiltered first matrix page read at its start, every other query cache empty) and "
        "a fresh headless Chromium (empty profile); then the same browser to the server "
        "restarted; each time to the first frame drawn with the result"
    )
    print(
        "load average (1 min) at the rounds' starts and ends: "
        + ", ".join(f"{a:.1f}/{b:.1f}" for a, b in loads)
        + f" on {os.cpu_count()} CPUs"
    )
    print(f"\n{'measurement':28} {'trials':>6} {'min s':>7} {'median s':>9} {'max s':>7}   target")
    for name in rounds[0]:
        values = sorted(v for r in rounds for v in r[name])
        median = statistics.median(values)
        target = targets.get(name)
        verdict = (
            f"< {target:g} s: "
            + ("met" if median < target else f"MISSED by {median - target:.2f} s")
            if target
            else ""
        )
        print(
            f"{name:28} {len(values):6} {values[0]:7.2f} {median:9.2f} {values[-1]:7.2f}"
            f"   {verdict}"
        )
    print(json.dumps({"rows": rows, "load_average": loads, "rounds": rounds}))


if __name__ == "__main__":
    main()
