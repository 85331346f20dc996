"""``zoo-run``: plan the cells, run each in a worker process, record every result."""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
import time
from importlib import metadata
from pathlib import Path

from runner.backends import registry as backends
from runner.matrix import columns
from runner.matrix.axes import DEVICES, DYNAMIC, MODES, PRECISIONS, SIZES
from runner.matrix.labels import DISTURBED_RATIO
from runner.matrix.results import TRIAGED_STATUSES
from runner.plan import (
    Plan,
    PlanOptions,
    estimate_lines,
    first_in_columns,
    plan_cells,
    shard,
    skip_recorded,
    smaller_batch,
    triage_first,
)
from runner.schedule.cpus import AUTO_THREADS
from runner.steps import registry as steps
from runner.store.schema import DEFAULT_DB_PATH as DEFAULT_DB
from zoo.errors import UsageError, run_command
from zoo.spec import parse_param_count

EXECUTORS = ("local", "ray")
DEFAULT_BACKENDS = ("inductor",)


def _axis(name: str, valid: tuple[str, ...], planned: dict[str, str] | None = None):
    """An argparse type for a comma-separated list of values from ``valid``."""

    def parse(text: str) -> tuple[str, ...]:
        values = tuple(dict.fromkeys(v.strip() for v in text.split(",") if v.strip()))
        if not values:
            raise argparse.ArgumentTypeError(f"empty {name}; valid: {', '.join(valid)}")
        for value in values:
            if planned and value in planned:
                raise argparse.ArgumentTypeError(
                    f"{name} {value!r}: {planned[value]}; valid now: {', '.join(valid)}"
                )
            if value not in valid:
                raise argparse.ArgumentTypeError(
                    f"unknown {name} {value!r}; valid: {', '.join(valid)}"
                )
        return values

    parse.__name__ = name
    return parse


def _list(name: str):
    """An argparse type for a comma-separated list checked later (modes: against the
    backends asked for)."""

    def parse(text: str) -> tuple[str, ...]:
        values = tuple(dict.fromkeys(v.strip() for v in text.split(",") if v.strip()))
        if not values:
            raise argparse.ArgumentTypeError(f"empty {name} list")
        return values

    parse.__name__ = name
    return parse


def _step_list(text: str) -> tuple[str, ...]:
    values = _list("step")(text)
    for value in values:
        try:
            steps.get(value)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    return values


def _column_set(text: str):
    try:
        return text.strip(), columns.columns(text)
    except UsageError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


# The axis options a named set of columns replaces, by their attribute in ``args``.
_AXIS_OPTIONS = {
    "backends": "--backends",
    "modes": "--modes",
    "dynamic": "--dynamic",
    "precision": "--precision",
    "step": "--step",
    "train_compile": "--train-compile",
    "optimizer": "--optimizer",
}


def _check_configs(args) -> None:
    """--configs names every column itself: an axis given beside it is a contradiction."""
    if args.configs is None:
        return
    given = [flag for name, flag in _AXIS_OPTIONS.items() if getattr(args, name) is not None]
    if given:
        raise UsageError(
            f"--configs {args.configs[0]} names its columns itself; drop {', '.join(given)} "
            "or drop --configs and give the axes"
        )


def _train_steps(args) -> tuple[str, ...]:
    """--step with --train-compile and --optimizer folded into each train step's name."""
    step = args.step or (steps.INFER,)
    extra = [
        option
        for option in (args.train_compile, args.optimizer)
        if option not in (None, "loss", "adam")
    ]
    if not extra:
        return step
    named = []
    for name in step:
        if steps.base(name) == steps.TRAIN:
            options = [o for o in steps.options(name)]
            name = steps.OPTION.join([steps.TRAIN, *dict.fromkeys([*options, *extra])])
            try:
                steps.get(name)
            except ValueError as error:
                raise UsageError(f"--train-compile/--optimizer with --step: {error}") from None
        named.append(name)
    return tuple(dict.fromkeys(named))


def _positive(kind, zero_ok: bool = False):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
            wanted = "0 or more" if zero_ok else "positive"
            raise argparse.ArgumentTypeError(f"must be a finite number, {wanted}; got {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


def _compile_threads(text: str) -> int | str:
    """``auto`` or a positive whole number of compile threads."""
    if text == AUTO_THREADS:
        return text
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"must be 'auto' or a whole number of threads, 1 or more; got {text}"
        )
    return value


