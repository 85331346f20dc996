"""Corrupt and partial parquet shards: each costs only its own rows, is named, and a
gate that compared nothing fails (dashboard.data.load, zoo-compare, zoo-merge)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from dashboard import compare
from dashboard.data import load
from runner.cli import merge as merge_cli
from runner.store.db import Store
from tests.dashboard_data import shown

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "data" / "runs"
APP = REPO / "dashboard" / "app.py"
# One shipped run (hf-full-inductor, 57 cells): its shards are what the copies break.
RUN = "f0dc591f-b695-4c70-8fd2-a741b4556ce2"
LABEL = "hf-full-inductor"


def truncated(path: Path) -> None:
    """Half of the file, as a copy cut short leaves it (truncate -s 50%)."""
    size = path.stat().st_size
    with path.open("r+b") as file:
        file.truncate(size // 2)


def scrambled(path: Path) -> None:
    """Its footer intact, a quarter of its data pages garbage: it describes, but does
    not read."""
    data = bytearray(path.read_bytes())
    for index in range(len(data) // 4, len(data) // 2):
        data[index] = (data[index] * 7 + 13) % 256
    path.write_bytes(bytes(data))


def foreign(path: Path) -> None:
    """A readable parquet file of something else under the shard's name."""
    with duckdb.connect() as con:
        con.execute(f"COPY (SELECT 1 AS x) TO '{path}' (FORMAT parquet)")


@pytest.fixture(scope="module")
def shipped_counts() -> dict[str, int]:
    con, sources = load(SHIPPED, None)
    assert sources.problems == []
    return {
        table: con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        for table in ("runs", "results", "graph_breaks", "environments")
    }


@pytest.fixture
def runs(tmp_path) -> Path:
    copy = tmp_path / "runs"
    shutil.copytree(SHIPPED, copy)
    return copy


def add_broken_run(runs: Path, name: str, breaks) -> Path:
    """A run folder ``name``: the shards of RUN, its results shard broken by ``breaks``."""
    folder = runs / name
    shutil.copytree(runs / RUN, folder)
    breaks(folder / "results.parquet")
    return folder / "results.parquet"


@pytest.mark.parametrize("breaks", [truncated, scrambled, foreign, lambda p: p.write_bytes(b"")])
def test_a_bad_shard_costs_only_its_own_rows_and_is_named(runs, shipped_counts, breaks):
    bad = add_broken_run(runs, "zz-broken", breaks)
    con, sources = load(runs, None)
    counts = {
        table: con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        for table in shipped_counts
    }
    # Every shipped row is there; the broken folder's other shards are readable, and
    # its run row is the shipped run's again (the same run id: kept once).
    assert counts == shipped_counts
    (problem,) = sources.problems
    assert str(bad) in problem and "skipped" in problem and "zoo-export" in problem
    assert "LINE 1" not in problem and "^" not in problem  # no SQL of ours


def test_two_bad_shards_of_two_tables_are_both_named(runs, shipped_counts):
    truncated(runs / RUN / "results.parquet")
    truncated(runs / RUN / "graph_breaks.parquet")
    con, sources = load(runs, None)
    assert len(sources.problems) == 2
    assert any("results.parquet" in p for p in sources.problems)
    assert any("graph_breaks.parquet" in p for p in sources.problems)
    (results,) = con.execute("SELECT count(*) FROM results").fetchone()
    assert results == shipped_counts["results"] - 57  # RUN's 57 cells, and only those


def test_the_dashboard_shows_the_rest_and_names_the_bad_shard(runs, tmp_path, monkeypatch):
    bad = add_broken_run(runs, "zz-broken", truncated)
    monkeypatch.setenv("ZOO_RUNS_DIR", str(runs))
    monkeypatch.setenv("ZOO_DB", str(tmp_path / "none.duckdb"))
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not at.exception
    # The one warning of the sources (the header may warn of the data too).
    (warning,) = [shown(w.value) for w in at.warning if "skipped" in shown(w.value)]
    assert f"{bad} skipped, its rows are not shown" in warning
    assert any("cells (" in h.proto.body for h in at.get("html"))  # the header: data shown


def run_compare(capsys, runs: Path, *args: str) -> tuple[int, str, str]:
    empty = Store.open(runs.parent / "empty.duckdb").path
    code = compare.main([*args, "--runs-dir", str(runs), "--db", str(empty)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_zoo_compare_compares_the_rest_and_a_gate_over_nothing_fails(runs, capsys):
    code, out, _ = run_compare(capsys, runs, "h200-foundation", "h200-foundation")
    assert code == 0 and "27 cell(s) compared" in out
    bad = runs / RUN / "results.parquet"
    truncated(bad)
    code, out, err = run_compare(
        capsys, runs, "h200-foundation", "h200-foundation", "--fail-on-regression"
    )
    assert code == 0 and "27 cell(s) compared" in out
    assert f"warning: {bad} skipped" in err
    # The broken run's cells are gone, so comparing its label compares nothing: the
    # gate must fail, not pass over an empty comparison.
    code, out, err = run_compare(capsys, runs, LABEL, LABEL, "--fail-on-regression")
    assert code == 1, out
    assert "0 cell(s) compared" in out and "nothing was compared" in err
    code, _, err = run_compare(capsys, runs, LABEL, LABEL)
    assert code == 0 and "warning: no cell is on both sides" in err


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("missing", ["environments", "runs", "graph_breaks", "results"])
def test_zoo_merge_refuses_a_run_folder_missing_a_table(runs, tmp_path, capsys, missing):
    (runs / RUN / f"{missing}.parquet").unlink()
    target = tmp_path / "merged.duckdb"
    for source in (runs, runs / RUN):  # the folder of runs, and the run folder alone
        assert merge_cli.main([str(source), "--into", str(target)]) == 2
        err = capsys.readouterr().err
        assert f"{runs / RUN} lacks {missing}.parquet" in err and "Nothing was merged" in err
    assert not target.exists()


def test_zoo_merge_names_a_corrupt_shard_without_sql_and_leaves_the_target(runs, tmp_path, capsys):
    target = Store.open(tmp_path / "merged.duckdb").path
    before = digest(target)
    truncated(runs / RUN / "results.parquet")
    assert merge_cli.main([str(runs), "--into", str(target)]) == 2
    err = capsys.readouterr().err
    assert str(runs / RUN / "results.parquet") in err and "nothing was merged" in err
    assert "LINE 1" not in err and "^^^" not in err
    assert digest(target) == before
