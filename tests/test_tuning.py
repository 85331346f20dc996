"""A model's two max-autotune cells of a run tune once (runner.measure.tuning): which
cells are partners, the feed that puts them one after the other, the wait for a
partner under way, and a real Inductor compile that skips its tuning."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from runner.cell import measure_cell
from runner.cli.run import main
from runner.matrix import columns
from runner.matrix.cells import CellConfig
from runner.measure import tuning
from runner.measure.host import SCRATCH_DIR_ENV
from runner.plan import PlanOptions, first_in_columns, plan_cells
from runner.schedule.memory import Deferring, MemoryBudget
from tests.results import rows
from tests.test_measure import Mlp, features, make_cell
from tests.test_memory import FIXTURES, _cell
from zoo.catalog import select


def test_a_models_two_max_autotune_cells_are_partners_and_no_others():
    ma = make_cell(backend="inductor", mode="max-autotune", precision="bf16")
    manc = replace(ma, config=replace(ma.config, mode="max-autotune-no-cudagraphs"))
    assert tuning.share_key(ma) == tuning.share_key(manc) is not None
    assert tuning.partners(ma, manc) and tuning.partners(manc, ma)
    assert not tuning.partners(ma, ma)  # the same cell again tunes for itself
    # Anything that changes the graph or its shapes tunes apart.
    for other in (
        replace(manc, config=replace(manc.config, dynamic="true")),
        replace(manc, config=replace(manc.config, precision="fp32")),
        replace(manc, config=replace(manc.config, mode="max-autotune-no-cudagraphs+freezing")),
        replace(manc, batch_size=8),
        manc.with_run_batch(2),  # an out-of-memory retry at half the batch
        replace(manc, env_id="other"),
    ):
        assert tuning.share_key(other) != tuning.share_key(ma)
        assert not tuning.partners(ma, other)
    frozen = replace(ma, config=replace(ma.config, mode="max-autotune+freezing"))
    frozen_nc = replace(ma, config=replace(ma.config, mode="max-autotune-no-cudagraphs+freezing"))
    assert tuning.partners(frozen, frozen_nc)
    # Cells that do not tune through Inductor's caches share nothing.
    assert tuning.share_key(make_cell(backend="inductor", mode="default")) is None
    assert tuning.share_key(make_cell(backend="aot_inductor", mode="max-autotune")) is None


def _core_options() -> PlanOptions:
    """The options of a plan of the core set's columns on CUDA."""
    return PlanOptions(
        backends=("inductor",),
        modes=None,
        dynamic=("false",),
        precisions=("bf16",),
        steps=("infer",),
        device="cuda",
        columns=columns.columns("@core"),
    )


def test_core_feeds_a_models_max_autotune_cells_one_after_the_other():
    specs = select(["test_resnet", "test_vit", "test_efficientnet"])
    options = _core_options()
    cells = plan_cells(specs, options, "env").cells
    labels = [(cell.spec.name, cell.config.mode) for cell in cells if tuning.tunes(cell.config)]
    names = [spec.name for spec in specs]
    assert labels == [
        (name, mode) for name in names for mode in ("max-autotune", "max-autotune-no-cudagraphs")
    ]
    # Every other column still runs column by column, the headline first.
    configs = [cell.config for cell in cells]
    assert configs[:3] == [columns.HEADLINE] * 3
    first_tuned = next(i for i, c in enumerate(configs) if tuning.tunes(c))
    assert all(tuning.tunes(c) for c in configs[first_tuned:]) and len(configs[first_tuned:]) == 6


def test_first_in_columns_moves_models_ahead_within_each_column_only():
    """The cells to measure first lead their column's stretch; columns keep their order,
    a model's max-autotune pair stays side by side, and a model-by-model plan keeps its
    order."""
    specs = select(["test_resnet", "test_vit", "test_efficientnet"])
    options = _core_options()
    plan = plan_cells(specs, options, "env")
    headline = [c for c in plan.cells if c.config == columns.HEADLINE]
    tuned = [c for c in plan.cells if tuning.tunes(c.config)]
    last = headline[-1]
    # The second model's max-autotune-no-cudagraphs cell: its pair moves with it.
    partner = next(c for c in tuned if c.spec.id == tuned[2].spec.id and c is not tuned[2])
    moved = first_in_columns(plan, {last.key, partner.key})
    assert sorted(c.key for c in moved.cells) == sorted(c.key for c in plan.cells)
    assert [c.config for c in moved.cells] == [c.config for c in plan.cells]
    names = [c.spec.id for c in moved.cells if c.config == columns.HEADLINE]
    assert names == [last.spec.id] + [c.spec.id for c in headline[:-1]]
    pairs = [(c.spec.id, c.config.mode) for c in moved.cells if tuning.tunes(c.config)]
    order = [tuned[2].spec.id, tuned[0].spec.id, tuned[4].spec.id]
    assert pairs == [
        (name, mode) for name in order for mode in ("max-autotune", "max-autotune-no-cudagraphs")
    ]
    assert first_in_columns(plan, set()) is plan
    by_model = plan_cells(
        specs, replace(options, columns=None, modes=("default", "reduce-overhead")), "env"
    )
    keys = {by_model.cells[-1].key}
    assert first_in_columns(by_model, keys).cells == by_model.cells


