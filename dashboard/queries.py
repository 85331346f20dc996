"""Every SQL statement of the dashboard, parameterized."""

# -- compare (zoo-compare and the Compare page) --

# A side of a comparison is a set of run ids or of environment ids; each query below
# takes, per side, the run ids then the environment ids (one of the two lists empty).
_COMPARE_SIDE = """
    SELECT * FROM results
    WHERE run_id IN (SELECT unnest(?::VARCHAR[])) OR env_id IN (SELECT unnest(?::VARCHAR[]))
    QUALIFY row_number() OVER (
        PARTITION BY model_id, size, backend, mode, dynamic, precision, step, batch_size,
            seq_len, device
        ORDER BY recorded_at DESC, result_id
    ) = 1
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