def _param_count(text: str) -> int:
    """A parameter count: ``1000000000``, ``1e9``, ``1B`` or ``500M``."""
    try:
        return parse_param_count(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _shard(text: str) -> tuple[int, int]:
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not K/N; write e.g. 2/4 for the second of four shares"
        ) from None
    if count < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r}: N, the number of shares, must be 1 or more; write e.g. 2/4"
        )
    if not 1 <= index <= count:
        raise argparse.ArgumentTypeError(
            f"{text!r}: K must be between 1 and N, as in 1/{count} to {count}/{count}"
        )
    return index, count


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zoo-run",
        description="Measure models under torch.compile and record every cell in DuckDB.",
    )
    models = parser.add_argument_group("models")
    models.add_argument(
        "--models",
        action="append",
        metavar="PATTERNS",
        help="shell globs on the id or bare name, or named selections (@headline: every "
        "timm model and the HF classes of the nine headline tasks; @core: the core set), "
        "comma-separated or repeated (e.g. 'resnet*', 'timm/vit_*', '@core'); '*' for every "
        "model. Required unless --module is given: a forgotten or blank --models never "
        "starts a sweep of the whole catalogue",
    )
    models.add_argument(
        "--module",
        action="append",
        metavar="FILE:CLASS",
        help="a user model: a class built with no arguments whose get_example_inputs() "
        "returns a tuple of tensors (repeatable)",
    )
    axes = parser.add_argument_group("configs (comma-separated; cells are the cross product)")
    axes.add_argument(
        "--configs",
        type=_column_set,
        default=None,
        metavar="@SET",
        help="a named set of columns instead of the axes below: "
        + ", ".join(columns.PREFIX + name for name in columns.NAMES)
        + " (@core: the headline column, inductor default dynamic false bf16 inference, "
        "and one change of it each: the other inductor modes, dynamic true and auto, the "
        "eager, aot_eager and cudagraphs backends, fp32, xla and xla_export, export "
        "non-strict and strict, aot_inductor, train)",
    )
    axes.add_argument(
        "--backends",
        type=_axis("backend", backends.names()),
        default=None,
        help="default: inductor",
    )
    axes.add_argument(
        "--modes",
        type=_list("mode"),
        default=None,
        help="modes of the backends that have them (default: each one's first): inductor "
        f"{', '.join(MODES)}, each also with +freezing and/or +cpp_wrapper (Inductor's "
        "configs, e.g. default+freezing); export non-strict, strict; aot_inductor default, "
        "max-autotune. Backends without modes ignore them",
    )
    axes.add_argument(
        "--dynamic", type=_axis("dynamic", DYNAMIC), default=None, help="default: false"
    )
    axes.add_argument(
        "--precision",
        type=_axis("precision", PRECISIONS),
        default=None,
        help="default: bf16 (autocast) on cuda, fp32 on cpu",
    )
    axes.add_argument(
        "--step",
        type=_step_list,
        default=None,
        help="infer (default), train (forward, loss, backward, optimizer step), or both; a "
        "train step's options ride on its name: train+model (only the model compiled, its loss "
        "eager, as timm's benchmark does), train+all (the optimizer step compiled too), "
        "+sgd (SGD instead of Adam)",
    )
    axes.add_argument(
        "--train-compile",
        choices=("loss", *steps.TRAIN_COMPILE),
        default=None,
        help="what of a train step is compiled: loss (the model and its loss as one "
        "region, the default), model, all (the optimizer step too); the same as "
        "writing train+model or train+all",
    )
    axes.add_argument(
        "--optimizer",
        choices=("adam", *steps.OPTIMIZERS),
        default=None,
        help="the train step's optimizer (default adam); --optimizer sgd is train+sgd",
    )
    cell = parser.add_argument_group("cells")
    cell.add_argument(
        "--batch-size",
        type=_positive(int),
        default=None,
        help="default: 64 for timm and 16 for hf on cuda, 2 on cpu",
    )
    cell.add_argument(
        "--seq-len",
        type=_positive(int),
        default=None,
        help="sequence length of text and speech models (hf); default: 128 on cuda, 16 on "
        "cpu; image models (timm) take none",
    )
    cell.add_argument(
        "--size",
        choices=SIZES,
        default=None,
        help="hf models: full (the config's defaults) or tiny (2 layers, hidden size 64); "
        "default: full on cuda, tiny on cpu. timm models have one size, full",
    )
    cell.add_argument(
        "--max-params",
        type=_param_count,
        default=None,
        metavar="COUNT",
        help="full-size hf models above this many parameters are built with fewer layers "
        "(and the cell's notes say so); default 1B",
    )
    cell.add_argument(
        "--device",
        type=_axis("device", DEVICES),
        default=None,
        help="cuda or cpu; default cuda when available",
    )
    cell.add_argument(
        "--timeout",
        type=_positive(float),
        default=None,
        metavar="SECONDS",
        help="per cell; default 300, 900 for max-autotune modes",
    )
    cell.add_argument(
        "--timing-s",
        type=_positive(float),
        default=None,
        metavar="SECONDS",
        help="how long each cell times its interleaved eager and compiled calls, after "
        "at least 10 pairs (5 on cpu); default 2 on cuda, 1 on cpu. A shorter window "
        "holds the GPU less per cell but agreed less with serial timing beside many "
        "workers (docs/PERFORMANCE.md); the rows say they were timed so",
    )
    run = parser.add_argument_group("run")
    run.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"default {DEFAULT_DB}")
    run.add_argument("--force", action="store_true", help="rerun cells already recorded")
    run.add_argument(
        "--retry-failed",
        action="store_true",
        help="rerun recorded cells whose status is oom, crash (not one that crashed in the "
        "same phase twice running: --force reruns it), and timeout where this run gives "
        "the cell more time than it ran (--timeout)",
    )
    run.add_argument(
        "--retry-disturbed",
        action="store_true",
        help=(
            "rerun recorded cells whose timing was disturbed (a side's median "
            f"{DISTURBED_RATIO:g}x its fastest sample or more), best with fewer --workers"
        ),
    )
    run.add_argument("--dry-run", action="store_true", help="print the plan and stop")
    run.add_argument("--shard", type=_shard, default=None, metavar="K/N")
    run.add_argument("--label", default=None, help="a name for this sweep")
    run.add_argument(
        "--workers",
        type=_positive(int),
        default=None,
        help="cells built and compiled at once; timing always holds one lock per GPU "
        "(default on cuda: from CPU cores and GPU memory; 1 on cpu)",
    )
    run.add_argument(
        "--timing-cpus",
        type=_positive(int, zero_ok=True),
        default=0,
        metavar="N",
        help="cuda: keep N CPUs per GPU free of compiling workers, whole physical cores "
        "(an SMT sibling comes along); a worker moves its timing there while it holds the "
        "GPU (default 0: none kept)",
    )
    run.add_argument(
        "--compile-threads",
        type=_compile_threads,
        default=None,
        metavar="N|auto",
        help="Inductor's compile threads in each worker (TORCHINDUCTOR_COMPILE_THREADS, "
        "which also sizes max-autotune's precompiling): auto shares the compiling cores "
        "out among the workers, as torch's CPU threads are; default: torch's own, one "
        "per core in every worker. Each row's notes say what was set",
    )
    run.add_argument(
        "--triage",
        choices=("none", "ladder", "bisect", "minify"),
        default="none",
        help="ladder: a torch.compile cell that fails (compile_error, fail_accuracy, crash) "
        "climbs eager, aot_eager, aot_eager_decomp_partition and its own backend in a fresh "
        "worker, and its row names the first rung that failed (costs time on failing "
        "cells only; the cell's status stays); bisect: also, where that rung is inductor, "
        "Inductor's compiler bisector names the subsystem (up to 10 minutes a cell); "
        "minify: instead, dynamo's minifier shrinks the failing graph to a repro script kept "
        "with the cell (up to 15 minutes a cell). Recorded failing cells without a triage "
        "verdict are rerun to be triaged: the same command triages a sweep's earlier "
        "failures",
    )
    run.add_argument(
        "--trace",
        type=Path,
        default=None,
        metavar="DIR",
        help="with --triage: the failing rung of each failing cell is compiled once more "
        "with torch's structured trace (what TORCH_TRACE writes) under DIR/<cell key>/, "
        "and tlparse's report beside it when tlparse is installed (pip install tlparse); "
        "the row names the files",
    )
    run.add_argument(
        "--time-limit",
        type=_positive(float),
        default=None,
        metavar="SECONDS",
        help="start no cell that would likely end after this long from the command's "
        "start, judged by the median time of the cells this run finished (the cells under "
        "way finish, but one whose own clock ran 90%% of the run is stopped 10 s after the "
        "limit as a timeout: no run this long can measure it): the run ends near the limit, for "
        "jobs with a hard one; the same command later resumes with the cells left: sweeps "
        "in chunks of a fixed length",
    )
    run.add_argument(
        "--wrap-up",
        type=_positive(float),
        default=120.0,
        metavar="SECONDS",
        help="on SIGUSR1, end within this many seconds, as if the time limit were then: the "
        "cells under way finish (those still running then are stopped, without a row), "
        "crowded retries and triage jobs that fit still run, no "
        "cell starts that would likely end later. For a batch job's warning before its "
        "end (Slurm: #SBATCH --signal=B:USR1@300 and exec zoo-run ... --wrap-up 240); "
        "with --executor ray every node wraps up (default: %(default)g)",
    )
    cluster = parser.add_argument_group("executor")
    cluster.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="local",
        help="local: worker processes on this machine (default); ray: the cells spread "
        "over the nodes of a Ray cluster, each node running them as a local run would "
        "(--workers per node), results recorded here (needs the 'ray' extra)",
    )
    cluster.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="with --executor ray: the cluster's head, HOST:PORT (default: RAY_ADDRESS, "
        "or the cluster `ray start` started on this machine)",
    )
    run.add_argument(
        "--tuning-pool",
        action="store_true",
        help="share max-autotune's tuning across the run's models: each such cell starts "
        "with the GEMM/convolution timings and Triton configs earlier cells tuned, and its "
        "notes say what it found and tuned itself (its compile time then leaves that out)",
    )
    run.add_argument(
        "--quiet-timing",
        action="store_true",
        help="stop the other workers (SIGSTOP) while a cell times and continue them after: "
        "a quiet host for launch-bound timings, less compiling meanwhile (always on for "
        "cpu runs with several workers)",
    )
    return parser


