"""benchmarks/throughput.py's report: rates, and which runs it compares with which."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.schedule.usage import Usage
from tests.results import rows
from tests.scripts import run_benchmark


def _benchmark(*args: str) -> str:
    """benchmarks/throughput.py's output."""
    return run_benchmark("throughput.py", *args, check=True).stdout


def _phase(out: Path, file: str, speedups: dict[str, float], elapsed_s: float, **fields) -> None:
    """A phase record as the benchmark writes it; cell i's fastest samples read 1.1x
    faster than its medians on the eager side."""
    cells = [
        {
            "key": key,
            "model": f"timm/{key}",
            "mode": "default",
            "status": "pass",
            "speedup": speedup,
            "eager_ms": 10.0 * speedup,
            "compiled_ms": 10.0,
            "eager_fastest_ms": 10.0 * speedup / 1.1,
            "compiled_fastest_ms": 10.0,
            "disturbance": 1.1,
        }
        for key, speedup in speedups.items()
    ]
    record = {"phase": Path(file).stem, "workers": 1, "elapsed_s": elapsed_s, "cells": cells}
    (out / file).write_text(json.dumps({**record, **fields}))


def test_report_compares_every_run_with_serial_and_multi_gpu_runs_with_one_gpu(tmp_path):
    serial = {"a": 1.0, "b": 2.0, "c": 1.5}
    _phase(tmp_path, "serial.json", serial, elapsed_s=36.0)
    _phase(tmp_path, "serial-again.json", {"a": 1.02}, elapsed_s=12.0)
    one_gpu = {**serial, "d": 3.0}
    used = Usage(12.0, 8, 40, 16, 0.93, 0.0, {"GPU-0123456789ab": {"timing": 5.0, "tuning": 1.0}})
    _phase(
        tmp_path,
        "parallel-all-cells.json",
        one_gpu,
        12.0,
        workers=8,
        gpus=1,
        gpu_slots=1,
        usage=used.to_dict(),
    )
    # Quiet timing changes the timing on purpose: never the one-GPU baseline, though it
    # is a one-GPU run with the most cells.
    quiet = {**one_gpu, "e": 1.0}
    _phase(tmp_path, "parallel-quiet-timing-all-cells.json", quiet, 10.0, workers=8, gpu_slots=1)
    two = {"a": 1.1, "b": 2.0, "c": 1.5, "d": 6.0}  # +10%, 0, 0, +100% against one GPU
    _phase(tmp_path, "parallel-2gpus-all-cells.json", two, 4.0, workers=16, gpus=2, gpu_slots=2)

    report = _benchmark("--phase", "report", "--out", str(tmp_path))
    assert (
        "parallel-all-cells: 4.00x the serial cells/hour" in report
    )  # 4 cells in 12 s vs 3 in 36 s
    assert "parallel-2gpus-all-cells: 12.00x the serial cells/hour" in report
    assert "serial-again: the serial phase again" in report
    assert (
        "parallel-all-cells: 16 cores 93% busy · lock of GPU-01234567 held 50% (timing 42%, "
        "tuning 8%) · CPU-bound"
    ) in report
    assert "speedup median relative difference 2.0%, largest 2.0% (timm/a default)" in report
    # 2 GPUs against the plain one-GPU run, over the 4 cells both ran: median of
    # 0, 0, 10%, 100% is 5%.
    assert (
        "against one-GPU parallel, over 4 cells: speedup median relative difference 5.0%, "
        "largest 100.0% (timm/d default)"
    ) in report
    assert report.count("against one-GPU parallel") == 3  # speedup, fastest, statuses
    # A per-cell table of the serial cells across every phase.
    assert "per serial cell" in report and "timm/a" not in report.split("per serial cell")[1]
    table = report.split("per serial cell")[1]
    assert "a default" in table and "1.10 (11.00/10.00)" in table


