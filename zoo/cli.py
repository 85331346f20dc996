"""``zoo-list``: show the models a selection names, without building any."""

from __future__ import annotations

import argparse
import json
import os
import sys

from zoo.catalog import select
from zoo.errors import UsageError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zoo-list",
        description="List the models of the catalogue (timm, custom modules) that a "
        "selection names. Listing builds nothing.",
    )
    parser.add_argument(
        "--models",
        action="append",
        metavar="PATTERNS",
        help="case-insensitive globs on model id or bare name, comma-separated, "
        "repeatable (e.g. 'resnet*,timm/vit_*'); default: every model",
    )
    parser.add_argument(
        "--module",
        action="append",
        metavar="FILE:CLASS",
        help="a user model: FILE.py:ClassName, built with no arguments, with "
        "get_example_inputs(); repeatable",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        specs = select(args.models, args.module)
    except UsageError as exc:
        print(f"zoo-list: error: {exc}", file=sys.stderr)
        return exc.exit_code
    try:
        if args.format == "json":
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
