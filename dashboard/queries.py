"""Every SQL statement of the dashboard, parameterized."""

from dataclasses import fields

from dashboard import caveats
from dashboard.caveats import DISTURBED, GPU_BOUND, LAUNCH_BOUND, STEADY
from runner.matrix.labels import DISTURBED_RATIO, launch_bound_sql
from runner.matrix.results import CROWDED, TRIAGE_INTERRUPTED, TUNING_REUSED
from runner.store.schema import crowded_row, latest_row, one_autocast_region


def _disturbance(alias: str) -> str:
    """How far a side's median sits above its fastest sample (about 1.01 quiet), the
    larger side's; rows written before the column have it from their fastest samples."""
    return (
        f"coalesce({alias}.timing_disturbance, greatest("
        f"{alias}.eager_ms / nullif({alias}.eager_fastest_ms, 0), "
        f"{alias}.compiled_ms / nullif({alias}.compiled_fastest_ms, 0)))"
    )


def _timing(disturbance: str) -> str:
    """The timing label of a disturbance (runner.matrix.labels.is_disturbed)."""
    return (
        f"CASE WHEN {disturbance} >= {DISTURBED_RATIO} THEN '{DISTURBED}' "
        f"WHEN {disturbance} IS NOT NULL THEN '{STEADY}' END"
    )


# -- pages: Matrix, Summary, Model detail, Failures (dashboard/reads.py runs them) --