def test_phases_run_real_cells_and_record_them_as_runs(tmp_path):
    """Both phases on CPU (two tiny timm models, the eager backend), then the report; with
    --db each phase is also a run in a zoo-matrix database."""
    common = ["--out", str(tmp_path), "--models", "test_resnet,test_vit", "--backends", "eager"]
    common += ["--db", str(tmp_path / "zoo.duckdb")]

    assert "serial: 2 cells in" in _benchmark("--phase", "serial", "--limit-s", "300", *common)
    out = _benchmark("--phase", "parallel", "--workers", "2", *common)
    assert "parallel: 2 cells in" in out and "cores" in out and "lock of the host held" in out
    record = json.loads((tmp_path / "parallel.json").read_text())
    assert record["usage"]["workers"] == 2 and record["usage"]["lock_held_s"]["cpu"]["timing"] > 0
    assert all(cell["eager_fastest_ms"] <= cell["eager_ms"] for cell in record["cells"])
    # Where each cell's worker time went, step by step: after its worker started, about
    # the wall time the worker measured.
    for cell in record["cells"]:
        steps = cell["phase_s"]
        assert {"build", "compile", "timing"} <= set(steps) and steps["timing"] > 0
        measured = sum(steps.values()) - steps.get("starting", 0.0)
        assert abs(measured - cell["wall_s"]) < 0.5 + 0.1 * cell["wall_s"]
    ends = [cell["finished_s"] for cell in record["cells"]]
    assert 0 < ends[0] <= ends[1] <= record["elapsed_s"]  # in the order they finished
    serial_steps = json.loads((tmp_path / "serial.json").read_text())["cells"][0]["phase_s"]
    assert serial_steps["starting"] > 1.0  # a fresh process imports torch for every cell

    report = _benchmark("--phase", "report", "--out", str(tmp_path))
    assert "parallel: " in report and "x the serial cells/hour" in report
    assert "against serial: status differences: 0" in report
    table = report.split("worker seconds per cell in each step")[1].split("\n\n")[0]
    header, *steps = table.splitlines()[1:]
    assert header.split() == ["step", "serial", "parallel"]
    assert steps[0].startswith("starting") and steps[-1].startswith("all") and len(steps) > 4
    # The lock's seconds per cell, and the rate they allow with the lock always busy.
    locks = report.split("GPU lock seconds per cell")[1].split("\n\n")[0].splitlines()[2:]
    rows_by_hold = {line.split()[0]: [float(x) for x in line.split()[-2:]] for line in locks}
    assert rows_by_hold["timing"][1] > 0.5 and rows_by_hold["untimed"][1] > 0  # CPU plan: 1 s
    per_cell = sum(rows_by_hold[kind][1] for kind in ("timing", "tuning", "untimed"))
    assert rows_by_hold["all"][1] == pytest.approx(per_cell, abs=0.02)
    assert rows_by_hold["cells/hour"][1] == pytest.approx(3600 / per_cell, rel=0.01)

    # Every hold the workers made, from the phase's start: the lock's timeline.
    holds = [line.split() for line in (tmp_path / "parallel.holds.log").read_text().splitlines()]
    assert {kind for _, _, kind, _, _ in holds} >= {"timing", "untimed"}
    assert {(worker, lock) for worker, lock, *_ in holds} <= {
        ("worker-1", "cpu"),
        ("worker-2", "cpu"),
    }
    assert all(0 <= float(start) <= float(end) <= record["elapsed_s"] for *_, start, end in holds)
    assert "GPU lock held, share of each 30 s" in report

    # The same cells in a 0.1 s timing window: a phase of its own, in the report.
    _benchmark("--phase", "parallel", "--workers", "2", "--timing-s", "0.1", *common)
    short = json.loads((tmp_path / "parallel-timing-s0.1.json").read_text())
    assert len(short["cells"]) == 2
    assert "parallel-timing-s0.1: " in _benchmark("--phase", "report", "--out", str(tmp_path))

    runs = rows(tmp_path / "zoo.duckdb", "SELECT * FROM runs ORDER BY label")
    assert [(r["label"], r["status"], r["cells_recorded"]) for r in runs] == [
        ("throughput-parallel", "finished", 2),
        ("throughput-parallel-timing-s0.1", "finished", 2),
        ("throughput-serial", "finished", 2),
    ]
    results = rows(tmp_path / "zoo.duckdb")
    assert len(results) == 6 and {r["status"] for r in results} == {"pass"}
    # Only the short window's rows say how they were timed, and they took at least the
    # CPU's minimum of 5 pairs and at most its cap at a tenth of the 1 s window (20).
    said = [r for r in results if "--timing-s" in (r["notes"] or "")]
    assert {r["run_id"] for r in said} == {
        r["run_id"] for r in runs if r["label"] == "throughput-parallel-timing-s0.1"
    }
    assert len(said) == 2
    assert all(5 <= len(r["eager_samples_ms"]) <= 20 for r in said)


def test_a_run_is_also_compared_with_the_serial_run_on_its_own_gpu(tmp_path):
    """Calls of one session may land on different hosts, whose serial rates differ."""
    _phase(tmp_path, "serial.json", {"a": 1.0, "b": 2.0}, 36.0, gpu_uuids=["GPU-host1"])
    _phase(tmp_path, "serial-host2.json", {"a": 1.2, "b": 2.0}, 72.0, gpu_uuids=["GPU-host2"])
    on_host2 = {"a": 1.2, "b": 2.2, "c": 1.0}
    _phase(tmp_path, "parallel-all-cells.json", on_host2, 6.0, workers=8, gpu_uuids=["GPU-host2"])
    report = _benchmark("--phase", "report", "--out", str(tmp_path))
    assert "parallel-all-cells: 9.00x the serial cells/hour" in report  # 3 in 6 s vs 2 in 36 s
    assert "parallel-all-cells: 18.00x the cells/hour of serial-host2 (its GPU)" in report
    assert (
        "against serial-host2, over 2 cells: speedup median relative difference 5.0%, "
        "largest 10.0% (timm/b default)"
    ) in report