def test_autotuning_cells_come_last_after_every_other_worker_kind():
    """Their compiles take minutes: a plan reaches every cheaper cell first, the XLA
    routes' (a worker kind of their own, after torch's) included."""
    specs = select(["test_resnet", "test_vit"])
    options = PlanOptions(
        backends=("inductor", "xla"),
        modes=("default", "max-autotune"),
        dynamic=("false",),
        precisions=("bf16",),
        steps=("infer",),
        device="cuda",
    )
    labels = [
        (cell.spec.name, cell.config.backend, cell.config.mode)
        for cell in plan_cells(specs, options, "env").cells
    ]
    assert labels == [
        ("test_resnet", "inductor", "default"),
        ("test_vit", "inductor", "default"),
        ("test_resnet", "xla", "none"),
        ("test_vit", "xla", "none"),
        ("test_resnet", "inductor", "max-autotune"),
        ("test_vit", "inductor", "max-autotune"),
    ]


def test_a_cell_waits_while_its_partner_is_under_way():
    """Passed over while its partner runs, without holding memory for itself; the cells
    behind it start meanwhile, and it is first in line once the partner is done."""
    waiting, behind = _cell("TinyMLP", "eager", 80), _cell("SlowMLP", "eager", 50)
    feed = Deferring(iter_feed([waiting, behind]))
    budget = MemoryBudget(100.0)
    running = [_cell("CoreRecorder", gib=10)]

    def fits(cell, reserve):
        return budget.fits(cell, running, reserve)

    def waits(cell):
        return cell is waiting

    assert feed.take_fitting(fits, budget.need, waits) is behind
    assert feed.passed_over == set()  # it waited for its partner, not for memory
    assert feed.peek() is waiting
    assert feed.take_fitting(fits, budget.need) is waiting


def test_cells_waiting_for_partners_do_not_use_up_the_lookahead():
    """A host with more workers than the memory lookahead has as many cells waiting for
    their partners; the cell behind them still starts."""
    waiting = [_cell("TinyMLP", "eager", 1) for _ in range(40)]
    behind = _cell("SlowMLP", "eager", 1)
    feed = Deferring(iter_feed([*waiting, behind]))
    budget = MemoryBudget(100.0)
    found = feed.take_fitting(
        lambda cell, reserve: True, budget.need, lambda cell: any(cell is w for w in waiting)
    )
    assert found is behind
    assert feed.peek() is waiting[0]


def iter_feed(cells):
    from runner.schedule.executor import _ListFeed

    return _ListFeed(cells)


def _mlp_cell(mode: str):
    return make_cell(backend="inductor", mode=mode, batch_size=64)


@pytest.mark.inductor
def test_the_second_max_autotune_cell_compiles_with_the_firsts_tuning(tmp_path, monkeypatch, capfd):
    """On this CPU Inductor's max-autotune benchmarks its C++ GEMM templates against
    aten's (and prints its AUTOTUNE tables); the partner compiles with no benchmarking
    at all, and says so."""
    monkeypatch.setenv(SCRATCH_DIR_ENV, str(tmp_path))
    monkeypatch.delenv(tuning.COLD_TUNING_ENV, raising=False)

    def measure(mode):
        result = measure_cell(_mlp_cell(mode), model=Mlp(), inputs_fn=features)
        assert result.status == "pass", result.error_message
        return result, "AUTOTUNE" in capfd.readouterr().err

    first, tuned = measure("max-autotune-no-cudagraphs")
    assert tuned and tuning.TUNING_REUSED not in (first.notes or "")
    second, tuned = measure("max-autotune")
    assert not tuned
    assert f"{tuning.TUNING_REUSED} from this run's max-autotune-no-cudagraphs cell" in second.notes
    # The first cell measured again tunes for itself (a rerun is what its row says it is).
    again, tuned = measure("max-autotune-no-cudagraphs")
    assert tuned and tuning.TUNING_REUSED not in (again.notes or "")