# Run once per load: pages read these tables, so a view never re-ranks every result row.
# `cells` holds every result row with what the pages show, its config label (the matrix
# column), run label, torch and GPU; `latest_cells` the newest row of each matrix cell
# (model x config). A matrix cell can hold several cell keys (environments, batch
# sizes): the matrix shows the newest, Model detail shows them all. Device, size and
# step join the label only when the data holds more than one of them; so does the GPU's
# name, so that a row measured on one card never stands in for another card's (a user's
# own run beside the shipped H200 results makes rows of its own).
PREPARE = (
    f"""
    CREATE OR REPLACE TABLE cells AS
    WITH axes AS (
        SELECT
            count(DISTINCT r.device) > 1 AS show_device,
            count(DISTINCT r.size) > 1 AS show_size,
            count(DISTINCT r.step) > 1 AS show_step,
            count(DISTINCT e.gpu) FILTER (WHERE r.device = 'cuda') > 1 AS show_gpu
        FROM results r LEFT JOIN environments e ON e.env_id = r.env_id
    ),
    labelled AS (
        SELECT
            r.result_id, r.run_id, coalesce(u.label, '') AS label, r.cell_key, r.model_id,
            r.suite, coalesce(r.family, '') AS family, r.size, r.backend, r.mode, r.dynamic,
            r.precision, r.step, r.batch_size, r.device, r.env_id, e.torch, e.gpu,
            concat_ws(
                ' ',
                r.backend || CASE WHEN r.mode = 'none' THEN '' ELSE '/' || r.mode END,
                'dyn=' || r.dynamic,
                r.precision,
                CASE WHEN axes.show_step THEN r.step END
            ) AS config,
            -- device and size are facets of the model's row, not of the config column:
            -- a CPU run of tiny models adds rows ("timm/resnet50 · cpu tiny"), never
            -- columns interleaved with the GPU's
            concat_ws(
                ' ',
                CASE WHEN axes.show_gpu AND r.device = 'cuda' THEN e.gpu END,
                CASE WHEN axes.show_device THEN r.device END,
                CASE WHEN axes.show_size THEN r.size END
            ) AS variant,
            r.status, r.error_type, r.error_phase, r.error_signature, r.triage_rung,
            -- why a cell could not run here (dashboard.status); other messages stay in results
            CASE WHEN r.status = 'unsupported' THEN r.error_message END AS unsupported_reason,
            r.graph_break_count,
            r.recompile_count, r.compile_s,
            -- other cells busy on the host's cores while it compiled (0: alone)
            r.compile_beside, r.eager_ms, r.compiled_ms, r.speedup,
            r.memory_ratio, r.eager_peak_alloc_mb, r.compiled_peak_alloc_mb, r.accuracy_pass,
            r.recorded_at,
            -- other cells busy on the host while it was timed, and the launch canary's
            -- microseconds per tiny call then (runner.measure.timing)
            r.timing_beside, r.host_launch_us,
            {_disturbance("r")} AS timing_disturbance,
            -- disturbed: its speedup is not to be trusted (a filter and a badge)
            {_timing(_disturbance("r"))} AS timing,
            r.gpu_speedup, r.eager_gpu_ms, r.compiled_gpu_ms, r.eager_kernels,
            r.compiled_kernels, r.precision_treatment,
            -- timed inside one autocast region: its speedup reads low, its memory high
            {one_autocast_region("r")} AS one_region,
            coalesce(contains(r.notes, '{caveats.FIRST_SWEEP_XLA_NOTE}'), false)
                AS xla_first_sweep,
            -- a CUDA graph cell whose compiled peak counts its pool says so in its notes
            coalesce(contains(r.notes, '{caveats.GRAPH_POOL_NOTE}'), false) AS pool_counted,
            -- it, or an earlier attempt of it, ran out of memory beside other processes
            coalesce(contains(r.notes, '{CROWDED}'), false) AS crowded,
            -- a crowded oom row, which never hides a measured one (schema.latest_row)
            {crowded_row("r")} AS crowded_oom,
            -- compiled with its partner max-autotune cell's tuning (runner.measure.tuning)
            coalesce(contains(r.notes, '{TUNING_REUSED}'), false) AS tuning_reused,
            r.batch_size_run,
            -- eager wall time (its fastest sample) far above its GPU busy time: the
            -- host's speed sets it (runner.matrix.labels)
            CASE WHEN r.eager_gpu_ms > 0 THEN
                CASE WHEN {launch_bound_sql("coalesce(r.eager_fastest_ms, r.eager_ms)", "r.eager_gpu_ms")}
                THEN '{LAUNCH_BOUND}' ELSE '{GPU_BOUND}' END
            END AS bound
        FROM results r
        CROSS JOIN axes
        LEFT JOIN runs u ON u.run_id = r.run_id
        LEFT JOIN environments e ON e.env_id = r.env_id
    ),
    rowed AS (
        SELECT *,
            CASE WHEN variant = '' THEN model_id ELSE model_id || ' · ' || variant END AS row_id
        FROM labelled
    ),
    -- a matrix cell recorded in several environments shows its newest row
    env_counts AS (
        SELECT row_id, config, count(DISTINCT env_id) AS environments
        FROM rowed GROUP BY row_id, config
    )
    SELECT *, {caveats.sql()} AS caveats
    FROM rowed JOIN env_counts USING (row_id, config)
    """,
    # A group-by picks the newest rows several times faster than a window over them all;
    # a crowded row never hides a measured one (runner.store.schema.latest_row).
    """
    CREATE OR REPLACE TABLE latest_cells AS
    SELECT * FROM cells
    WHERE result_id IN (
        SELECT max_by(result_id, (NOT crowded_oom, recorded_at, result_id))
        FROM cells GROUP BY row_id, config
    )
    ORDER BY family, model_id
    """,
)

# The filters every page applies (dashboard.filters.Filters): for each, the values it
# accepts (none: any), and a case-insensitive search text. With runs chosen, the newest
# row of each matrix cell among those runs counts; the status filter applies to that row.
# A filtered statement names its rows `chosen` through the CTE CHOSEN stands for (or, over
# every row `c`, the condition FILTERED_ROWS stands for); `filtered` writes them for the
# filters in force, their values as parameters, so that the statement DuckDB plans has
# only the conditions in force: half the time of one that tests every filter on every row
# (docs/PERFORMANCE.md, "Dashboard").
CHOSEN = "/* the CTE `chosen` (queries.filtered) */"
FILTERED_ROWS = "/* the filters' condition on row c (queries.filtered) */"