def test_the_steady_rate_leaves_out_the_start_and_the_tail(tmp_path):
    """With W workers, the rate between the W-th cell's end and the W-th last one's."""
    _phase(tmp_path, "serial.json", {"a": 1.0}, 36.0)  # 100 cells/hour
    ends = [10.0, 20.0, 22.0, 24.0, 26.0, 28.0, 60.0]
    _phase(tmp_path, "parallel.json", {k: 1.0 for k in "abcdefg"}, 60.0, workers=2)
    record = json.loads((tmp_path / "parallel.json").read_text())
    for cell, end in zip(record["cells"], ends, strict=True):
        cell["finished_s"] = end
    (tmp_path / "parallel.json").write_text(json.dumps(record))
    report = _benchmark("--phase", "report", "--out", str(tmp_path))
    row = next(line for line in report.splitlines() if line.startswith("parallel "))
    # 7 cells in 60 s: 420/hour; steady: 3 cells (ends 22, 24, 26) between 20 and 26 s.
    assert row.split()[-2:] == ["420", "1800"]
    assert "parallel: 4.20x the serial cells/hour" in report
    assert "parallel: with the pipeline full, 18.00x" in report
    serial_row = next(line for line in report.splitlines() if line.startswith("serial "))
    assert serial_row.split()[-1] == "-"  # one worker: nothing to fill


def test_the_lock_timeline_sums_the_holds_per_window(tmp_path):
    """Overlapping shared holds count once; a window without holds reads 0%; with two
    GPUs, the mean of their locks' shares."""
    _phase(tmp_path, "serial.json", {"a": 1.0}, 36.0)
    _phase(tmp_path, "parallel.json", {"a": 1.0}, 90.0, workers=2)
    holds = [
        "worker-1 GPU-a untimed 0.000 15.000",
        "worker-2 GPU-a untimed 5.000 15.000",  # beside worker-1's: 15 s of 30 held
        "worker-1 GPU-a timing 30.000 60.000",  # all of the second window
        "worker-2 GPU-a tuning 75.000 81.000",  # 6 s of the third
    ]
    (tmp_path / "parallel.holds.log").write_text("\n".join(holds) + "\n")
    other_gpu = ["worker-3 GPU-b timing 0.000 30.000", "worker-3 GPU-b timing 70.000 73.000"]
    (tmp_path / "parallel-2gpus.holds.log").write_text("\n".join(holds + other_gpu) + "\n")
    report = _benchmark("--phase", "report", "--out", str(tmp_path))
    lines = report.split("GPU lock held, share of each 30 s")[1].splitlines()[1:3]
    assert [line.split() for line in lines] == [
        ["parallel-2gpus", "75%", "50%", "15%"],  # GPU-b: 100%, 0%, 10%
        ["parallel", "50%", "100%", "20%"],
    ]


def test_serial_records_of_other_cells_on_the_same_gpu_join_the_serial_phase(tmp_path):
    """One call reaches ~10 serial cells: a second (``--tag b`` with other models) adds
    cells. A repeat of the same cells, or a record from another host, does not join."""
    host = {"gpu_uuids": ["GPU-1"]}
    _phase(tmp_path, "serial.json", {"a": 1.0, "b": 2.0}, 72.0, **host)  # 100 cells/hour
    _phase(tmp_path, "serial-b.json", {"c": 1.0}, 36.0, **host)
    _phase(tmp_path, "serial-again.json", {"a": 1.1}, 36.0, **host)
    _phase(tmp_path, "serial-other.json", {"d": 1.0}, 1.0, gpu_uuids=["GPU-2"])
    speedups = {"a": 1.0, "b": 2.0, "c": 1.5, "d": 1.0}
    _phase(tmp_path, "parallel.json", speedups, 10.8, workers=8, **host)  # 4 in 10.8 s
    report = _benchmark("--phase", "report", "--out", str(tmp_path))
    # 3 cells in 108 s: 100/hour; the parallel phase's 1333/hour is 13.33x that.
    assert "parallel: 13.33x the cells/hour of serial+serial-b (3 cells)" in report
    assert (
        "against serial+serial-b, over 3 cells: speedup median relative difference 0.0%, "
        "largest 50.0% (timm/c default)"
    ) in report
    assert "serial-again: the serial phase again" in report
    assert "serial-b: the serial phase again" not in report