def test_no_tuning_is_kept_outside_a_run_or_with_cold_tuning(tmp_path, monkeypatch):
    cell = make_cell(backend="inductor", mode="max-autotune")
    cache = tmp_path / "cache-dir"
    (cache / "cache").mkdir(parents=True)
    (cache / "cache" / "system").write_text("{}")
    monkeypatch.delenv(SCRATCH_DIR_ENV, raising=False)
    assert not tuning.keep(cell, str(cache))
    monkeypatch.setenv(SCRATCH_DIR_ENV, str(tmp_path))
    monkeypatch.setenv(tuning.COLD_TUNING_ENV, "1")
    assert not tuning.keep(cell, str(cache))
    monkeypatch.delenv(tuning.COLD_TUNING_ENV)
    assert tuning.keep(cell, str(cache)) and not tuning.keep(cell, str(cache))
    partner = replace(
        cell, config=CellConfig("inductor", "max-autotune-no-cudagraphs", "false", "fp32")
    )
    target = tmp_path / "partner-cache"
    assert tuning.adopt(partner, str(target)) == "max-autotune"
    assert (target / "cache" / "system").read_text() == "{}"


@pytest.mark.inductor
def test_a_run_with_two_workers_starts_the_partner_after_the_first_and_tunes_once(tmp_path, capsys):
    """Two workers, two cells: without the wait both would start at once and both tune."""
    db = tmp_path / "zoo.duckdb"
    args = ["--module", f"{FIXTURES / 'toy_models.py'}:TinyMLP", "--backends", "inductor"]
    args += ["--modes", "max-autotune,max-autotune-no-cudagraphs", "--device", "cpu"]
    assert main([*args, "--workers", "2", "--db", str(db)]) == 0
    found = {row["mode"]: row for row in rows(db)}
    assert {mode: row["status"] for mode, row in found.items()} == {
        "max-autotune": "pass",
        "max-autotune-no-cudagraphs": "pass",
    }
    first, second = found["max-autotune"], found["max-autotune-no-cudagraphs"]
    assert tuning.TUNING_REUSED not in (first["notes"] or "")
    assert f"{tuning.TUNING_REUSED} from this run's max-autotune cell" in second["notes"]
    assert second["started_at"] >= first["finished_at"]
    printed = " ".join(capsys.readouterr().out.split())
    assert "autotuning reused (compile times leave it out): 1 cell(s) from their partner" in printed
    assert "run's pool" not in printed


