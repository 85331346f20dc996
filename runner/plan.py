"""Models x configs = cells: the plan of a run.

Planning imports no torch: it only combines specs and axis values, drops the
combinations that cannot run on the chosen device, shards, and skips what the
store already holds.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace

from runner.backends import registry as backends
from runner.matrix.axes import AUTOTUNE_MODES, SIZED_SUITES, base_mode
from runner.matrix.cells import TIMING_S, Cell, CellConfig
from runner.matrix.phases import BUILD
from runner.matrix.results import CROWDED, OOM, RETRY_STATUSES, CellResult
from runner.measure import tuning
from zoo.spec import ModelSpec

DEFAULT_TIMEOUT_S = 300.0
# Retries at the same batch of a cell that ran out of memory beside other processes.
MAX_CROWDED_RETRIES = 2
AUTOTUNE_TIMEOUT_S = 900.0

# Batch size per suite and device when --batch-size is not given. None means the
# model defines its own inputs (custom models).
DEFAULT_BATCH = {
    ("timm", "cuda"): 64,
    ("timm", "cpu"): 2,
    ("hf", "cuda"): 16,
    ("hf", "cpu"): 2,
}

# Sequence length per suite and device when --seq-len is not given. Suites not named
# here take no sequence (timm images): their cells record None whatever is asked.
DEFAULT_SEQ_LEN = {
    ("hf", "cuda"): 128,
    ("hf", "cpu"): 16,
}


@dataclass(frozen=True)
class PlanOptions:
    """The axes and per-cell settings a run was asked for."""

    backends: tuple[str, ...]
    # None: each backend's default mode.
    modes: tuple[str, ...] | None
    dynamic: tuple[str, ...]
    precisions: tuple[str, ...]
    steps: tuple[str, ...]
    device: str
    batch_size: int | None = None
    seq_len: int | None = None
    timeout_s: float | None = None
    # A timing window in place of the protocol's (``zoo-run --timing-s``); None: the
    # protocol's (``runner.measure.timing.TIMING_PLANS``).
    timing_s: float | None = None
    size: str = "full"
    # Whether the size was asked for (``--size``) rather than the device's default:
    # only then does the plan say which models have one size and ignore it.
    size_asked: bool = True
    max_params: int | None = None
    # A named set of columns (``runner.matrix.columns``): these configs instead of the
    # cross product of the axes above.
    columns: tuple[CellConfig, ...] | None = None


@dataclass
class Plan:
    cells: list[Cell]
    dropped: list[str] = field(default_factory=list)
    skipped: list[Cell] = field(default_factory=list)
    # Keys of recorded failing cells planned only to be triaged (``skip_recorded``).
    triage_only: set[str] = field(default_factory=set)
    # Of those, the ones whose triage job would take longer than the whole run is given
    # (``triage_first``): key -> the job's likely seconds.
    triage_too_long: dict[str, float] = field(default_factory=dict)

    def estimate_s(self, workers: int = 1, gpus: int = 0) -> float:
        """Rough seconds for the plan: its cells' estimates one after another, shared
        by ``workers`` side by side (``parallel_share``)."""
        serial = sum(estimate_cell_s(cell) for cell in self.cells)
        return serial / parallel_share(min(workers, len(self.cells)), gpus)


# Workers side by side, as measured on one H200 with 16 cores (docs/PERFORMANCE.md,
# "Sweep throughput"): 8 ran 6.67x the serial rate, 16 ran 7.41x. Each adds about 0.83 of
# a serial worker's rate until the GPU's timing lock is always held, about 7.4x a GPU.
WORKER_SHARE = 0.83
GPU_CEILING = 7.4


def estimate_lines(plan: Plan, device: str, workers: int, gpus: int) -> list[str]:
    """What ``--dry-run`` says of the plan's length, and what the figure rests on: the
    backends' one-after-another seconds on ``device`` and the workers' share."""
    cells = len(plan.cells)
    seconds = plan.estimate_s(workers, gpus)
    length = "under a minute" if seconds < 60 else f"about {seconds / 60:.0f} min"
    plural = "" if cells == 1 else "s"
    inductor = backends.get("inductor")
    if device == "cuda":
        basis = (
            f"~{inductor.estimate_s(device, 'default'):.0f} s per inductor cell on a GPU, "
            f"~{inductor.estimate_s(device, 'max-autotune'):.0f} s for max-autotune"
        )
        shared = f"up to {GPU_CEILING:g}x a GPU, as measured on one H200"
    else:
        basis = (
            f"~{inductor.estimate_s(device, 'default'):.0f} s per inductor cell on a CPU, "
            f"~{backends.get('eager').estimate_s(device, 'none'):.0f} s per eager or "
            "aot_eager cell"
        )
        shared = "the figure of a GPU host, not measured on a CPU"
    if workers > 1:
        basis += f"; each worker side by side adds about {WORKER_SHARE:g} of that rate, {shared}"
    return [
        f"{cells} cell{plural} to run on {device}, {length} with {workers} worker(s)",
        f"(a rough estimate: one after another {basis})",
    ]


def parallel_share(workers: int, gpus: int) -> float:
    """How many times the serial rate ``workers`` side by side reach on ``gpus`` GPUs
    (0: the CPU, where the timed calls share the cores and the lock bounds nothing)."""
    if workers <= 1:
        return 1.0
    share = WORKER_SHARE * workers
    return min(share, GPU_CEILING * gpus) if gpus else share


def configs(options: PlanOptions) -> tuple[list[CellConfig], list[str]]:
    """The columns asked for, and one line per combination dropped for the device (the
    reasons are the registries', ``runner.backends.registry.cannot_run``)."""
    if options.columns is not None:
        wanted, missing = list(dict.fromkeys(options.columns)), []
    else:
        wanted, missing = _cross_product(options)
    kept, dropped = [], []
    reasons: dict[str, int] = {}
    for config in wanted:
        reason = backends.cannot_run(config, options.device)
        if reason is None:
            kept.append(config)
        else:
            reasons[reason] = reasons.get(reason, 0) + 1
    for reason, count in reasons.items():
        plural = "s" if count > 1 else ""
        dropped.append(f"dropped {count} config{plural}: {reason}")
    dropped += [f"no mode asked for fits: {what}" for what in missing]
    return kept, dropped


def _cross_product(options: PlanOptions) -> tuple[list[CellConfig], list[str]]:
    """Every backend x mode x dynamic x precision x step asked for, and the backends none
    of whose modes was asked for, in words."""
    wanted: list[CellConfig] = []
    missing: list[str] = []
    for backend in options.backends:
        modes = backends.get(backend).modes_for(options.modes)
        if not modes:
            missing.append(backends.get(backend).describe_modes())
        for mode, dynamic, precision, step in itertools.product(
            modes, options.dynamic, options.precisions, options.steps
        ):
            config = CellConfig(backend, mode, dynamic, precision, step)
            if config not in wanted:
                wanted.append(config)
    return wanted, missing


def default_batch_size(spec: ModelSpec, device: str) -> int | None:
    return DEFAULT_BATCH.get((spec.suite, device))


def seq_len_for(spec: ModelSpec, options: PlanOptions) -> int | None:
    default = DEFAULT_SEQ_LEN.get((spec.suite, options.device))
    if default is None:
        return None
    return options.seq_len or default


def spec_for_cell(spec: ModelSpec, options: PlanOptions) -> ModelSpec:
    """The spec as the cell builds it: its size, parameter limit and device."""
    if spec.suite not in SIZED_SUITES:
        return spec
    return replace(spec, size=options.size, max_params=options.max_params, device=options.device)


def default_timeout_s(config: CellConfig) -> float:
    autotunes = base_mode(config.mode) in AUTOTUNE_MODES
    return AUTOTUNE_TIMEOUT_S if autotunes else DEFAULT_TIMEOUT_S


def estimate_cell_s(cell: Cell) -> float:
    """Rough seconds for the cell, the backend's estimate (``--dry-run``)."""
    return backends.get(cell.config.backend).estimate_s(cell.device, cell.config.mode)


def plan_cells(
    specs: Iterable[ModelSpec], options: PlanOptions, env_id: str | Mapping[str, str]
) -> Plan:
    """Every model x every config that can run on the device, model by model. ``env_id``:
    the environment id of each process kind's cells (``runner.env.fingerprints``), or
    one id for all."""
    kept, dropped = configs(options)
    cells = []
    one_size = 0
    for spec in specs:
        batch = options.batch_size or default_batch_size(spec, options.device)
        cell_spec = spec_for_cell(spec, options)
        one_size += cell_spec.size != options.size
        for config in kept:
            cells.append(
                Cell(
                    spec=cell_spec,
                    config=config,
                    size=cell_spec.size,
                    batch_size=batch,
                    seq_len=seq_len_for(spec, options),
                    device=options.device,
                    env_id=env_id
                    if isinstance(env_id, str)
                    else env_id[backends.process_kind(config.backend)],
                    timeout_s=options.timeout_s or default_timeout_s(config),
                    extra={} if options.timing_s is None else {TIMING_S: options.timing_s},
                )
            )
    if options.columns is not None:
        # A named set runs column by column: side by side run different models (one
        # model's columns together would hold as many copies of it on the device), and
        # a column's cells, alike in cost, are what the next one's time is judged by.
        # The two max-autotune columns are one, though: a model's cells of them side by
        # side in the feed (the first's tuning serves the second; the executor starts
        # the second once the first is done: runner.measure.tuning). The sort is stable
        # and the cells were made model by model, so a group's stay in that order.
        group: dict[CellConfig, int] = {}
        for index, config in enumerate(kept):
            group.setdefault(tuning.shared_column(config), index)
        cells.sort(key=lambda cell: group[tuning.shared_column(cell.config)])
    # Cells that autotune last, whatever their backend: their compiles take minutes
    # (max-autotune's took 10-23x default's on the H200), so every cheaper column,
    # XLA's included, is done before they start. Within each part, cells of one worker
    # kind together: a worker is replaced whenever the kind changes (XLA and
    # torch.compile never share a process), and a new one costs seconds.
    cells.sort(
        key=lambda cell: (
            base_mode(cell.config.mode) in AUTOTUNE_MODES,
            backends.worker_group(cell.config.backend),
        )
    )
    if one_size and options.size_asked:
        plural = "s" if one_size > 1 else ""
        dropped.append(
            f"size {options.size}: {one_size} model{plural} of suites with one size "
            "(timm, custom) run at size full"
        )
    return Plan(cells=cells, dropped=dropped)


def shard(plan: Plan, index: int, count: int) -> Plan:
    """Share ``index`` of ``count`` (1-based): every count-th cell of a stable order.

    Cells are ordered by their key, which is the same on every machine with the
    same environment, so N machines given 1/N .. N/N cover the plan exactly once,
    and each gets an even share of every model and config. The share runs in the
    plan's order (column by column for a named set, autotuning last, one worker kind
    at a time), not in the order that dealt it.
    """
    ordered = sorted(plan.cells, key=lambda cell: (cell.spec.id, cell.config.label(), cell.key))
    dealt = {cell.key for cell in ordered[index - 1 :: count]}
    mine = [cell for cell in plan.cells if cell.key in dealt]
    return Plan(cells=mine, dropped=plan.dropped, skipped=plan.skipped)


def skip_recorded(
    plan: Plan,
    recorded: dict[str, str],
    *,
    force: bool,
    retry_failed: bool,
    untriaged: Collection[str] = (),
    disturbed: Collection[str] = (),
    timed_out: Mapping[str, float | None] | None = None,
    crowded: Collection[str] = (),
    crashed_alike: Collection[str] = (),
    built_oom: Collection[str] = (),
    outlasted: Collection[str] = (),
    one_region: Collection[str] = (),
) -> Plan:
    """Drop cells the store already holds (resume).

    ``recorded`` maps cell key to the status of its latest row. Cells whose process
    died, hung or ran out of memory are rerun only with ``retry_failed``, and one that
    hung only when it now has more time than it ran (``timed_out``: key -> the wall
    seconds of its recorded timeout; at the same limit it would most likely use it all
    again); ``force`` reruns everything. ``untriaged``: keys of recorded failing cells that a run asked to
    triage reruns (and so triages), those of the backends the ladder can triage.
    ``disturbed``: keys of recorded cells whose timing was disturbed, rerun. The plan's
    ``triage_only`` names the untriaged cells rerun for no other reason. ``crowded``:
    keys whose recorded row ran out of memory beside other processes; retried, they are
    crowded retries (the executor's first shares its GPU with room kept for it, a later
    one runs alone: ``runner.schedule.memory``).
    ``crashed_alike``: keys whose process died the same way in their last two attempts
    (``Store.crashed_alike``), which ``retry_failed`` does not rerun; nor ``built_oom``:
    keys that ran out of memory building their model, uncrowded
    (``Store.out_of_memory_building``); nor ``outlasted``: keys stopped at the end of a
    time-limited run they could not end within (``Store.outlasted_time_limit``), for a
    run with a time limit to give. ``one_region``: keys of recorded passes timed inside
    one autocast region (``Store.timed_in_one_region``), measured again like disturbed
    ones.
    """
    if force:
        return plan
    todo, skipped, triage_only = [], list(plan.skipped), set()
    for cell in plan.cells:
        status = recorded.get(cell.key)
        triage = cell.key in untriaged and backends.get(cell.config.backend).ladder
        retry = (
            retry_failed
            and status in RETRY_STATUSES
            and _more_time(cell, timed_out or {})
            and cell.key not in crashed_alike
            and cell.key not in built_oom
            and cell.key not in outlasted
        )
        measure = cell.key in disturbed or cell.key in one_region or retry
        if status is None or triage or measure:
            todo.append(cell.crowded_retry() if retry and cell.key in crowded else cell)
        else:
            skipped.append(cell)
        if status is not None and triage and not measure:
            triage_only.add(cell.key)
    return Plan(cells=todo, dropped=plan.dropped, skipped=skipped, triage_only=triage_only)


def first_in_columns(plan: Plan, keys: Collection[str]) -> Plan:
    """``plan`` with the models of ``keys`` first in each stretch of one column.

    A named set runs column by column (``make_plan``): each stretch of consecutive cells
    of one column (the two max-autotune columns count as one) keeps its place, and
    within it the models with a cell in ``keys`` go first, in their order, the others
    after. A model's consecutive cells move together, so the max-autotune pair stays
    side by side. A plan that goes model by model has stretches of one cell, and keeps
    its order. Used to measure first the recorded passes that moved most when measured
    again (``Store.launch_bound``)."""
    if not keys:
        return plan
    ordered: list[Cell] = []
    stretches = itertools.groupby(plan.cells, key=lambda cell: tuning.shared_column(cell.config))
    for _, stretch in stretches:
        models = [list(cells) for _, cells in itertools.groupby(stretch, key=lambda c: c.spec.id)]
        # A stable sort: the models with a cell in ``keys`` first, each side in its order.
        models.sort(key=lambda cells: not any(cell.key in keys for cell in cells))
        ordered.extend(cell for cells in models for cell in cells)
    return replace(plan, cells=ordered)


def _more_time(cell: Cell, timed_out: Mapping[str, float | None]) -> bool:
    """Whether ``cell`` has more time now than its recorded timeout ran (True for a cell
    that did not time out, or whose row does not say how long it ran)."""
    spent = timed_out.get(cell.key)
    return spent is None or cell.timeout_s > spent


def triage_first(
    plan: Plan,
    recorded: Mapping[str, tuple[str, CellResult]],
    mode: str,
    limit_s: float | None = None,
) -> Plan:
    """The planned cells that ``recorded`` holds (key -> run id and row: recorded failing
    cells planned only for their triage) as triage jobs of their rows
    (``runner.triage.job_of_recorded``), first in the plan: a job takes its cell's time
    once per rung of the ladder, so a time-limited run fits it best at its start.

    A run given ``limit_s`` in all (``--time-limit``) leaves out the jobs likely to take
    longer (``runner.triage.failed_job_s``): it could never start them, and a cell it
    plans and cannot record would keep a chunked sweep's next step from starting, chunk
    after chunk (H200 runs 8518d348 and 31de9c07 of 2026-12-04: VitsModel's ladder, priced
    from its 373 s row, held back the core set's step twice). Their rows stand, skipped,
    in ``triage_too_long``; a run given more time triages them."""
    if not recorded:
        return plan
    # Imported here: runner.triage imports torch, and planning does not.
    from runner.triage import failed_job_s, job_of_recorded

    jobs, too_long = [], {}
    for cell in plan.cells:
        if cell.key not in recorded:
            continue
        job = job_of_recorded(cell, mode, *recorded[cell.key])
        expected = failed_job_s(job, recorded[cell.key][1])
        if limit_s is not None and expected > limit_s:
            too_long[cell.key] = expected
        else:
            jobs.append(job)
    rest = [cell for cell in plan.cells if cell.key not in recorded]
    skipped = plan.skipped + [cell for cell in plan.cells if cell.key in too_long]
    return Plan(
        cells=jobs + rest,
        dropped=plan.dropped,
        skipped=skipped,
        triage_only=plan.triage_only,
        triage_too_long=too_long,
    )


def smaller_batch(cell: Cell, result: CellResult) -> Cell | None:
    """The retry of a cell that ran out of memory: the same cell at half the batch, down
    to 1 (timm's benchmark does the same); None when there is nothing to retry. The key
    keeps the batch asked for; the row records the one that ran.

    A cell that ran out beside other processes holding most of the device's memory
    (``runner.matrix.results.CROWDED``: a parallel sweep's neighbour, not the model)
    is retried at the same batch first, up to ``MAX_CROWDED_RETRIES`` times; the
    executor runs the first such retry beside cells of known needs, with room kept for
    it, and any later one of the cell alone on its GPU (``runner.schedule.memory``).
    One that ran out while building its model, not crowded, is not retried: the batch
    takes no part in that."""
    batch = cell.run_batch_size
    if result.status != OOM or batch is None:
        return None
    if CROWDED in (result.notes or "") and cell.crowded_retries < MAX_CROWDED_RETRIES:
        return cell.crowded_retry()
    if batch <= 1 or result.error_phase == BUILD:
        # Building the model takes no input: a smaller batch builds the same model
        # (InklingModel, on the H200, asked for 1,406 GiB at every batch from 16 to 1).
        return None
    return cell.with_run_batch(max(1, batch // 2))
