"""Environment ids per process kind, the re-keying of rows written before them (schema
version 3, also on merge), and the out-of-memory retry at a smaller batch."""

from __future__ import annotations

import duckdb
import pytest

from runner import env as environment
from runner.cli.run import main as zoo_run
from runner.matrix.cells import KEY_FIELDS, Cell, CellConfig, cell_key
from runner.matrix.fingerprint import TORCH_PROCESS, XLA_PROCESS, XLA_STACK, environment_id
from runner.plan import PlanOptions, plan_cells, smaller_batch
from runner.store import merge
from runner.store.db import Store
from runner.store.schema import MIGRATIONS, apply_step
from tests.results import make_result, rows
from tests.test_run import TOY
from zoo.catalog import select

VERSIONS = {
    "python": "3.12.3",
    "torch": "2.11.0+cu130",
    "triton": "3.6.0",
    "cuda": "13.0",
    "gpu": "NVIDIA H200",
    "timm": "1.0.29",
    "transformers": "5.17.0",
    "jax": "0.11.2",
    "jaxlib": "0.11.2",
    "torchax": "0.0.13",
    "torch_xla": "absent",
}


def test_installing_torchax_keys_only_xla_cells_anew():
    without = {**VERSIONS, "torchax": "absent", "jax": "absent", "jaxlib": "absent"}
    assert environment_id(VERSIONS, TORCH_PROCESS) == environment_id(without, TORCH_PROCESS)
    assert environment_id(VERSIONS, XLA_PROCESS) != environment_id(without, XLA_PROCESS)
    # A torch upgrade keys both.
    newer = {**VERSIONS, "torch": "2.12.0"}
    for kind in (TORCH_PROCESS, XLA_PROCESS):
        assert environment_id(newer, kind) != environment_id(VERSIONS, kind)


def test_plan_gives_each_process_kind_its_own_environment_id():
    options = PlanOptions(
        backends=("eager", "xla"),
        modes=("default",),
        dynamic=("false",),
        precisions=("fp32",),
        steps=("infer",),
        device="cpu",
    )
    ids = environment.fingerprints(VERSIONS)
    cells = plan_cells(select(["test_resnet"]), options, ids).cells
    assert {cell.config.backend: cell.env_id for cell in cells} == {
        "eager": ids[TORCH_PROCESS],
        "xla": ids[XLA_PROCESS],
    }


def _old_env_id() -> str:
    """The id every cell had at schema version 2: all the versions, XLA's list."""
    assert environment_id(VERSIONS, XLA_PROCESS) == environment_id(
        dict(zip(XLA_STACK, (VERSIONS[n] for n in XLA_STACK), strict=True)), XLA_PROCESS
    )
    return environment_id(VERSIONS, XLA_PROCESS)


def _version_2_database(path) -> dict[str, str]:
    """A database at schema version 2 with a torch.compile cell and an XLA cell of one
    environment (the old id), a graph break and a run; their old keys by backend."""
    old = _old_env_id()
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMP)")
    for version, steps in MIGRATIONS[:2]:
        for step in steps:
            apply_step(con, step)
        con.execute("INSERT INTO schema_version VALUES (?, NULL)", [version])
    columns = ", ".join(["env_id", *VERSIONS, "schema_version"])
    marks = ", ".join("?" for _ in range(len(VERSIONS) + 2))
    con.execute(
        f"INSERT INTO environments ({columns}) VALUES ({marks})", [old, *VERSIONS.values(), 2]
    )
    con.execute(
        "INSERT INTO runs (run_id, command, status, env_id, schema_version) "
        "VALUES ('run-1', 'zoo-run --models resnet50', 'finished', ?, 2)",
        [old],
    )
    keys = {}
    for number, backend in enumerate(("inductor", "xla")):
        fields = {
            "model_id": "timm/resnet50",
            "size": "full",
            "backend": backend,
            "mode": "default" if backend == "inductor" else "none",
            "dynamic": "false",
            "precision": "bf16",
            "step": "infer",
            "batch_size": 64,
            "seq_len": None,
            "device": "cuda",
            "env_id": old,
        }
        keys[backend] = cell_key(fields)
        names = ", ".join(
            [
                "result_id",
                "run_id",
                "cell_key",
                *KEY_FIELDS,
                "status",
                "recorded_at",
                "schema_version",
            ]
        )
        values = [f"r{number}", "run-1", keys[backend], *fields.values(), "pass"]
        con.execute(
            f"INSERT INTO results ({names}) VALUES ({', '.join('?' for _ in values)}, now(), 2)",
            values,
        )
    con.execute(
        "INSERT INTO graph_breaks VALUES ('r0', 'run-1', ?, 0, 'a reason', NULL, 1, 2)",
        [keys["inductor"]],
    )
    con.close()
    return keys


