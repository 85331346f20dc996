"""``zoo-merge``: parquet run folders and databases merged into one database."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from runner.store.merge import merge, summary_lines
from zoo.errors import run_command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="zoo-merge",
        description="Merge parquet run folders (a folder like data/runs, or one run folder) "
        "and zoo-matrix databases into one database, created if missing. Rows already "
        "there are skipped, so merging twice changes nothing; reruns of a cell are kept "
        "and readers take the latest.",
    )
    parser.add_argument("sources", nargs="+", type=Path, metavar="SOURCE")
    parser.add_argument("--into", type=Path, required=True, metavar="PATH", help="target database")
    args = parser.parse_args(argv)
    return run_command("zoo-merge", _merge, args)


def _merge(args: argparse.Namespace) -> int:
    print("\n".join(summary_lines(merge(args.sources, args.into))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