def filtered(sql: str, filters, **params) -> tuple[str, dict[str, object]]:
    """``sql`` with its CHOSEN and FILTERED_ROWS written for ``filters`` (a
    ``dashboard.filters.Filters``), and the parameters it takes: ``params`` and the
    filters' values. Column names come from the Filters fields, never from a value."""
    params = dict(params)
    if CHOSEN in sql:
        if filters.run:
            scoped = f"""
    in_runs AS (SELECT * FROM cells c WHERE {_in_runs("c", filters, params)}),
    scoped AS (
        SELECT * FROM in_runs
        WHERE result_id IN (
            SELECT max_by(result_id, (NOT crowded_oom, recorded_at, result_id))
            FROM in_runs
            GROUP BY row_id, config
        )
    )"""
        else:
            scoped = "scoped AS (SELECT * FROM latest_cells)"
        where = " AND ".join(_conditions("s", filters, params)) or "TRUE"
        sql = sql.replace(
            CHOSEN, f"{scoped},\n    chosen AS (SELECT s.* FROM scoped s WHERE {where})"
        )
    if FILTERED_ROWS in sql:
        runs = [_in_runs("c", filters, params)] if filters.run else []
        where = " AND ".join(runs + _conditions("c", filters, params)) or "TRUE"
        sql = sql.replace(FILTERED_ROWS, where)
    return sql, params


def _conditions(alias: str, filters, params: dict) -> list[str]:
    """Row ``alias`` passes each filter in force but the run's; their values into ``params``."""
    conditions = []
    for field in fields(filters):
        name, values = field.name, getattr(filters, field.name)
        if name in ("search", "run") or not values:
            continue
        params[name] = list(values)
        conditions.append(f"list_contains(${name}::VARCHAR[], {alias}.{name})")
    if filters.search:
        params["search"] = filters.search
        conditions.append(f"contains(lower({alias}.model_id), lower($search::VARCHAR))")
    return conditions


def _in_runs(alias: str, filters, params: dict) -> str:
    """Row ``alias`` is of a chosen run or label."""
    params["run"] = list(filters.run)
    return (
        f"(list_contains($run::VARCHAR[], {alias}.run_id) "
        f"OR list_contains($run::VARCHAR[], {alias}.label))"
    )


# The values each filter offers. Every model and config has a newest row, so those come
# from latest_cells (fast); statuses from every row, so a run filter never hides one.
FACETS = """
SELECT
    coalesce(list(DISTINCT suite ORDER BY suite) FILTER (WHERE suite IS NOT NULL), []) AS suite,
    coalesce(list(DISTINCT family ORDER BY family) FILTER (WHERE family <> ''), []) AS family,
    coalesce((SELECT list(DISTINCT status) FILTER (WHERE status IS NOT NULL) FROM cells), [])
        AS status,
    coalesce(list(DISTINCT backend) FILTER (WHERE backend IS NOT NULL), []) AS backend,
    coalesce(list(DISTINCT mode) FILTER (WHERE mode IS NOT NULL), []) AS mode,
    coalesce(list(DISTINCT dynamic) FILTER (WHERE dynamic IS NOT NULL), []) AS dynamic,
    coalesce(list(DISTINCT precision) FILTER (WHERE precision IS NOT NULL), []) AS precision,
    coalesce(list(DISTINCT step ORDER BY step) FILTER (WHERE step IS NOT NULL), []) AS step,
    coalesce(list(DISTINCT size ORDER BY size) FILTER (WHERE size IS NOT NULL), []) AS size,
    coalesce(list(DISTINCT device ORDER BY device) FILTER (WHERE device IS NOT NULL), []) AS device,
    coalesce(list(DISTINCT gpu ORDER BY gpu) FILTER (WHERE device = 'cuda' AND gpu <> ''), [])
        AS gpu,
    coalesce(list(DISTINCT bound ORDER BY bound) FILTER (WHERE bound IS NOT NULL), []) AS bound,
    coalesce(list(DISTINCT timing ORDER BY timing) FILTER (WHERE timing IS NOT NULL), [])
        AS timing,
    coalesce(list(DISTINCT model_id ORDER BY model_id) FILTER (WHERE model_id IS NOT NULL), []) AS model
FROM latest_cells
"""

# The devices the cells ran on, for the header: a GPU by its name, the CPU as CPU.
DEVICES = """
SELECT
    CASE WHEN device = 'cpu' THEN 'CPU' ELSE coalesce(gpu, device) END AS name,
    count(*) AS cells
FROM latest_cells
GROUP BY name
ORDER BY cells DESC, name
"""