def _requested_device(args) -> str | None:
    if args.device is None:
        return None
    if len(args.device) != 1:
        raise UsageError("give one --device per run (cuda or cpu)")
    return args.device[0]


def _device(args) -> str:
    import torch

    device = _requested_device(args)
    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError(
            "--device cuda: torch sees no CUDA device here "
            f"(torch {torch.__version__}); use --device cpu"
        )
    return device


def make_plan(args, device: str, env_ids: dict[str, str], specs: list | None = None) -> Plan:
    """The plan of ``args``' cells; ``specs``: its models, where already selected."""
    from zoo.catalog import select

    if specs is None:
        specs = select(args.models, args.module)
    options = PlanOptions(
        backends=args.backends or DEFAULT_BACKENDS,
        modes=args.modes,
        dynamic=args.dynamic or ("false",),
        precisions=args.precision or (("bf16",) if device == "cuda" else ("fp32",)),
        steps=_train_steps(args),
        device=device,
        batch_size=args.batch_size,
        seq_len=args.seq_len,
        timeout_s=args.timeout,
        timing_s=args.timing_s,
        size=args.size or ("full" if device == "cuda" else "tiny"),
        size_asked=args.size is not None,
        max_params=args.max_params,
        columns=args.configs[1] if args.configs else None,
    )
    plan = plan_cells(specs, options, env_ids)
    if args.shard:
        plan = shard(plan, *args.shard)
    return plan


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command("zoo-run", _run, args, argv)


