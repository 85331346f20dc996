"""What the report scripts read: the shipped parquet runs (``data/runs``) and, where
given, a database, loaded as the dashboard loads them (``dashboard.data.load``)."""

from __future__ import annotations

import argparse
from pathlib import Path

import duckdb

from dashboard.data import load

ROOT = Path(__file__).resolve().parent.parent


def parser(doc: str) -> argparse.ArgumentParser:
    """A script's argument parser, described by its docstring's first paragraph, with
    ``--runs-dir`` and ``--db``."""
    made = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    made.add_argument("--runs-dir", type=Path, default=ROOT / "data" / "runs")
    made.add_argument("--db", type=Path, default=None)
    return made


def connect(args: argparse.Namespace) -> duckdb.DuckDBPyConnection:
    """The tables and views of ``args.runs_dir`` and ``args.db`` in one connection."""
    con, _ = load(args.runs_dir, args.db)
    return con