RUNS = """
SELECT run_id, coalesce(label, '') AS label, started_at, status, gpu, cells_recorded
FROM runs
ORDER BY started_at DESC, run_id
"""

# What the data is, for the header: counts over the newest row of every matrix cell,
# dates over every row.
OVERVIEW = """
SELECT
    count(*) AS cells,
    count(*) FILTER (WHERE status = 'pass') AS passed,
    count(*) FILTER (WHERE status = 'pass' AND one_region) AS one_region_passes,
    count(*) FILTER (WHERE status = 'unsupported') AS unsupported,
    count(DISTINCT model_id) AS models,
    count(DISTINCT config) AS configs,
    list(DISTINCT gpu ORDER BY gpu) FILTER (WHERE gpu IS NOT NULL) AS gpus,
    list(DISTINCT torch ORDER BY torch) FILTER (WHERE torch IS NOT NULL) AS torch_versions,
    (SELECT min(recorded_at) FROM cells) AS first_recorded,
    (SELECT max(recorded_at) FROM cells) AS last_recorded,
    (SELECT count(*) FROM results) AS result_rows,
    (SELECT count(*) FROM runs) AS runs
FROM latest_cells
"""

# The columns (configs) and number of rows (models, families) of the filtered matrix.
MATRIX_SHAPE = f"""
WITH {CHOSEN}
SELECT
    config, any_value(backend) AS backend, any_value(mode) AS mode,
    any_value(dynamic) AS dynamic, any_value(precision) AS precision,
    any_value(device) AS device, any_value(size) AS size, count(*) AS cells,
    (SELECT count(DISTINCT row_id) FROM chosen) AS models,
    (SELECT count(DISTINCT family) FROM chosen) AS families
FROM chosen
GROUP BY config
"""

# One page of matrix rows: models ordered by family then id ($limit, $offset).
MATRIX_CELLS = f"""
WITH {CHOSEN},
page AS (
    SELECT DISTINCT family, row_id FROM chosen
    ORDER BY family, row_id
    LIMIT $limit OFFSET $offset
)
SELECT
    c.row_id, c.model_id, c.family, c.config, c.status, c.speedup, c.graph_break_count, c.compile_s,
    c.memory_ratio, c.error_type, c.torch, c.recorded_at, c.timing_disturbance, c.timing,
    c.gpu_speedup, c.bound, c.caveats, c.host_launch_us
FROM chosen c SEMI JOIN page USING (row_id)
ORDER BY c.family, c.row_id, c.config
"""

# The matrix by family: one row per family and config; pass rates count attempted cells
# (not unsupported ones), beside the unsupported and the not run (dashboard.status).
FAMILY_MATRIX = f"""
WITH {CHOSEN},
family_models AS (SELECT family, count(DISTINCT model_id) AS n FROM chosen GROUP BY family)
SELECT
    family, config,
    count(*) AS total,
    count(*) FILTER (WHERE status = 'pass') AS passed,
    count(*) FILTER (WHERE status = 'unsupported') AS unsupported,
    count(*) FILTER (WHERE status <> 'unsupported') AS attempted,
    -- the family's models without a cell in this config
    any_value(f.n) - count(*) AS not_run,
    count(DISTINCT model_id) AS models,
    exp(avg(ln(speedup)) FILTER (WHERE status = 'pass' AND speedup > 0)) AS geomean_speedup
FROM chosen JOIN family_models f USING (family)
GROUP BY family, config
ORDER BY family, config
"""

# Every cell the filters show, for the CSV download.
CHOSEN_CELLS = f"""
WITH {CHOSEN}
SELECT
    model_id, suite, family, config, backend, mode, dynamic, precision, size, device,
    batch_size, status, error_type, error_phase, graph_break_count, recompile_count,
    compile_s, compile_beside, eager_ms, compiled_ms, speedup, eager_gpu_ms, compiled_gpu_ms,
    gpu_speedup, eager_kernels, compiled_kernels, bound, timing_disturbance, timing,
    timing_beside, host_launch_us, array_to_string(caveats, '; ') AS caveats, memory_ratio, accuracy_pass, torch, gpu,
    env_id, run_id, label, recorded_at
FROM chosen
ORDER BY family, model_id, config
"""