def _run(args, argv: list[str] | None) -> int:
    from runner import env as environment

    # --time-limit counts from here, planning included: a chunk's hard stop comes that
    # long after the command's start (benchmarks/sweep_chunk.py).
    args.entered = time.monotonic()
    console = _console(stderr=True)
    out = _console(stderr=False)
    if args.ray_address and args.executor != "ray":
        raise UsageError("--ray-address applies to --executor ray")
    _check_configs(args)
    _arm_trace(args)
    from runner.measure import tuning

    # Read by the workers (and forwarded to a Ray cluster's nodes with the other ZOO_).
    if args.tuning_pool:
        os.environ[tuning.POOL_ENV] = "1"
    else:
        os.environ.pop(tuning.POOL_ENV, None)
    if args.executor == "ray":
        return _run_on_cluster(args, argv, console, out)
    device = _device(args)
    if args.timing_cpus and device == "cuda":
        from runner.schedule.cpus import split_cpus

        try:
            split_cpus(os.sched_getaffinity(0), len(environment.gpu_uuids()), args.timing_cpus)
        except ValueError as error:
            raise UsageError(f"--timing-cpus {args.timing_cpus}: {error}") from None
    elif args.timing_cpus:
        console.print("--timing-cpus applies to cuda runs; ignored on cpu")
    if args.modes is not None and (
        problems := backends.mode_problems(args.backends or DEFAULT_BACKENDS, args.modes)
    ):
        raise UsageError("; ".join(problems))
    # Validate the models before touching the database: bad input changes nothing.
    from zoo.catalog import select

    if args.models is None and not args.module:
        raise UsageError(
            "say which models to run: --models PATTERNS (e.g. 'resnet*'; '*' for the whole "
            "catalogue, '@headline' or '@core' for a named selection) or --module FILE:CLASS"
        )
    specs = select(args.models, args.module)
    store = _open_store(args)
    env = environment.capture(device)
    return _plan_and_execute(args, argv, env, store, console, out, device, specs=specs)


