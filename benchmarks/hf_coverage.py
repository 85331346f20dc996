"""How many HuggingFace architectures zoo-matrix can build and feed: one eager forward each.

Builds every listed ``hf/*`` model (tiny by default) on the CPU, makes its example
inputs and runs one forward pass under ``torch.no_grad``. Models run in a pool of
worker processes; a model that hangs past ``--timeout`` or kills its worker is recorded
as such and the worker replaced. Prints the count of each outcome and the commonest
error signatures:

    python benchmarks/hf_coverage.py                 # every architecture, tiny
    python benchmarks/hf_coverage.py --models '*Bert*' --json coverage.json
    python benchmarks/hf_coverage.py --tasks multiple-choice,object-detection
"""

from __future__ import annotations

import argparse
import collections
import fnmatch
import json
import multiprocessing
import os
import sys
import time
import traceback
from dataclasses import replace
from multiprocessing.connection import Connection, wait
from pathlib import Path

# Importable as a script from anywhere: the project root holds the zoo and runner packages.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PASS = "pass"
# A worker serves this many models, then is replaced, so leaks of one model stay small.
MODELS_PER_WORKER = 50


def run_one(name: str, size: str, batch: int, seq_len: int) -> dict[str, object]:
    """Build ``hf/<name>``, make its inputs, run one eager forward; the outcome as a dict."""
    import torch

    from runner.measure.failure import signature
    from zoo.hf_suite import list_specs

    spec = next(spec for spec in list_specs() if spec.name == name)
    spec = replace(spec, size=size, device="cpu")
    outcome: dict[str, object] = {"name": name, "family": spec.family, "task": spec.task}
    step = "build_error"
    started = time.perf_counter()
    try:
        model = spec.build().eval()
        outcome["params"] = sum(p.numel() for p in model.parameters())
        step = "inputs_error"
        inputs = spec.example_inputs(batch, "cpu", seq_len)
        step = "eager_error"
        with torch.no_grad():
            outputs = model(*inputs)
        if not outputs:
            raise RuntimeError("the model returned no tensor")
        outcome["nan_output"] = any(not torch.isfinite(t.float()).all() for t in outputs)
        outcome["outcome"] = PASS
    except Exception as exc:
        outcome["outcome"] = step
        outcome["signature"] = signature(exc)
        outcome["traceback"] = "".join(traceback.format_exception(exc)[-3:])[-1500:]
    outcome["seconds"] = round(time.perf_counter() - started, 2)
    return outcome


def _serve(conn: Connection, size: str, batch: int, seq_len: int) -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    while True:
        name = conn.recv()
        if name is None:
            return
        conn.send(run_one(name, size, batch, seq_len))


class _Worker:
    def __init__(self, context, size: str, batch: int, seq_len: int) -> None:
        self.conn, child = context.Pipe()
        self.process = context.Process(
            target=_serve, args=(child, size, batch, seq_len), daemon=True
        )
        self.process.start()
        child.close()
        self.name: str | None = None
        self.deadline = 0.0
        self.served = 0

    def give(self, name: str, timeout_s: float) -> None:
        self.name, self.deadline = name, time.monotonic() + timeout_s
        self.served += 1
        self.conn.send(name)

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.conn.close()


def run_all(
    names: list[str], jobs: int, timeout_s: float, size: str, batch: int, seq_len: int
) -> list[dict[str, object]]:
    context = multiprocessing.get_context("spawn")
    todo = collections.deque(names)
    results: list[dict[str, object]] = []
    workers = [_Worker(context, size, batch, seq_len) for _ in range(min(jobs, len(names)))]
    idle = list(workers)
    busy: list[_Worker] = []

    def finish(worker: _Worker, outcome: dict[str, object], replace_worker: bool) -> None:
        results.append(outcome)
        busy.remove(worker)
        print(f"[{len(results)}/{len(names)}] {outcome['name']}: {_line(outcome)}", flush=True)
        if replace_worker or worker.served >= MODELS_PER_WORKER:
            worker.stop()
            worker = _Worker(context, size, batch, seq_len)
        idle.append(worker)

    while todo or busy:
        while idle and todo:
            worker = idle.pop()
            worker.give(todo.popleft(), timeout_s)
            busy.append(worker)
        now = time.monotonic()
        timeout = max(0.0, min(w.deadline for w in busy) - now)
        ready = wait([w.conn for w in busy], timeout=timeout)
        for worker in list(busy):
            if worker.conn in ready:
                try:
                    finish(worker, worker.conn.recv(), replace_worker=False)
                except EOFError:
                    code = worker.process.exitcode
                    finish(worker, _died(worker.name, "crash", f"exit code {code}"), True)
            elif time.monotonic() >= worker.deadline:
                finish(worker, _died(worker.name, "timeout", f"over {timeout_s:.0f} s"), True)
    for worker in idle:
        worker.conn.send(None)
        worker.process.join(timeout=10)
        worker.stop()
    return results