# Per suite and config: pass rate, geomean speedup over passing cells, medians.
SUMMARY = f"""
WITH {CHOSEN},
suite_models AS (SELECT suite, count(DISTINCT model_id) AS n FROM chosen GROUP BY suite)
SELECT
    suite, variant, config,
    any_value(backend) AS backend, any_value(mode) AS mode, any_value(dynamic) AS dynamic,
    any_value(precision) AS precision,
    count(*) FILTER (WHERE status = 'pass') AS passed,
    count(*) AS total,
    count(*) FILTER (WHERE status NOT IN ('pass', 'unsupported')) AS failed,
    count(*) FILTER (WHERE status = 'unsupported') AS unsupported,
    count(*) FILTER (WHERE status <> 'unsupported') AS attempted,
    any_value(m.n) - count(*) AS not_run,
    -- why the unsupported cells could not run (the cell's message)
    coalesce(list(DISTINCT unsupported_reason) FILTER (WHERE unsupported_reason IS NOT NULL), [])
        AS unsupported_reasons,
    count(*) FILTER (WHERE status = 'pass' AND graph_break_count = 0) AS fullgraph,
    exp(avg(ln(speedup)) FILTER (WHERE status = 'pass' AND speedup > 0)) AS geomean_speedup,
    median(compile_s) AS median_compile_s,
    median(memory_ratio) AS median_memory_ratio
FROM chosen JOIN suite_models m USING (suite)
GROUP BY suite, variant, config
"""

# Passing cells for the speedup charts: all of them, or a repeatable sample of
# $max_points (ordered by a hash, so the same filters always draw the same points).
SPEEDUP_POINTS = f"""
WITH {CHOSEN}
SELECT
    row_id AS model_id, config, backend, speedup, compile_s, compile_beside, memory_ratio,
    len(caveats) > 0 AS caveat
FROM chosen
WHERE status = 'pass' AND speedup > 0
ORDER BY hash(model_id, config)
LIMIT $max_points
"""

# Per config, over all its passing cells (not a sample): the quartiles, fastest and
# slowest of the speedup and of the compile time, for box plots drawn from them.
_QUARTILES = """
    count(*) FILTER (WHERE {where}) AS {name}_n,
    min({value}) FILTER (WHERE {where}) AS {name}_min,
    quantile_cont({value}, 0.25) FILTER (WHERE {where}) AS {name}_q1,
    median({value}) FILTER (WHERE {where}) AS {name}_median,
    quantile_cont({value}, 0.75) FILTER (WHERE {where}) AS {name}_q3,
    max({value}) FILTER (WHERE {where}) AS {name}_max
"""
_SPEEDUPS = _QUARTILES.format(
    name="speedup", value="speedup", where="status = 'pass' AND speedup > 0"
)
_COMPILES = _QUARTILES.format(
    name="compile", value="compile_s", where="status = 'pass' AND compile_s > 0"
)
DISTRIBUTIONS = f"""
WITH {CHOSEN}
SELECT
    config, variant, any_value(backend) AS backend, any_value(mode) AS mode,
    any_value(dynamic) AS dynamic, any_value(precision) AS precision,
    {_SPEEDUPS}, {_COMPILES}
FROM chosen
GROUP BY config, variant
"""

# Pass rate and geomean speedup of each config in each sweep (a label, or a run without
# one) that recorded it, for configs recorded by two sweeps or more: every row counts,
# not only the newest, each model's newest row within the sweep. The filters apply to
# every row as they do to the newest ones elsewhere.
SWEEP_TRENDS = f"""
WITH swept AS (
    SELECT c.*, CASE WHEN c.label <> '' THEN c.label ELSE 'run ' || c.run_id[:8] END AS sweep
    FROM cells c
    WHERE {FILTERED_ROWS}
),
newest AS (
    SELECT * FROM swept
    QUALIFY row_number() OVER (
        PARTITION BY sweep, row_id, config
        ORDER BY crowded_oom, recorded_at DESC, result_id DESC
    ) = 1
)
SELECT
    config, variant, sweep, min(recorded_at) AS first_recorded,
    max(recorded_at) AS last_recorded,
    any_value(backend) AS backend, any_value(mode) AS mode, any_value(dynamic) AS dynamic,
    any_value(precision) AS precision,
    count(DISTINCT row_id) AS models,
    count(*) FILTER (WHERE status = 'pass') AS passed,
    count(*) FILTER (WHERE status <> 'unsupported') AS attempted,
    count(*) FILTER (WHERE status = 'pass' AND speedup > 0) AS timed,
    exp(avg(ln(speedup)) FILTER (WHERE status = 'pass' AND speedup > 0)) AS geomean_speedup
FROM newest
GROUP BY config, variant, sweep
QUALIFY count(*) OVER (PARTITION BY config, variant) > 1
ORDER BY config, variant, first_recorded, sweep
"""

