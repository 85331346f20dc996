"""``zoo-export``: runs of a database as parquet shards, ``<out>/<run_id>/<table>.parquet``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from runner.store.export import DEFAULT_OUT_DIR, SHARD_QUERIES, export_runs
from runner.store.schema import DEFAULT_DB_PATH
from zoo.errors import run_command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="zoo-export",
        description="Export runs from a zoo-matrix database as parquet shards "
        "(<out>/<run_id>/<table>.parquet). With no --run or --label, every run.",
    )
    parser.add_argument(
        "--db", type=Path, default=DEFAULT_DB_PATH, help=f"database (default {DEFAULT_DB_PATH})"
    )
    parser.add_argument(
        "--run", dest="run_ids", action="append", metavar="ID", help="a run id (repeatable)"
    )
    parser.add_argument("--label", help="every run with this label")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT_DIR, help=f"directory (default {DEFAULT_OUT_DIR})"
    )
    args = parser.parse_args(argv)
    return run_command("zoo-export", _export, args)


def _export(args: argparse.Namespace) -> int:
    paths = export_runs(args.db, args.out, run_ids=args.run_ids, label=args.label)
    if not paths:
        print(f"no runs in {args.db}: nothing exported")
        return 0
    for path in paths:
        print(f"wrote {path}")
    print(f"exported {len(paths) // len(SHARD_QUERIES)} run(s) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