def _died(name: str | None, outcome: str, why: str) -> dict[str, object]:
    return {"name": name, "outcome": outcome, "signature": f"{outcome}: {why}"}


def _line(outcome: dict[str, object]) -> str:
    if outcome["outcome"] == PASS:
        return "pass" + (" (non-finite output)" if outcome.get("nan_output") else "")
    return f"{outcome['outcome']}: {outcome.get('signature')}"


def report(results: list[dict[str, object]], top: int) -> str:
    total = len(results)
    outcomes = collections.Counter(str(r["outcome"]) for r in results)
    passed = outcomes[PASS]
    lines = [f"{passed}/{total} architectures ran an eager forward ({100 * passed / total:.1f}%)"]
    lines += [f"  {name:14} {count}" for name, count in outcomes.most_common()]
    non_finite = sum(1 for r in results if r.get("nan_output"))
    if non_finite:
        lines.append(f"  ({non_finite} of the passes returned NaN or inf)")
    signatures = collections.Counter(
        (str(r["outcome"]), str(r["signature"])) for r in results if r["outcome"] != PASS
    )
    lines.append("by task (pass / listed):")
    lines += _task_lines(results)
    lines.append(f"top {top} error signatures:")
    lines += [
        f"  {count:4}  {outcome}: {sig}" for (outcome, sig), count in signatures.most_common(top)
    ]
    return "\n".join(lines)


def _task_lines(results: list[dict[str, object]]) -> list[str]:
    """Per task, most listed first: passes, the count listed, and the failures by kind."""
    by_task: dict[str, collections.Counter[str]] = {}
    for r in results:
        by_task.setdefault(str(r.get("task")), collections.Counter())[str(r["outcome"])] += 1
    lines = []
    for task, outcomes in sorted(by_task.items(), key=lambda item: -item[1].total()):
        failures = ", ".join(f"{n} {kind}" for kind, n in outcomes.most_common() if kind != PASS)
        row = f"  {task:32} {outcomes[PASS]:4} / {outcomes.total():<4}"
        lines.append(f"{row} {failures}".rstrip())
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--models", default="*", help="globs on the class name, comma-separated (default: all)"
    )
    parser.add_argument(
        "--tasks", default=None, help="only these tasks, comma-separated (default: every task)"
    )
    parser.add_argument("--size", choices=("tiny", "full"), default="tiny")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per model")
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=16)
    parser.add_argument("--top", type=int, default=20, help="error signatures shown")
    parser.add_argument("--json", type=Path, default=None, help="write every outcome here")
    args = parser.parse_args(argv)

    from zoo.hf_suite import list_specs

    globs = [glob.strip().lower() for glob in args.models.split(",") if glob.strip()]
    tasks = {task.strip() for task in args.tasks.split(",")} if args.tasks else None
    task_of = {
        spec.name: spec.task
        for spec in list_specs()
        if any(fnmatch.fnmatchcase(spec.name.lower(), glob) for glob in globs)
        and (tasks is None or spec.task in tasks)
    }
    names = list(task_of)
    if not names:
        print(f"no hf architecture matches {args.models!r}", file=sys.stderr)
        return 2
    started = time.monotonic()
    results = run_all(names, args.jobs, args.timeout, args.size, args.batch_size, args.seq_len)
    for result in results:
        # A worker that died or hung said nothing, its task included.
        result.setdefault("task", task_of[str(result["name"])])
    results.sort(key=lambda r: str(r["name"]))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    print(report(results, args.top))
    print(f"{(time.monotonic() - started) / 60:.1f} min with {args.jobs} workers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