# An accuracy failure has no error message to group by; what tells one from another is
# where the triage ladder placed it (wrong already under dynamo's eager backend, or only
# once Inductor compiles), so its group is that verdict.
_ACCURACY_SIGNATURE = f"""
CASE WHEN status = 'fail_accuracy' THEN 'fail_accuracy: ' || CASE
    WHEN triage_rung IS NULL OR triage_rung = '{TRIAGE_INTERRUPTED}' THEN 'not triaged'
    ELSE triage_rung END END"""
# A failing row's group: its normalized error signature; when it has none, its error
# type, an accuracy failure's triage verdict, else its status (docs' reports group so too).
FAILURE_SIGNATURE = f"coalesce(error_signature, error_type, {_ACCURACY_SIGNATURE}, status)"

# Failing cells grouped by FAILURE_SIGNATURE; unsupported cells are no failures:
# UNSUPPORTED_REASONS.
FAILURE_GROUPS = f"""
WITH {CHOSEN}
SELECT
    status,
    {FAILURE_SIGNATURE} AS signature,
    any_value(error_type) AS error_type,
    coalesce(list(DISTINCT error_phase) FILTER (WHERE error_phase IS NOT NULL), []) AS phases,
    count(*) AS cells,
    count(DISTINCT model_id) AS models,
    list(DISTINCT model_id ORDER BY model_id) AS model_ids,
    list(DISTINCT config ORDER BY config) AS configs,
    -- where the triage ladder placed the group's cells (--triage ladder)
    coalesce(list(DISTINCT triage_rung) FILTER (WHERE triage_rung IS NOT NULL), []) AS rungs,
    min(result_id) AS example_result_id
FROM chosen
WHERE status NOT IN ('pass', 'unsupported')
GROUP BY status, signature
ORDER BY cells DESC, status, signature
"""

# Cells that could not run here, by their reason: not failures (dashboard.status).
UNSUPPORTED_REASONS = f"""
WITH {CHOSEN}
SELECT
    coalesce(unsupported_reason, 'no reason recorded') AS reason,
    count(*) AS cells,
    count(DISTINCT model_id) AS models,
    list(DISTINCT config ORDER BY config) AS configs
FROM chosen
WHERE status = 'unsupported'
GROUP BY reason
ORDER BY cells DESC, reason
"""

# The newest row of every cell key of one model ($model), all columns but the samples.
MODEL_CELLS = f"""
WITH params AS (SELECT $run::VARCHAR[] AS run)
SELECT
    r.* EXCLUDE (eager_samples_ms, compiled_samples_ms),
    c.config, c.label, c.torch, c.gpu, c.bound, c.timing, c.caveats, c.environments,
    -- the row the Matrix and the Leaderboard show for its model and config
    c.result_id IN (SELECT result_id FROM latest_cells) AS shown
FROM results r
JOIN cells c USING (result_id)
CROSS JOIN params p
WHERE r.model_id = $model
    AND (len(p.run) = 0 OR list_contains(p.run, r.run_id) OR list_contains(p.run, c.label))
QUALIFY {latest_row("r.cell_key", alias="r")}
ORDER BY c.config, r.batch_size, r.env_id
"""

# Every row ever recorded for one model ($model), newest first: its history.
MODEL_HISTORY = """
SELECT recorded_at, config, status, speedup, compile_s, graph_break_count, torch, label, run_id
FROM cells
WHERE model_id = $model
ORDER BY recorded_at DESC
"""

GRAPH_BREAKS = """
SELECT result_id, idx, reason, user_frame, count
FROM graph_breaks
WHERE list_contains($result_ids::VARCHAR[], result_id)
ORDER BY result_id, idx
"""