def _arm_trace(args) -> None:
    """``--trace DIR``: checked, made, and handed to the workers (runner.triage reads it
    in the triage job)."""
    if args.trace is None:
        return
    from runner.triage import TRACE_DIR_ENV

    if args.triage == "none":
        raise UsageError(
            "--trace needs --triage (ladder, bisect or minify): it traces the failing rung"
        )
    folder = args.trace.expanduser().resolve()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".zoo-write-check"
        probe.touch()
        probe.unlink()
    except OSError as error:
        raise UsageError(
            f"--trace {args.trace}: cannot write there ({error.strerror}); give a folder you can write"
        ) from None
    os.environ[TRACE_DIR_ENV] = str(folder)


def _open_store(args):
    if args.dry_run and not args.db.exists():
        return None
    from runner.store.db import Store

    # A dry run only reads what is recorded: a database it cannot write will do.
    return Store.open(args.db, writable=not args.dry_run)


def _run_on_cluster(args, argv, console, out) -> int:
    """``--executor ray``: the environment, the device and the workers come from the
    cluster's nodes; the plan and the store stay here."""
    from runner.cluster.executor import Cluster
    from zoo.catalog import select
    from zoo.custom import SUITE as CUSTOM

    requested = _requested_device(args)
    # Bad input changes nothing, and costs no connection: models first.
    specs = select(args.models, args.module)
    cluster = Cluster.connect(args.ray_address)
    try:
        device = cluster.choose_device(requested)
        paths = [spec.source.rpartition(":")[0] for spec in specs if spec.suite == CUSTOM]
        if args.timing_cpus and device != "cuda":
            console.print("--timing-cpus applies to cuda runs; ignored on cpu")
        cluster.start_nodes(paths, timing_cpus=args.timing_cpus if device == "cuda" else 0)
        store = _open_store(args)
        return _plan_and_execute(
            args, argv, cluster.env, store, console, out, device, cluster, specs=specs
        )
    finally:
        cluster.shutdown()


