"""``zoo-list``: show the models a selection names, without building any."""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys

from zoo import selections
from zoo.catalog import SUITE_CHOICES, select
from zoo.errors import UsageError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zoo-list",
        description="List the models of the catalogue (timm, hf, custom modules) that a "
        "selection names. Listing builds nothing.",
    )
    parser.add_argument(
        "--models",
        action="append",
        metavar="PATTERNS",
        help="case-insensitive globs on model id or bare name, or named selections ("
        + ", ".join(selections.PREFIX + name for name in selections.NAMES)
        + "), comma-separated, repeatable (e.g. '@core,resnet*,timm/vit_*'); "
        "default: every model",
    )
    parser.add_argument(
        "--module",
        action="append",
        metavar="FILE:CLASS",
        help="a user model: FILE.py:ClassName, built with no arguments, with "
        "get_example_inputs(); repeatable",
    )
    parser.add_argument(
        "--suite", choices=SUITE_CHOICES, default="all", help="list one suite (default: all)"
    )
    parser.add_argument(
        "--counts", action="store_true", help="print how many models per suite and task"
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")
    return parser


def _counts(specs) -> dict[str, dict[str, int]]:
    by_suite: dict[str, collections.Counter[str]] = {}
    for spec in specs:
        by_suite.setdefault(spec.suite, collections.Counter())[spec.task] += 1
    return {suite: dict(tasks.most_common()) for suite, tasks in by_suite.items()}


def _count_lines(counts: dict[str, dict[str, int]]) -> list[str]:
    lines = []
    for suite, tasks in counts.items():
        lines.append(f"{suite:8} {sum(tasks.values()):6}")
        lines += [f"  {task:30} {count:6}" for task, count in tasks.items()]
    total = sum(sum(tasks.values()) for tasks in counts.values())
    lines.append(f"{'total':8} {total:6}")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        specs = select(args.models, args.module, suite=args.suite)
    except UsageError as exc:
        print(f"zoo-list: error: {exc}", file=sys.stderr)
        return exc.exit_code
    try:
        if args.counts and args.format == "json":
            print(json.dumps(_counts(specs), indent=2))
        elif args.counts:
            print("\n".join(_count_lines(_counts(specs))))
        elif args.format == "json":
            print(json.dumps([spec.to_dict() for spec in specs], indent=2))
        else:
            for spec in specs:
                print(spec.id)
        sys.stdout.flush()
    except BrokenPipeError:
        # `zoo-list | head` closed the pipe: stop quietly, and keep the interpreter's
        # final flush from raising again (the recipe of Python's signal docs).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main())