# One result row by id ($result_id): a failure group's example traceback.
RESULT = """
SELECT r.* EXCLUDE (eager_samples_ms, compiled_samples_ms), c.config
FROM results r JOIN cells c USING (result_id)
WHERE r.result_id = $result_id
"""

# -- compare (zoo-compare and the Compare page) --

# A side of a comparison is a set of run ids or of environment ids; each query below
# takes, per side, the run ids then the environment ids (one of the two lists empty).
_COMPARE_SIDE = f"""
    SELECT * FROM results
    WHERE run_id IN (SELECT unnest(?::VARCHAR[])) OR env_id IN (SELECT unnest(?::VARCHAR[]))
    QUALIFY {
    latest_row(
        "model_id, size, backend, mode, dynamic, precision, step, batch_size, seq_len, device"
    )
}
"""

# Cells match on the cell key fields without env_id, so two environments can be compared.
_COMPARE_MATCH = """
    a.model_id IS NOT DISTINCT FROM b.model_id AND a.size IS NOT DISTINCT FROM b.size
    AND a.backend IS NOT DISTINCT FROM b.backend AND a.mode IS NOT DISTINCT FROM b.mode
    AND a.dynamic IS NOT DISTINCT FROM b.dynamic
    AND a.precision IS NOT DISTINCT FROM b.precision AND a.step IS NOT DISTINCT FROM b.step
    AND a.batch_size IS NOT DISTINCT FROM b.batch_size
    AND a.seq_len IS NOT DISTINCT FROM b.seq_len AND a.device IS NOT DISTINCT FROM b.device
"""

# The speedup bounds come from the latency quartiles; a row without them is a point.
COMPARE_CELLS = f"""
WITH a AS ({_COMPARE_SIDE}), b AS ({_COMPARE_SIDE})
SELECT
    a.model_id, a.size, a.backend, a.mode, a.dynamic, a.precision, a.step, a.batch_size,
    a.seq_len, a.device,
    a.status AS a_status, b.status AS b_status,
    a.speedup AS a_speedup, b.speedup AS b_speedup,
    a.gpu_speedup AS a_gpu_speedup, b.gpu_speedup AS b_gpu_speedup,
    {_disturbance("a")} AS a_disturbance, {_disturbance("b")} AS b_disturbance,
    {one_autocast_region("a")} AS a_one_region, {one_autocast_region("b")} AS b_one_region,
    coalesce(a.eager_ms_p25 / nullif(a.compiled_ms_p75, 0), a.speedup) AS a_speedup_low,
    coalesce(a.eager_ms_p75 / nullif(a.compiled_ms_p25, 0), a.speedup) AS a_speedup_high,
    coalesce(b.eager_ms_p25 / nullif(b.compiled_ms_p75, 0), b.speedup) AS b_speedup_low,
    coalesce(b.eager_ms_p75 / nullif(b.compiled_ms_p25, 0), b.speedup) AS b_speedup_high,
    a.error_type AS a_error_type, b.error_type AS b_error_type,
    a.run_id AS a_run_id, b.run_id AS b_run_id, a.env_id AS a_env_id, b.env_id AS b_env_id,
    a.result_id AS a_result_id, b.result_id AS b_result_id
FROM a JOIN b ON {_COMPARE_MATCH}
ORDER BY a.model_id, a.backend, a.mode, a.dynamic, a.precision, a.step, a.batch_size,
    a.seq_len, a.device, a.size
"""

# Cells on one side only: they are not compared, but a reader should know they exist.
COMPARE_UNMATCHED = f"""
WITH a AS ({_COMPARE_SIDE}), b AS ({_COMPARE_SIDE})
SELECT
    count(*) FILTER (WHERE b.result_id IS NULL) AS only_a,
    count(*) FILTER (WHERE a.result_id IS NULL) AS only_b
FROM a FULL OUTER JOIN b ON {_COMPARE_MATCH}
"""

COMPARE_RUNS = """
SELECT r.run_id, r.label, r.started_at, r.status, count(c.result_id) AS cells
FROM runs r LEFT JOIN results c USING (run_id)
GROUP BY ALL
ORDER BY r.started_at DESC, r.run_id
"""