def _plan_and_execute(
    args, argv, env, store, console, out, device: str, cluster=None, specs=None
) -> int:
    from runner import env as environment
    from runner.report import plan_lines

    plan = make_plan(args, device, environment.fingerprints(env), specs)
    for line in plan.dropped:
        console.print(line)
    if store is not None:
        keys = [cell.key for cell in plan.cells]
        recorded = store.latest_by_key(keys)
        # Asking for triage triages the recorded failures that have none yet, of the
        # backends the ladder can place (an export or XLA failure has no verdict to get).
        laddered = [cell.key for cell in plan.cells if backends.get(cell.config.backend).ladder]
        untriaged = store.untriaged(laddered, TRIAGED_STATUSES) if args.triage != "none" else set()
        disturbed = store.disturbed(keys, DISTURBED_RATIO) if args.retry_disturbed else set()
        one_region = store.timed_in_one_region(keys)
        timed_out = store.timed_out(keys) if args.retry_failed else {}
        crashed = store.crashed_alike(keys) if args.retry_failed else set()
        built_oom = store.out_of_memory_building(keys) if args.retry_failed else set()
        # A timeout that outlasted a time-limited run (its own --timeout not reached) is
        # rerun by a run without a time limit, whatever it ran, and by no other.
        outlasted = store.outlasted_time_limit(keys) if args.retry_failed else set()
        if args.time_limit is None:
            for key in outlasted:
                timed_out.pop(key, None)
            outlasted = set()
        plan = skip_recorded(
            plan,
            recorded,
            force=args.force,
            retry_failed=args.retry_failed,
            untriaged=untriaged,
            disturbed=disturbed,
            timed_out=timed_out,
            crowded=store.crowded(keys) if args.retry_failed else (),
            crashed_alike=crashed,
            built_oom=built_oom,
            outlasted=outlasted,
            one_region=one_region,
        )
        hung = timed_out.keys() - outlasted
        kept = [cell for cell in plan.skipped if cell.key in hung]
        if kept and not args.force:
            ran = max(timed_out[cell.key] or 0.0 for cell in kept)
            console.print(
                f"not rerunning {len(kept)} recorded timeout(s) (--retry-failed): each had "
                f"no more time than this run gives it (they ran up to {ran:.0f} s); a "
                "--timeout above that reruns them"
            )
        if outlasted and not args.force:
            console.print(
                f"not rerunning {len(outlasted)} recorded timeout(s) (--retry-failed): each "
                "outlasted a time-limited run, its own --timeout not reached; a run without "
                "--time-limit reruns them"
            )
        if crashed and not args.force:
            console.print(
                f"not rerunning {len(crashed)} recorded crash(es) (--retry-failed): each "
                "died in the same phase in its last two attempts; --force reruns them"
            )
        if built_oom and not args.force:
            console.print(
                f"not rerunning {len(built_oom)} recorded oom(s) (--retry-failed): each ran "
                "out of memory building its model, with no other process crowding it, which "
                "no smaller batch changes; --force reruns them"
            )
        if one_region and not args.force:
            # Launch-bound ones first: their speedups moved most when measured again.
            ahead = store.launch_bound(sorted(one_region))
            plan = first_in_columns(plan, ahead)
            console.print(
                f"measuring {len(one_region)} recorded "
                f"pass{'' if len(one_region) == 1 else 'es'} again: timed inside one "
                "autocast region (before 2026-12-05), their eager calls reused autocast's "
                "weight casts, so their compiled memory reads high beside cells timed per "
                "call, and launch-bound cells' speedups low"
                + (
                    f"; the {len(ahead)} launch-bound first in each column"
                    if ahead and len(ahead) < len(one_region)
                    else ""
                )
                + ' (docs/PERFORMANCE.md, "Autocast\'s scope")'
            )
        if disturbed and not args.force:
            console.print(
                f"rerunning {len(disturbed)} recorded cell(s) whose timing was disturbed "
                "(--retry-disturbed)"
            )
        if untriaged and not args.force:
            # Cells rerun for no other reason get their triage job alone, first.
            only = plan.triage_only
            plan = triage_first(
                plan, store.latest_results(sorted(only)), args.triage, args.time_limit
            )
            if too_long := plan.triage_too_long:
                console.print(
                    f"not triaging {len(too_long)} recorded failing cell(s) whose ladder would "
                    f"likely take {min(too_long.values()):.0f} s or more, past --time-limit "
                    f"{args.time_limit:g} s: their rows stand; a run given more time triages them"
                )
            if only := only - too_long.keys():
                console.print(
                    f"triaging {len(only)} recorded failing cell(s) without a triage verdict "
                    f"first (--triage {args.triage}): the ladder only, their measurements stand"
                )
            rerun = len(untriaged) - len(plan.triage_only)
            if rerun:
                console.print(
                    f"rerunning {rerun} recorded failing cell(s) without a triage verdict, "
                    f"to triage them (--triage {args.triage})"
                )
        if device == "cuda":
            plan = _with_expected_memory(plan, store, device)
    if plan.skipped:
        console.print(
            f"skipping {len(plan.skipped)} cell{'' if len(plan.skipped) == 1 else 's'} "
            f"already recorded in {args.db} "
            "(--force reruns them; --retry-failed reruns oom, crash unless it crashed alike "
            "twice, and timeouts given more --timeout)"
        )
    if args.dry_run:
        if cluster is not None:
            out.print(_cluster_line(cluster, args.workers))
            workers = sum(_node_workers(node, args.workers) for node in cluster.nodes)
            workers = min(workers, len(plan.cells))
            gpus = sum(node.stats.gpus for node in cluster.nodes)
        else:
            workers = _local_workers(args, device, env, len(plan.cells))
            gpus = int(env.get("gpu_count") or 0) if device == "cuda" else 0
        workers = max(1, workers)
        for line in plan_lines(_run_order(plan.cells, env, workers, gpus, cluster, args.workers)):
            out.print(line)
        for line in estimate_lines(plan, device, workers, gpus):
            out.print(line)
        return 0
    if not plan.cells:
        out.print("nothing to run: every planned cell is already recorded")
        return 0
    assert store is not None
    return _execute(args, argv, plan, env, store, console, out, device, cluster)


def _run_order(cells, env, workers: int, gpus: int, cluster=None, cluster_workers=None):
    """``cells`` in the order a run hands them out: spread by their memory need over a
    worker's share of its GPU (``runner.schedule.memory.spread_by_need``), the order
    the executors apply to a plan's list."""
    from runner.schedule.memory import MemoryBudget, spread_by_need

    if cluster is not None:
        from runner.cluster.executor import smallest_share

        share = smallest_share(cluster.nodes, cluster_workers)
    else:
        share = MemoryBudget(env.get("gpu_memory_gb") if gpus else None).share_gib(workers, gpus)
    return spread_by_need(list(cells), share)