class Wider(torch.nn.Module):
    """``Mlp``'s first layer (the same GEMM shape) under another head."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 6)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def _tuned_shapes(err: str) -> list[str]:
    """The GEMMs Inductor benchmarked, from its AUTOTUNE tables on stderr."""
    return re.findall(r"^AUTOTUNE (\w+\([^)]*\))", err, flags=re.MULTILINE)


@pytest.mark.inductor
def test_a_pooled_run_tunes_a_gemm_shape_once_across_models(tmp_path, monkeypatch, capfd):
    """With --tuning-pool, the second model benchmarks only the GEMM the first did not
    have; its notes count what it found and what it tuned. Without it, each model
    tunes every GEMM of its own."""
    monkeypatch.setenv(SCRATCH_DIR_ENV, str(tmp_path))
    monkeypatch.delenv(tuning.COLD_TUNING_ENV, raising=False)
    first = _mlp_cell("max-autotune-no-cudagraphs")
    second = replace(first, spec=replace(first.spec, id="custom/test:Wider", name="Wider"))

    def measure(cell, model):
        result = measure_cell(cell, model=model, inputs_fn=features)
        assert result.status == "pass", result.error_message
        return result, _tuned_shapes(capfd.readouterr().err)

    capfd.readouterr()
    _, alone = measure(second, Wider())
    assert len(alone) == 2  # both of its GEMMs, with no pool
    monkeypatch.setenv(tuning.POOL_ENV, "1")
    result, tuned = measure(first, Mlp())
    assert len(tuned) == 2 and tuning.TUNING_REUSED not in (result.notes or "")
    result, tuned = measure(second, Wider())
    # Only its head's GEMM (out 64x6); the first layer's came from the pool.
    assert len(tuned) == 1 and tuned[0] in alone and tuned[0].startswith("addmm(64x6,")
    assert (
        f"{tuning.TUNING_REUSED} from this run's tuning pool (--tuning-pool): it compiled "
        "with the timings of 2 GEMM/convolution shape(s)" in result.notes
    )
    assert "benchmarked 1 GEMM/convolution shape(s) itself" in result.notes


@pytest.mark.inductor
def test_zoo_run_with_tuning_pool_tunes_a_shared_gemm_once(tmp_path, monkeypatch, capsys):
    """Through the CLI: of two models with a layer in common, the one measured second
    benchmarks only its own head; a run without the flag pools nothing."""
    monkeypatch.delenv(tuning.POOL_ENV, raising=False)
    db = tmp_path / "zoo.duckdb"
    args = ["--module", f"{FIXTURES / 'toy_models.py'}:TinyMLP", "--backends", "inductor"]
    args += ["--module", f"{FIXTURES / 'toy_models.py'}:TinyMLPOtherHead"]
    args += ["--modes", "max-autotune-no-cudagraphs", "--device", "cpu", "--workers", "1"]
    assert main([*args, "--db", str(db), "--tuning-pool"]) == 0
    found = sorted(rows(db), key=lambda row: row["started_at"])
    assert [row["status"] for row in found] == ["pass", "pass"]
    assert tuning.TUNING_REUSED not in (found[0]["notes"] or "")
    assert "from this run's tuning pool (--tuning-pool)" in found[1]["notes"]
    assert "benchmarked 1 GEMM/convolution shape(s) itself" in found[1]["notes"]
    # The run's summary says so too.
    printed = " ".join(capsys.readouterr().out.split())
    assert (
        "autotuning reused (compile times leave it out): 0 cell(s) from their partner, 1 "
        "from the run's pool (2 GEMM/convolution shapes at hand in all; they benchmarked "
        "1 themselves)"
    ) in printed
    assert main([*args, "--db", str(db), "--force"]) == 0
    assert "autotuning reused" not in capsys.readouterr().out
    assert tuning.POOL_ENV not in os.environ
    again = rows(db, "SELECT notes FROM results ORDER BY started_at DESC LIMIT 2")
    assert not any(tuning.TUNING_REUSED in (row["notes"] or "") for row in again)


def _timing_file(root, cache: dict) -> None:
    (root / "cache").mkdir(parents=True, exist_ok=True)
    (root / "cache" / "system").write_text(json.dumps({"system": {"hash": "s"}, "cache": cache}))


def test_the_pool_merges_timings_and_hands_kernel_configs_on(tmp_path, monkeypatch):
    """Without a compile: what the pool holds, keeps and hands on, per environment."""
    monkeypatch.setenv(SCRATCH_DIR_ENV, str(tmp_path))
    monkeypatch.delenv(tuning.COLD_TUNING_ENV, raising=False)
    cell = make_cell(backend="inductor", mode="max-autotune")
    first, second = tmp_path / "first", tmp_path / "second"
    _timing_file(first, {"mm": {"k1": {"highest": {"c1": 1.0}}}})
    (first / "ab").mkdir()
    (first / "ab" / "kernel.best_config").write_text('{"XBLOCK": 64}')
    monkeypatch.delenv(tuning.POOL_ENV, raising=False)
    assert tuning.adopt_pool(cell, str(first)) is None  # the run does not pool
    assert tuning.add_to_pool(cell, str(first)) == 0
    monkeypatch.setenv(tuning.POOL_ENV, "1")
    start = tuning.adopt_pool(cell, str(first))
    assert start is not None and not start.held  # the run's first cell finds nothing
    assert tuning.add_to_pool(cell, str(first)) == 1
    assert tuning.add_to_pool(cell, str(first)) == 0  # nothing new the second time
    # The next cell (any model) starts with both; what it tunes is counted as its own.
    start = tuning.adopt_pool(cell, str(second))
    assert (start.shapes, start.configs) == (1, 1)
    assert (second / "ab" / "kernel.best_config").read_text() == '{"XBLOCK": 64}'
    timings = json.loads((second / "cache" / "system").read_text())
    assert timings["system"] == {"hash": "s"}
    timings["cache"]["mm"]["k1"]["highest"]["c1"] = 9.0  # the pool's first timing stays
    timings["cache"]["mm"]["k2"] = {"highest": {"c1": 2.0}}
    (second / "cache" / "system").write_text(json.dumps(timings))
    assert tuning.tuned_here(str(second), start) == 1
    assert tuning.add_to_pool(cell, str(second)) == 1
    third = tmp_path / "third"
    start = tuning.adopt_pool(cell, str(third))
    held = json.loads((third / "cache" / "system").read_text())["cache"]["mm"]
    assert start.shapes == 2 and held["k1"]["highest"]["c1"] == 1.0
    # Another environment, or a mode that does not autotune, has no pool.
    other = tuning.adopt_pool(replace(cell, env_id="other"), str(tmp_path / "fourth"))
    assert other is not None and not other.held
    assert tuning.adopt_pool(make_cell(backend="inductor", mode="default"), str(third)) is None
    # Cold tuning turns the pool off too.
    monkeypatch.setenv(tuning.COLD_TUNING_ENV, "1")
    assert tuning.adopt_pool(cell, str(tmp_path / "fifth")) is None


def _add_shapes(scratch: str, first: int, count: int) -> None:
    """In a process of its own: one cell after another adding shapes to the pool."""
    os.environ[SCRATCH_DIR_ENV] = scratch
    os.environ[tuning.POOL_ENV] = "1"
    cell = make_cell(backend="inductor", mode="max-autotune")
    for key in range(first, first + count):
        cache = Path(scratch) / f"cell-{key}"
        _timing_file(cache, {"mm": {f"k{key}": {"highest": {"c": 1.0}}}})
        tuning.add_to_pool(cell, str(cache))


def test_cells_adding_to_the_pool_at_once_lose_nothing(tmp_path, monkeypatch):
    """Four processes adding 25 shapes each, side by side, as a run's workers do: the
    pool's merges go one at a time, so every shape is there at the end."""
    context = multiprocessing.get_context("fork")
    workers = [
        context.Process(target=_add_shapes, args=(str(tmp_path), 100 * i, 25)) for i in range(4)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    monkeypatch.setenv(SCRATCH_DIR_ENV, str(tmp_path))
    monkeypatch.setenv(tuning.POOL_ENV, "1")
    monkeypatch.delenv(tuning.COLD_TUNING_ENV, raising=False)
    start = tuning.adopt_pool(
        make_cell(backend="inductor", mode="max-autotune"), str(tmp_path / "next")
    )
    assert start.shapes == 100


def test_tuning_overlap_counts_keys_an_earlier_model_tuned():
    """benchmarks/tuning_overlap.py: each model's GEMM/convolution keys on the meta device,
    and the hits a run-wide pool would have in feed order."""
    from benchmarks import tuning_overlap as overlap

    cells = overlap.headline_cells(select(["test_resnet", "test_efficientnet"]))
    assert [c.run_batch_size for c in cells] == [64, 64]  # the headline column's batch
    resnet, effnet = (overlap.measure_cell(cell, timeout_s=30) for cell in cells)
    assert resnet.keys and effnet.keys, (resnet.skipped, effnet.skipped)
    assert {key[0] for key in resnet.keys} >= {"convolution", "addmm"}
    # Autocast's dtype, not the fp32 the model runs in on meta.
    assert all(t[1] == "bf16" for key in resnet.keys for t in key[1] if t)
    again = overlap.Measured("timm/test_resnet_again", "timm", resnet.keys)
    failed = overlap.Measured("hf/Broken", "hf", None, "RuntimeError")
    result = overlap.overlap([resnet, failed, effnet, again])
    both = len(resnet.keys & effnet.keys)
    o = result["all"]
    assert o.models == 3 and "hf" not in result
    assert o.per_model == 2 * len(resnet.keys) + len(effnet.keys)
    assert o.pooled == len(resnet.keys | effnet.keys)
    assert o.hits == both + len(resnet.keys)
    assert o.shares == [0.0, both / len(effnet.keys), 1.0]


def test_tuning_overlap_keys_linear_and_conv_as_inductor_tunes_them():
    """A 1x1 convolution is the matmul max-autotune makes of it; attention's own matmuls
    are no GEMM Inductor tunes; a linear layer is an addmm in bf16."""
    import torch

    from benchmarks import tuning_overlap as overlap

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(8, 16, 1)
            self.linear = torch.nn.Linear(16, 16)

        def forward(self, x):
            y = self.conv(x).flatten(2).transpose(1, 2)  # 2 x 9 x 16
            y = torch.nn.functional.scaled_dot_product_attention(y, y, y)
            return self.linear(y)

    with torch.device("meta"):
        keys, answered = overlap.forward_keys(Block(), (torch.randn(2, 8, 3, 3),))
    assert answered == 0
    assert keys == {
        ("addmm", (((16,), "bf16"), ((18, 8), "bf16"), ((8, 16), "bf16")), ()),
        ("addmm", (((16,), "bf16"), ((18, 16), "bf16"), ((16, 16), "bf16")), ()),
    }