def _check_rekeyed(db, old_keys: dict[str, str]) -> None:
    ids = environment.fingerprints(VERSIONS)
    results = {r["backend"]: r for r in rows(db)}
    torch_cell, xla_cell = results["inductor"], results["xla"]
    assert torch_cell["env_id"] == ids[TORCH_PROCESS]
    fields = {name: torch_cell[name] for name in KEY_FIELDS}
    assert torch_cell["cell_key"] == cell_key(fields) != old_keys["inductor"]
    # XLA cells keep their id and key: their fingerprint is the old list.
    assert xla_cell["env_id"] == ids[XLA_PROCESS] == _old_env_id()
    assert xla_cell["cell_key"] == old_keys["xla"]
    (brk,) = rows(db, "SELECT * FROM graph_breaks")
    assert brk["cell_key"] == torch_cell["cell_key"]
    (run,) = rows(db, "SELECT * FROM runs")
    assert run["env_id"] == ids[TORCH_PROCESS]
    envs = {e["env_id"]: e for e in rows(db, "SELECT * FROM environments")}
    assert {e["fingerprint"] for e in envs.values()} == {"torch", "xla"}
    assert envs[ids[TORCH_PROCESS]]["torch"] == "2.11.0+cu130"


def test_opening_a_version_2_database_rekeys_its_torch_compile_cells(tmp_path):
    db = tmp_path / "old.duckdb"
    keys = _version_2_database(db)
    Store.open(db)
    _check_rekeyed(db, keys)
    Store.open(db)  # nothing left to migrate: the same rows
    _check_rekeyed(db, keys)


def test_merging_a_version_2_source_rekeys_its_rows(tmp_path):
    source = tmp_path / "old.duckdb"
    keys = _version_2_database(source)
    # Read as it is (a raw copy of an old file), not opened by this version's store.
    target = tmp_path / "merged.duckdb"
    merge.merge([source], target)
    _check_rekeyed(target, keys)
    merge.merge([source], target)  # again: nothing added, nothing moved
    _check_rekeyed(target, keys)
    assert len(rows(target)) == 2


def test_a_smaller_batch_follows_only_an_out_of_memory_result():
    spec = select(["test_resnet"])[0]
    base = Cell(
        spec, CellConfig("inductor", "default", "false", "bf16"), "full", 64, None, "cuda", "env"
    )
    retried = smaller_batch(base, make_result(status="oom"))
    assert retried is not None and retried.run_batch_size == 32
    assert retried.key == base.key  # the key keeps the batch asked for
    assert smaller_batch(retried.with_run_batch(1), make_result(status="oom")) is None
    assert smaller_batch(base, make_result(status="compile_error")) is None
    unbatched = Cell(spec, base.config, "full", None, None, "cuda", "env")
    assert smaller_batch(unbatched, make_result(status="oom")) is None
    # Out of memory building the model: no input yet, so no batch to blame.
    assert smaller_batch(base, make_result(status="oom", error_phase="build")) is None
    assert smaller_batch(base, make_result(status="oom", error_phase="inputs")) is not None


def test_out_of_memory_beside_other_processes_is_retried_at_the_same_batch_first():
    """A parallel sweep's neighbour that held the device's memory is no property of the
    model: twice at the same batch, then halving as for any out-of-memory cell."""
    spec = select(["test_resnet"])[0]
    cell = Cell(
        spec, CellConfig("inductor", "default", "false", "bf16"), "full", 16, None, "cuda", "env"
    )
    crowded = make_result(
        status="oom",
        notes="out of memory beside other processes: they held 108.1 of the device's 139.8 "
        "GiB, this process 8.3 GiB",
    )
    first = smaller_batch(cell, crowded)
    assert first is not None and (first.run_batch_size, first.crowded_retries) == (16, 1)
    second = smaller_batch(first, crowded)
    assert second is not None and (second.run_batch_size, second.crowded_retries) == (16, 2)
    third = smaller_batch(second, crowded)
    assert third is not None and third.run_batch_size == 8
    assert third.key == cell.key
    # At batch 1 a crowded cell still gets its retries at the same batch.
    assert smaller_batch(cell.with_run_batch(1), crowded).run_batch_size == 1


@pytest.mark.slow
def test_a_cell_out_of_memory_is_retried_at_half_the_batch_until_it_fits(tmp_path):
    db = tmp_path / "zoo.duckdb"
    args = ["--module", f"{TOY}:OutOfMemoryAbove2", "--backends", "eager", "--device", "cpu"]
    assert zoo_run([*args, "--batch-size", "8", "--db", str(db)]) == 0
    (row,) = rows(db)
    assert row["status"] == "pass", row["error_message"]
    assert (row["batch_size"], row["batch_size_run"]) == (8, 2)
    assert row["input_shapes"] == "[[2, 16]]"
    assert "an attempt at batch 8 ended oom" in row["notes"]
    assert "an attempt at batch 4 ended oom" in row["notes"]
    # The key is the requested batch's: the same command finds it recorded.
    assert zoo_run([*args, "--batch-size", "8", "--db", str(db)]) == 0
    assert len(rows(db)) == 1