def _with_expected_memory(plan, store, device: str):
    """The plan's cells, each with the GPU memory its model is expected to take where a
    cell of it has recorded a peak on ``device``, else where a model of its family has
    (``runner.schedule.memory.with_expected``), and with the wall its newest row took
    where it has one (``EXPECTED_S``: how long a cell under way is expected to hold its
    memory, ``MemoryBudget.kept_room``)."""
    from dataclasses import replace

    from runner.schedule.memory import EXPECTED_S, with_expected
    from zoo.custom import SUITE as CUSTOM

    peaks = store.peak_reserved_mb(sorted({cell.spec.id for cell in plan.cells}), device)
    # A user's modules share one family name: no kin of each other (recorded_peak_mb).
    kin = {cell.spec.family for cell in plan.cells if cell.spec.suite != CUSTOM}
    families = store.peak_reserved_mb(sorted(kin), device, by="family")
    walls = store.recorded_walls([cell.key for cell in plan.cells])
    cells = [
        replace(cell, extra={**cell.extra, EXPECTED_S: walls[cell.key]})
        if cell.key in walls
        else cell
        for cell in with_expected(plan.cells, peaks, families)
    ]
    return replace(plan, cells=cells)


def _local_workers(args, device: str, env, cells: int) -> int:
    """The workers a run on this machine starts: --workers or the machine's default, no
    more than it has cells."""
    from runner.schedule.cpus import default_workers

    return min(args.workers or default_workers(device, env), cells)


def _node_workers(node, workers: int | None) -> int:
    """The workers a Ray node starts: --workers or the node's own default."""
    return workers or node.info["default_workers"]


def _cluster_line(cluster, workers: int | None) -> str:
    nodes = ", ".join(
        f"{node.name} ({_node_workers(node, workers)} worker(s)"
        + (f", {node.stats.gpus} GPU(s))" if node.stats.gpus else ")")
        for node in cluster.nodes
    )
    return f"ray cluster at {cluster.address}: {len(cluster.nodes)} node(s): {nodes}"


