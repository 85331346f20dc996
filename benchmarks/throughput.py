"""Sweep throughput: serial cells (a fresh process each, nothing overlapping) against the
parallel runner (N workers compiling at once, timing under the per-GPU lock).

Each phase fits one call of the GPU machine (10 minutes): run them separately, then
combine. Prints cells/hour of each, their ratio, and how well per-cell speedups agree.

    python benchmarks/throughput.py --phase serial   --out OUT --limit-s 500
    python benchmarks/throughput.py --phase parallel --out OUT --workers 8
    python benchmarks/throughput.py --phase parallel --out OUT --workers 8 --timing-cpus 2
    python benchmarks/throughput.py --phase parallel --out OUT --workers 8 --quiet-timing
    python benchmarks/throughput.py --phase parallel --out OUT --workers 8 --timing-s 0.5
    python benchmarks/throughput.py --phase report   --out OUT

The parallel phase runs the cells the serial phase got through (``--all-cells``: every
planned cell, for a steady rate beyond a dozen cells' tail of slow compiles) on every GPU
CUDA_VISIBLE_DEVICES leaves visible. ``--timing-cpus N`` keeps N cores free of compiling
workers for the timing, and ``--timing-s S`` times each cell in an S-second window
instead of the protocol's (zoo-run's options of the same names). Each parallel variant
(GPU count, reserved cores, timing window, all cells) is written to its own file and the
report compares every one with the serial phase (run the serial phase with one GPU),
and runs on several GPUs (or GPU slots) also with the one-GPU parallel run.
``--slots-per-gpu 2`` runs the multi-GPU code path on one GPU: workers pinned to two
slots of the same GPU, which share its lock. ``--db PATH`` also records each phase's cells as a run (label
``throughput-<phase>``) in a zoo-matrix database, so that the GPU time a benchmark
takes also yields results (``zoo-export`` them to ship).
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import time
from pathlib import Path

from runner.cli.run import _positive

DEFAULT_MODELS = (
    "resnet18,resnet50,resnet101,vit_base_patch16_224,deit_small_patch16_224,convnext_tiny,"
    "efficientnet_b0,regnety_016,mobilenetv3_large_100,swin_tiny_patch4_window7_224,"
    "densenet121,inception_v3"
)


def _cells(args):
    import torch

    from runner import env as environment
    from runner.plan import PlanOptions, plan_cells
    from zoo.catalog import select

    device = "cuda" if torch.cuda.is_available() else "cpu"
    options = PlanOptions(
        backends=tuple(args.backends.split(",")),
        modes=tuple(args.modes.split(",")),
        dynamic=("false",),
        precisions=(args.precision or ("bf16" if device == "cuda" else "fp32"),),
        steps=("infer",),
        device=device,
        timing_s=args.timing_s,
    )
    env = environment.capture(device)
    cells = plan_cells(select(args.models.split(",")), options, environment.fingerprints(env)).cells
    return cells, env, device


class _PhaseClock:
    """Each cell's seconds in each phase its worker reported: ``starting`` from its
    submission until the worker reports (a fresh worker imports torch meanwhile),
    ``waiting for the GPU`` while it waits for its GPU's lock, then the measurement's
    steps (build, reference, eager, compile, accuracy, timing, memory, probe, breaks).
    Phases are seen when the runner polls (every 50 ms): a shorter one counts in the
    phase before it."""

    def __init__(self) -> None:
        self._cells: dict[str, tuple[str, float, dict[str, float]]] = {}

    def start(self, cell) -> None:
        self._cells[cell.key] = ("starting", time.monotonic(), {})

    def phase(self, cell, phase: str) -> None:
        if cell.key in self._cells:
            self._cells[cell.key] = (phase, *self._close(cell.key))

    def finish(self, key: str) -> dict[str, float]:
        if key not in self._cells:
            return {}
        _, totals = self._close(key)
        del self._cells[key]
        return {phase: round(seconds, 2) for phase, seconds in totals.items()}

    def _close(self, key: str) -> tuple[float, dict[str, float]]:
        phase, since, totals = self._cells[key]
        now = time.monotonic()
        totals[phase] = totals.get(phase, 0.0) + now - since
        return now, totals


def _run_phase(args) -> None:
    from runner import env as environment
    from runner.session import Placement, Session

    cells, env, device = _cells(args)
    # The GPUs CUDA_VISIBLE_DEVICES leaves visible (CUDA_VISIBLE_DEVICES=0 for one of two).
    gpus = environment.gpu_uuids() if device == "cuda" else []
    # Each GPU as several slots: the multi-GPU code path (a worker pinned per slot, one
    # lock per GPU UUID, shared by its slots) on a machine with one GPU.
    slots = [gpu for gpu in gpus for _ in range(args.slots_per_gpu)]
    name = _phase_name(args, len(gpus))
    path = args.out / f"{name}.json"
    records = []  # one per cell, as it finishes
    clock = _PhaseClock()
    started = time.monotonic()
    started_wall = time.time()
    outcome = None
    serial = args.phase == "serial"

    def record(result=None) -> None:
        """Written after every cell, so that a call cut short keeps what it measured."""
        if result is not None:
            finished_s = round(time.monotonic() - started, 2)
            steps = clock.finish(result.cell_key)
            records.append({**_cell_record(result), "phase_s": steps, "finished_s": finished_s})
        phase = {
            "phase": name,
            "gpus": len(gpus),
            "gpu_uuids": gpus,
            "gpu_slots": len(slots),
            "workers": 1 if serial else args.workers,
            "timing_cpus": 0 if serial else args.timing_cpus,
            "elapsed_s": time.monotonic() - started,
            "interrupted": outcome is not None and outcome.interrupted,
            # What bounded the phase (runner.schedule.usage): cores busy, each GPU lock's
            # holds.
            "usage": outcome.usage.to_dict() if outcome and outcome.usage else None,
            "cells": records,
        }
        path.write_text(json.dumps(phase, indent=1))

    if serial:
        # One cell at a time, each in a fresh process, with the GPU's lock as zoo-run
        # takes it: alone, its holds say how long timing and autotuning take undisturbed.
        todo, placement = cells, Placement(workers=1, gpus=tuple(gpus[:1]), reuse_workers=False)
    else:
        keep = None if args.all_cells else _serial_keys(args.out)
        todo = [c for c in cells if keep is None or c.key in keep]
        placement = Placement(
            workers=args.workers,
            gpus=tuple(slots),
            timing_cpus_per_gpu=args.timing_cpus,
            quiet_timing=args.quiet_timing,
        )
    # The benchmark's cells are results like any sweep's (the serial phase's timings are
    # undisturbed ones), recorded as a run labelled throughput-<phase> with --db.
    store = None
    if args.db:
        from runner.store.db import Store

        store = Store.open(args.db)
    session = Session(
        store,
        env,
        device,
        label=f"throughput-{name}",
        command=shlex.join(["python", *sys.argv]),
    )
    # The cells in flight at an interrupt are lost: the rate of an interrupted phase
    # reads low.
    outcome = session.run(
        todo,
        placement,
        on_start=clock.start,
        on_phase=clock.phase,
        on_result=record,
        stop_after_s=args.limit_s if serial else None,
    )
    _keep_holds(outcome.holds, args.out / f"{name}.holds.log", started_wall)
    record()
    note = " (interrupted)" if outcome.interrupted else ""
    print(f"{args.phase}: {len(records)} cells in {outcome.elapsed_s:.0f} s{note} -> {path}")
    if outcome.usage is not None:
        print(outcome.usage.summary())


def _keep_holds(holds, path: Path, since: float) -> None:
    """Every lock hold of the phase's workers, one line each, ``WORKER LOCK KIND START
    END`` (times in seconds from the phase's start), in order of start: each lock's
    timeline (when it stood idle, who held it how long), which the report sums per
    window."""
    ordered = sorted(
        (start - since, end - since, worker, key, kind) for worker, key, kind, start, end in holds
    )
    path.write_text("".join(f"{w} {key} {k} {s:.3f} {e:.3f}\n" for s, e, w, key, k in ordered))


def _lock_timeline(out: Path, window_s: float = 30.0) -> None:
    """Per phase with a holds log: the share of each ``window_s`` its GPU lock was held
    (any kind; with several GPUs, the mean over their locks): where a run left it idle."""
    from runner.schedule.usage import covered_s

    logs = sorted(out.glob("*.holds.log"))
    if not logs:
        return
    print(f"\nGPU lock held, share of each {window_s:.0f} s from the phase's start")
    for log in logs:
        spans: dict[str, list[tuple[float, float]]] = {}
        for line in log.read_text().splitlines():
            parts = line.split()
            if len(parts) == 5:
                spans.setdefault(parts[1], []).append((float(parts[3]), float(parts[4])))
        if not spans:
            continue
        end = max(e for held in spans.values() for _, e in held)
        shares = []
        for index in range(int(end // window_s) + 1):
            low, high = index * window_s, (index + 1) * window_s
            covered = [
                covered_s([(max(s, low), min(e, high)) for s, e in held if e > low and s < high])
                for held in spans.values()
            ]
            shares.append(sum(covered) / len(covered) / window_s)
        cells = " ".join(f"{share:4.0%}" for share in shares)
        print(f"{log.name.removesuffix('.holds.log')[:32]:32} {cells}")


def _phase_name(args, gpus: int) -> str:
    """``serial``; ``parallel`` with the GPU count beyond one and the reserved cores."""
    tag = f"-{args.tag}" if args.tag else ""
    if args.phase == "serial":
        return "serial" + tag
    name = "parallel" if gpus <= 1 else f"parallel-{gpus}gpus"
    if args.slots_per_gpu > 1 and gpus:
        name += f"-{args.slots_per_gpu}slots-per-gpu"
    if args.timing_cpus:
        name += f"-timing-cpus{args.timing_cpus}"
    if args.quiet_timing:
        name += "-quiet-timing"
    if args.timing_s is not None:
        name += f"-timing-s{args.timing_s:g}"
    return (name + "-all-cells" if args.all_cells else name) + tag


def _serial_keys(out: Path) -> set[str] | None:
    """The parallel phase runs the cells the serial phase got through, when it exists."""
    path = out / "serial.json"
    if not path.exists():
        return None
    return {cell["key"] for cell in json.loads(path.read_text())["cells"]}


def _report(out: Path) -> None:
    from runner.schedule.usage import Usage

    serial = json.loads((out / "serial.json").read_text())
    repeats = [json.loads(path.read_text()) for path in sorted(out.glob("serial-*.json"))]
    variants = [json.loads(path.read_text()) for path in sorted(out.glob("parallel*.json"))]
    for path, phase in zip(sorted(out.glob("serial-*.json")), repeats, strict=True):
        phase["phase"] = path.stem  # files of a repeat made before --tag named it "serial"
    phases = (serial, *repeats, *variants)
    print(
        f"{'phase':32} {'gpus':>4} {'workers':>7} {'cells':>6} {'cells/hour':>11} "
        f"{'steady/hour':>12}"
    )
    for phase in phases:
        cut = "  (interrupted: cells in flight lost)" if phase.get("interrupted") else ""
        print(
            f"{phase['phase']:32} {phase.get('gpus', 1):4d} {phase['workers']:7d} "
            f"{len(phase['cells']):6d} {_per_hour(phase):11.0f} {_steady(phase):>12}{cut}"
        )
    for phase in phases:
        if quality := _timing_quality(phase):
            print(f"{phase['phase']}: {quality}")
        if used := phase.get("usage"):
            # Records written before usage kept the lock wait: from the cells' steps.
            used = {"lock_wait": _lock_wait(phase["cells"]), **used}
            print(f"{phase['phase']}: {Usage.from_dict(used).summary()}")
    together = _serial_together(serial, repeats)
    for phase in repeats:
        if together is not None and any(phase is part for part in together["joined"]):
            continue  # more cells, not the same ones again
        print(f"\n{phase['phase']}: the serial phase again (its own noise)")
        _agreement(phase, serial, "serial")
    # The one-GPU baseline of multi-GPU runs: the plain one-GPU parallel run with the most
    # cells (``parallel`` or ``parallel-all-cells``; not one with reserved cores or quiet
    # timing, which change the timing on purpose).
    plain = [
        p
        for p in variants
        if p.get("gpu_slots", 1) <= 1 and not p.get("timing_cpus") and "quiet" not in p["phase"]
    ]
    one_gpu = max(plain, key=lambda p: len(p["cells"]), default=None)
    for phase in variants:
        print()
        _compare(phase, serial, "the serial cells/hour", "serial")
        if together is not None:
            rate_of = f"the cells/hour of {together['phase']} ({len(together['cells'])} cells)"
            _compare(phase, together, rate_of, together["phase"])
        # Calls of one session can land on different hosts of one kind, whose serial
        # rates differ (113 and 100 cells/hour on two H200 hosts): compare like with like.
        same = _same_gpus(phase, repeats)
        if same is not None and not _same_gpus(phase, [serial]):
            _compare(phase, same, f"the cells/hour of {same['phase']} (its GPU)", same["phase"])
        if one_gpu is not None and phase is not one_gpu and phase.get("gpu_slots", 1) > 1:
            _agreement(phase, one_gpu, "one-GPU parallel")
    _phase_table(phases)
    _lock_table(phases)
    _lock_timeline(out)
    _cell_table(serial, phases)


def _serial_together(serial: dict, repeats: list[dict]) -> dict | None:
    """The serial phase and its extensions as one serial phase: the serial records of
    other cells (``--tag b --models ...``, one call could not reach them) on the same
    GPUs. None without such a record. A repeat of cells already measured is noise, not
    more cells, and a record of other GPUs another host's rate: neither joins."""
    seen = {cell["key"] for cell in serial["cells"]}
    joined = [serial]
    for phase in repeats:
        keys = {cell["key"] for cell in phase["cells"]}
        if keys and not keys & seen and phase.get("gpu_uuids") == serial.get("gpu_uuids"):
            joined.append(phase)
            seen |= keys
    if len(joined) == 1:
        return None
    return {
        "phase": "+".join(p["phase"] for p in joined),
        "joined": joined,
        "workers": 1,
        "gpu_uuids": serial.get("gpu_uuids"),
        "elapsed_s": sum(p["elapsed_s"] for p in joined),
        "cells": [cell for p in joined for cell in p["cells"]],
    }


def _compare(phase: dict, baseline: dict, rate_of: str, name: str) -> None:
    """``phase``'s cells/hour as a multiple of ``baseline``'s (over the whole run, and with
    the pipeline full where known), and its per-cell agreement with it."""
    base = _per_hour(baseline)
    print(f"{phase['phase']}: {_per_hour(phase) / base:.2f}x {rate_of}")
    if (steady := _steady_per_hour(phase)) is not None:
        print(f"{phase['phase']}: with the pipeline full, {steady / base:.2f}x")
    _agreement(phase, baseline, name)


def _same_gpus(phase: dict, candidates: list[dict]) -> dict | None:
    """The first of ``candidates`` that ran on the same GPUs as ``phase`` (UUIDs)."""
    uuids = phase.get("gpu_uuids")
    return next((c for c in candidates if uuids and c.get("gpu_uuids") == uuids), None)


def _phase_table(phases: tuple[dict, ...]) -> None:
    """Where a worker's time went: seconds per cell in each phase, mean over the cells
    (a phase that waits for the GPU or takes longer than serially points at what bounds
    the rate: the lock, or the cores shared by compiling workers)."""
    timed = [p for p in phases if any(c.get("phase_s") for c in p["cells"])]
    if not timed:
        return
    names: list[str] = []
    for phase in timed:
        for cell in phase["cells"]:
            names += [n for n in cell.get("phase_s") or {} if n not in names]
    print("\nworker seconds per cell in each step (mean over the phase's cells)")
    print(f"{'step':22} " + " ".join(f"{p['phase'][:24]:>24}" for p in timed))
    for name in [*names, "all"]:
        row = []
        for phase in timed:
            cells = [c["phase_s"] for c in phase["cells"] if c.get("phase_s")]
            total = sum(sum(c.values()) if name == "all" else c.get(name, 0.0) for c in cells)
            row.append(f"{total / len(cells):24.1f}")
        print(f"{name[:22]:22} " + " ".join(row))


def _lock_table(phases: tuple[dict, ...]) -> None:
    """Seconds of GPU lock a cell took in each phase, per kind of hold (overlapping shared
    holds counted once), and the cells/hour the lock allows when busy all the time: the
    ceiling of a parallel sweep bound by it."""
    held = [p for p in phases if (p.get("usage") or {}).get("lock_held_s") and p["cells"]]
    if not held:
        return
    print("\nGPU lock seconds per cell (all GPUs' locks; overlapping shared holds once)")
    print(f"{'hold':22} " + " ".join(f"{p['phase'][:24]:>24}" for p in held))
    per_cell = []
    for phase in held:
        kinds: dict[str, float] = {}
        for by_kind in phase["usage"]["lock_held_s"].values():
            for kind, seconds in by_kind.items():
                kinds[kind] = kinds.get(kind, 0.0) + seconds
        per_cell.append({k: v / len(phase["cells"]) for k, v in kinds.items()})
    for kind in ("timing", "tuning", "untimed"):
        print(f"{kind:22} " + " ".join(f"{c.get(kind, 0.0):24.2f}" for c in per_cell))
    totals = [sum(c.values()) for c in per_cell]
    print(f"{'all':22} " + " ".join(f"{t:24.2f}" for t in totals))
    print(
        f"{'cells/hour at 100%':22} "
        + " ".join(
            f"{3600 * max(1, p.get('gpus', 1)) / t:24.0f}"
            for p, t in zip(held, totals, strict=True)
        )
    )


def _cell_table(serial: dict, phases: tuple[dict, ...]) -> None:
    """Each serial cell's speedup and median eager / compiled ms in every phase."""
    print("\nper serial cell: speedup (eager ms / compiled ms, medians) in each phase")
    names = [phase["phase"] for phase in phases]
    print(f"{'cell':40} " + " ".join(f"{name[:24]:>24}" for name in names))
    by_phase = [{c["key"]: c for c in phase["cells"]} for phase in phases]
    for cell in serial["cells"]:
        row = []
        for cells in by_phase:
            other = cells.get(cell["key"])
            if other and other["speedup"]:
                row.append(
                    f"{other['speedup']:.2f} ({other['eager_ms']:.2f}/{other['compiled_ms']:.2f})"
                )
            else:
                row.append("-")
        label = f"{cell['model'].split('/')[-1][:24]} {cell['mode']}"
        print(f"{label:40} " + " ".join(f"{text:>24}" for text in row))


def _agreement(phase: dict, baseline: dict, name: str) -> None:
    """Per-cell speedups of ``phase`` against ``baseline`` over the cells both ran: of the
    medians (the recorded speedup) and, where recorded, of the fastest samples."""
    by_key = {c["key"]: c for c in baseline["cells"]}
    pairs = [(cell, by_key[cell["key"]]) for cell in phase["cells"] if cell["key"] in by_key]
    statuses = sum(cell["status"] != other["status"] for cell, other in pairs)
    for label, speedup in (
        ("speedup", lambda cell: cell["speedup"]),
        ("fastest-sample speedup (eager fastest / compiled fastest)", _fastest_speedup),
    ):
        differences = [
            (abs(speedup(cell) / speedup(other) - 1), (cell["model"], cell.get("mode", "")))
            for cell, other in pairs
            if speedup(cell) and speedup(other)
        ]
        if differences:
            worst, worst_cell = max(differences)
            median = statistics.median(d for d, _ in differences)
            modes = sorted({mode for _, (_, mode) in differences})
            by_mode = ", ".join(
                f"{mode} {statistics.median(d for d, c in differences if c[1] == mode):.1%}"
                for mode in modes
            )
            print(
                f"against {name}, over {len(differences)} cells: {label} median relative "
                f"difference {median:.1%}"
                + (f" ({by_mode})" if len(modes) > 1 else "")
                + f", largest {worst:.1%} ({worst_cell[0]} {worst_cell[1]})"
            )
    print(f"against {name}: status differences: {statuses}")


def _fastest_speedup(cell: dict) -> float | None:
    eager, compiled = cell.get("eager_fastest_ms"), cell.get("compiled_fastest_ms")
    return eager / compiled if eager and compiled else None


def _cell_record(result) -> dict:
    """What the phase's record keeps of a cell's result."""
    eager_fastest = min(result.eager_samples_ms or [0]) or None
    compiled_fastest = min(result.compiled_samples_ms or [0]) or None
    # How far the cell's slower-to-settle side sits above its fastest sample: a median
    # over its fastest (about 1.01 on a quiet GPU and host).
    ratios = [
        median / fastest
        for median, fastest in (
            (result.eager_ms, eager_fastest),
            (result.compiled_ms, compiled_fastest),
        )
        if median and fastest and fastest > 0
    ]
    return {
        "key": result.cell_key,
        "model": result.model_id,
        "mode": result.mode,
        "status": result.status,
        "speedup": result.speedup,
        "eager_ms": result.eager_ms,
        "compiled_ms": result.compiled_ms,
        "eager_fastest_ms": eager_fastest,
        "compiled_fastest_ms": compiled_fastest,
        "disturbance": max(ratios) if ratios else None,
        "compile_s": result.compile_s,
        "wall_s": result.wall_s,
    }


def _timing_quality(phase: dict) -> str:
    values = [c["disturbance"] for c in phase["cells"] if c.get("disturbance")]
    if not values:
        return ""
    above = sum(v > 1.2 for v in values)
    return (
        f"timing: median over fastest sample, worse side: median {statistics.median(values):.2f}, "
        f"max {max(values):.2f}, {above} of {len(values)} cells above 1.2"
    )


def _lock_wait(cells: list[dict]) -> float | None:
    """The share of the cells' time (submission to result) spent waiting for a GPU lock."""
    from runner.matrix.phases import WAITING as WAITING_PHASE

    steps = [cell["phase_s"] for cell in cells if cell.get("phase_s")]
    total = sum(sum(s.values()) for s in steps)
    return sum(s.get(WAITING_PHASE, 0.0) for s in steps) / total if total else None


def _per_hour(phase: dict) -> float:
    return len(phase["cells"]) / phase["elapsed_s"] * 3600


def _steady_per_hour(phase: dict) -> float | None:
    """Cells/hour with the pipeline full: between the W-th cell's end and the W-th last
    one's (W workers), leaving out the start, when every worker imports and compiles and
    none times yet, and the tail, when fewer cells than workers are left. A sweep of
    thousands of cells runs at about this rate. None for one worker (nothing to fill),
    fewer than 3W cells, or records without end times."""
    workers = phase.get("workers", 1)
    ends = sorted(c["finished_s"] for c in phase["cells"] if c.get("finished_s") is not None)
    if workers <= 1 or len(ends) < 3 * workers or len(ends) < len(phase["cells"]):
        return None
    first, last = ends[workers - 1], ends[len(ends) - workers - 1]
    return (len(ends) - 2 * workers) / (last - first) * 3600 if last > first else None


def _steady(phase: dict) -> str:
    rate = _steady_per_hour(phase)
    return f"{rate:.0f}" if rate is not None else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase", choices=("serial", "parallel", "report"), required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--backends", default="inductor")
    parser.add_argument("--modes", default="default")
    parser.add_argument("--precision", default=None)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--timing-cpus", type=int, default=0)
    parser.add_argument(
        "--quiet-timing",
        action="store_true",
        help="parallel: stop the other workers while a cell times (zoo-run's option)",
    )
    parser.add_argument(
        "--all-cells",
        action="store_true",
        help="parallel: every planned cell, not only those the serial phase got through "
        "(a dozen cells end in a tail of the slowest compiles; more cells measure the "
        "steady rate). Speedups are compared over the cells both phases ran",
    )
    parser.add_argument(
        "--slots-per-gpu",
        type=int,
        default=1,
        help="parallel: treat each GPU as this many GPU slots (workers pinned per slot, "
        "one lock per GPU): the multi-GPU code path on one GPU",
    )
    parser.add_argument(
        "--timing-s",
        type=_positive(float),
        default=None,
        help="parallel: each cell's timing window (zoo-run's --timing-s; default the "
        "protocol's); set against the serial phase, timed in the protocol's, the report "
        "says whether a shorter window keeps the agreement",
    )
    parser.add_argument("--limit-s", type=float, default=500.0)
    parser.add_argument(
        "--db",
        type=Path,
        default=None,
        help="also record the phase's cells as a run (label throughput-<phase>) in this "
        "zoo-matrix database, for zoo-export and the dashboard",
    )
    parser.add_argument(
        "--tag",
        default="",
        help="appended to the phase's name (its file): a repeat of a phase, e.g. "
        "'--phase serial --tag again', which the report compares with the first (how "
        "far two runs of the same cells agree when nothing differs)",
    )
    args = parser.parse_args()
    if args.timing_s is not None and args.phase != "parallel":
        parser.error(
            "--timing-s is for a parallel phase: the serial one keeps the protocol's "
            "window, the reference the report compares with"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    if args.phase == "report":
        _report(args.out)
    else:
        _run_phase(args)


if __name__ == "__main__":
    main()
