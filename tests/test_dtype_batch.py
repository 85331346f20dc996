"""benchmarks/dtype_batch.py: one model across batch sizes, run for real by zoo-run on
this CPU (eager, fp32: fp16 is measured on CUDA only), and its table read back against
the database it wrote."""

from __future__ import annotations

import re

import duckdb
import pytest

from tests.scripts import run_benchmark


def _run(*args: str, timeout: float = 300):
    return run_benchmark("dtype_batch.py", *args, timeout=timeout)


def test_the_table_gives_each_batch_s_rate_from_the_recorded_timings(tmp_path):
    db = tmp_path / "probe.duckdb"
    done = _run(
        "--db", str(db), "--models", "test_efficientnet", "--backend", "eager",
        "--precisions", "fp32", "--batches", "1,3", "--workers", "1",
        "--seconds", "240", "--", "--device", "cpu",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    with duckdb.connect(str(db), read_only=True) as con:
        recorded = dict(
            con.execute(
                "SELECT batch_size, eager_ms FROM results r JOIN runs u USING (run_id) "
                "WHERE u.label = 'dtype-batch' AND r.status = 'pass'"
            ).fetchall()
        )
    assert sorted(recorded) == [1, 3]
    table = {}
    for line in done.stdout.splitlines():
        match = re.match(r"test_efficientnet\s+fp32\s+(\d+)\s+pass\s+(\d+)\s", line)
        if match:
            table[int(match[1])] = int(match[2])
    assert table == {b: round(b * 1000 / ms) for b, ms in recorded.items()}
    ratio = (3 * 1000 / recorded[3]) / (1 * 1000 / recorded[1])
    assert f"test_efficientnet      3/1 in fp32: {ratio:.2f}" in done.stdout
    # Printed again from the database alone, the same table.
    again = _run("--db", str(db), "--report")
    assert again.returncode == 0
    assert again.stdout.strip() in done.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--seconds", "0"], "--seconds: must be a finite number, positive; got 0"),
        (["--seconds", "nan"], "--seconds: must be a finite number, positive; got nan"),
        (["--workers", "0"], "--workers: must be a finite number, positive; got 0"),
        (["--batches", "64,x"], "--batches: 'x' is not a number"),
        (["--batches", "0"], "--batches: must be a finite number, positive; got 0"),
        (["--batches", ","], "--batches: ',': give batch sizes, e.g. 64,256"),
    ],
)
def test_bad_numbers_exit_2_naming_them(args, message):
    done = _run(*args, timeout=60)
    assert done.returncode == 2 and message in done.stderr


def test_a_report_without_a_database_exits_2(tmp_path):
    done = _run("--db", str(tmp_path / "none.duckdb"), "--report", timeout=60)
    assert done.returncode == 2 and "no database at" in done.stderr
    assert not (tmp_path / "none.duckdb").exists()