def _execute(args, argv, plan: Plan, env, store, console, out, device: str, cluster=None) -> int:
    from runner import env as environment
    from runner.report import (
        InFlight,
        cell_line,
        crowd_line,
        host_line,
        make_progress,
        node_lines,
        node_table,
        reuse_line,
        summary_key,
        summary_table,
    )
    from runner.session import Placement, Session

    command = shlex.join(["zoo-run", *(sys.argv[1:] if argv is None else argv)])
    total = len(plan.cells)
    triage = None if args.triage == "none" else args.triage
    if cluster is not None:
        # Each node's own GPUs and, unless asked, its own default number of workers.
        placement = Placement(
            workers=args.workers,
            timing_cpus_per_gpu=args.timing_cpus,
            quiet_timing=args.quiet_timing,
            compile_threads=args.compile_threads,
            triage=triage,
        )
        where = _cluster_line(cluster, args.workers)
    else:
        gpus = environment.gpu_uuids() if device == "cuda" else []
        workers = _local_workers(args, device, env, total)
        # On the CPU the timed calls and the neighbours' compiles share the same cores:
        # without stopping them, timings of parallel workers are far off the serial ones
        # (docs/logs/throughput_cpu_quiet_timing.txt); with it, within a few percent.
        quiet_timing = args.quiet_timing or (device == "cpu" and workers > 1)
        placement = Placement(
            workers=workers,
            gpus=tuple(gpus),
            timing_cpus_per_gpu=args.timing_cpus,
            quiet_timing=quiet_timing,
            compile_threads=args.compile_threads,
            triage=triage,
            gpu_memory_gib=env.get("gpu_memory_gb") if gpus else None,
        )
        where = f"{workers} worker(s){' (quiet timing)' if quiet_timing and workers > 1 else ''}"
    session = Session(store, env, device, label=args.label, command=command, zoo_version=_version())
    progress = make_progress(console)
    task = progress.add_task("starting", total=total)
    # A cluster run: a line per node under the run's, each with its cells and ETA.
    node_tasks = {}
    if cluster is not None:
        for node in cluster.nodes:
            node_tasks[node.name] = progress.add_task(f"  {node.name} · waiting", total=None)
    node_of: dict[str, str] = {}
    running = InFlight()
    done = 0

    def describe(cell, what: str) -> None:
        node = node_of.get(cell.key)
        if node is None:
            running.phase(cell.key, f"{cell.describe()} · {what}")
            progress.update(task, description=running.line())
        else:
            progress.update(node_tasks[node], description=f"  {node} · {cell.describe()} · {what}")

    def on_node(cell, node: str) -> None:
        node_of[cell.key] = node

    def on_result(result):
        nonlocal done
        done += 1
        progress.advance(task)
        node = node_of.pop(result.cell_key, None)
        if running.finish(result.cell_key) and cluster is None:
            progress.update(task, description=running.line())
        if node is None and cluster is not None:
            node = _node_named_in(result.notes)
        line = cell_line(result, done, total)
        progress.console.print(f"{line} · {node}" if node else line)
        if cluster is not None:
            progress.update(
                task, description=f"{done} of {total} cells on {len(cluster.nodes)} nodes"
            )
            _share_out(progress, node_tasks, cluster, total - done)

    def on_started(run_id: str) -> None:
        console.print(f"run {run_id} · {total} cells · {device} · {where} · database {args.db}")

    with progress:
        outcome = session.run(
            plan.cells,
            placement,
            on_start=lambda cell: describe(cell, "starting"),
            on_phase=describe,
            on_result=on_result,
            on_started=on_started,
            on_note=console.print,
            retry=smaller_batch,
            stop_after_s=(
                None
                if args.time_limit is None
                else max(0.0, args.time_limit - (time.monotonic() - args.entered))
            ),
            cluster=cluster,
            on_node=on_node,
            wrap_up_s=args.wrap_up,
        )
    results = outcome.results
    out.print(summary_table(results, [summary_key(c.device, c.config) for c in plan.cells]))
    if outcome.nodes:
        out.print(node_table(outcome.nodes))
    out.print(
        f"{len(results)} of {total} cells recorded in {outcome.elapsed_s / 60:.1f} min · "
        f"run {outcome.run_id}" + (f" · label {args.label}" if args.label else "") + f" · {args.db}"
    )
    if outcome.usage is not None and (summary := outcome.usage.summary()):
        # What limited the run: the cores (compiling) or a GPU's lock (timing).
        out.print(summary)
    if reused := reuse_line(results):
        out.print(reused)
    if crowded := crowd_line(results):
        out.print(crowded)
    if host := host_line(results):
        out.print(host)
    for line in node_lines(outcome.nodes):
        out.print(line)
    if outcome.interrupted:
        if outcome.reason:
            out.print(outcome.reason)
        stopped_by = outcome.stopped_by
        out.print(
            f"interrupted{f' by {stopped_by.name}' if stopped_by else ''}: "
            f"{total - len(results)} cells not recorded; "
            "the same command resumes where this one stopped"
        )
        return outcome.exit_code or 130
    if len(results) < total:
        why = (
            f"wrapped up on SIGUSR1 (--wrap-up {args.wrap_up:g} s)"
            if outcome.wrapped_up
            else f"time limit of {args.time_limit:g} s reached"
        )
        stopped = outcome.stopped
        started = f", {len(stopped)} of them stopped at the wrap-up's end" if stopped else ""
        out.print(
            f"{why}: {total - len(results)} cells not recorded{started}; the same command "
            "resumes with them"
        )
        if stopped:
            out.print("stopped (still under way at the wrap-up's end): " + ", ".join(stopped))
    return 0


def _node_named_in(notes: str | None) -> str | None:
    """The node a cluster result names in its notes (a cell recorded for a lost node)."""
    marker = "ran on ray node "
    if not notes or marker not in notes:
        return None
    return notes.rsplit(marker, 1)[1].split(";")[0].strip()


def _share_out(progress, node_tasks, cluster, left: int) -> None:
    """Each node's line: its cells done, and as its total those plus the share of the
    cells left that its speed will take (nodes pull cells, so they end together): the
    bar's ETA is then that node's."""
    rates = {node.name: node.stats.cells_per_hour() or 0.0 for node in cluster.nodes}
    alive = {node.name for node in cluster.nodes if node.stats.lost is None}
    speed = sum(rate for name, rate in rates.items() if name in alive)
    for node in cluster.nodes:
        task = node_tasks[node.name]
        share = left * rates[node.name] / speed if speed and node.name in alive else 0
        progress.update(task, completed=node.stats.cells, total=node.stats.cells + share)
        if node.stats.lost is not None:
            progress.update(task, description=f"  {node.name} · lost: {node.stats.lost}")
        elif left == 0:
            progress.update(task, description=f"  {node.name} · done")


def _console(stderr: bool):
    """A rich console; logs (no terminal) get wide lines rather than wrapped tables.
    Markup is off: what it prints holds paths, model ids and error messages, whose
    brackets are text."""
    from rich.console import Console

    console = Console(stderr=stderr, highlight=False, markup=False)
    if not console.is_terminal:
        console = Console(stderr=stderr, highlight=False, markup=False, width=160)
    return console


def _version() -> str:
    try:
        return metadata.version("zoo-matrix")
    except metadata.PackageNotFoundError:
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