COMPARE_LABELS = """
SELECT label, list(run_id ORDER BY started_at, run_id) AS run_ids, max(started_at) AS last
FROM runs
WHERE label IS NOT NULL
GROUP BY label
ORDER BY last DESC, label
"""

COMPARE_ENVIRONMENTS = """
SELECT c.env_id, any_value(e.torch) AS torch, any_value(e.gpu) AS gpu, count(*) AS cells
FROM results c LEFT JOIN environments e USING (env_id)
GROUP BY c.env_id
ORDER BY c.env_id
"""

# Graph-break types across the filtered cells (their newest rows), most models first: a
# type is the first line of dynamo's message with its id in torch's graph-break registry;
# rows recorded before types were kept fall back to their one-line reason.
BREAK_TYPES = f"""
WITH {CHOSEN}
SELECT
    coalesce(g.break_type, g.reason) AS break_type,
    coalesce(g.registry_id, 'unregistered') AS registry_id,
    count(DISTINCT c.model_id) AS models,
    sum(g.count) AS breaks,
    count(DISTINCT c.result_id) AS cells,
    any_value(g.reason) AS reason,
    any_value(g.hints) AS hints,
    coalesce(list(DISTINCT g.user_frame) FILTER (WHERE g.user_frame IS NOT NULL), [])
        AS frames,
    list(DISTINCT c.model_id ORDER BY c.model_id) AS model_ids
FROM chosen c JOIN graph_breaks g USING (result_id)
GROUP BY 1, 2
ORDER BY models DESC, breaks DESC, break_type
"""

# -- Leaderboard: the filtered cells ranked, one quick view a statement --

# What each quick view keeps and how it ranks; the names are the page's options (a closed
# set of our own text, never a value from the URL: that picks one of these keys).
_LEADERBOARD_VIEWS = {
    "all cells": ("TRUE", "model_id, config"),
    "slower than eager": ("status = 'pass' AND speedup < 1", "speedup, model_id, config"),
    "largest speedups": ("status = 'pass' AND speedup > 0", "speedup DESC, model_id, config"),
    "most memory saved": (
        "status = 'pass' AND memory_ratio > 0 AND memory_ratio < 1",
        "memory_ratio, model_id, config",
    ),
    "most graph breaks": (
        "graph_break_count > 0",
        "graph_break_count DESC, model_id, config",
    ),
    "longest compiles": ("compile_s IS NOT NULL", "compile_s DESC, model_id, config"),
}
LEADERBOARD_VIEWS = tuple(_LEADERBOARD_VIEWS)
_LEADERBOARD_COLUMNS = """
    model_id, row_id, config, status, speedup, gpu_speedup, compile_s, eager_ms, compiled_ms,
    eager_peak_alloc_mb, compiled_peak_alloc_mb, memory_ratio, graph_break_count, timing,
    timing_disturbance, bound, caveats, backend, device, size
"""
# The first $limit rows of each view, and how many it holds in all.
LEADERBOARD = {
    name: f"""
    WITH {CHOSEN}
    SELECT {_LEADERBOARD_COLUMNS}, count(*) OVER () AS matching
    FROM chosen
    WHERE {where}
    ORDER BY {order}
    LIMIT $limit
    """
    for name, (where, order) in _LEADERBOARD_VIEWS.items()
}

# -- Config vs config: two matrix columns ($a, $b) model by model --

CONFIG_PAIR = f"""
WITH {CHOSEN},
a AS (SELECT * FROM chosen WHERE config = $a),
b AS (SELECT * FROM chosen WHERE config = $b)
SELECT
    coalesce(a.row_id, b.row_id) AS model_id,
    coalesce(a.family, b.family) AS family,
    a.status AS a_status, b.status AS b_status,
    a.speedup AS a_speedup, b.speedup AS b_speedup,
    a.compile_s AS a_compile_s, b.compile_s AS b_compile_s,
    a.memory_ratio AS a_memory_ratio, b.memory_ratio AS b_memory_ratio,
    a.timing AS a_timing, b.timing AS b_timing, a.bound AS a_bound, b.bound AS b_bound,
    a.one_region AS a_one_region, b.one_region AS b_one_region
FROM a FULL OUTER JOIN b USING (row_id)
ORDER BY 1
"""
