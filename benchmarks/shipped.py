"""What the report scripts read: the shipped parquet runs (``data/runs``) and, where
given, a database, loaded as the dashboard loads them (``dashboard.data.load``), with
the CUDA rows of one GPU only: a sweep's tables are one card's, and a run on another
card (a user's own, an H100 chunk) is not theirs."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import duckdb

from dashboard.data import load

ROOT = Path(__file__).resolve().parent.parent

# Each results row with its environment's GPU (NULL where none is recorded).
_WITH_GPU = "results r LEFT JOIN (SELECT DISTINCT env_id, gpu FROM environments) e USING (env_id)"


@dataclass(frozen=True)
class Card:
    """The GPU whose CUDA rows a report counts, and the cell keys of other GPUs' CUDA
    rows left out."""

    gpu: str | None
    others: int

    def line(self) -> str:
        left_out = f"; {self.others} cell keys of other GPUs left out" if self.others else ""
        return f"GPU: {self.gpu or 'not recorded'}{left_out}."


def parser(doc: str) -> argparse.ArgumentParser:
    """A script's argument parser, described by its docstring's first paragraph, with
    ``--runs-dir``, ``--db`` and ``--gpu``."""
    made = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    made.add_argument("--runs-dir", type=Path, default=ROOT / "data" / "runs")
    made.add_argument("--db", type=Path, default=None)
    made.add_argument(
        "--gpu",
        default=None,
        help="count the CUDA rows of this GPU: its name as the environments record it, or "
        "a part of it that names one card only ('H200'); default: the GPU with the most "
        "CUDA cell keys",
    )
    return made


def connect(args: argparse.Namespace) -> duckdb.DuckDBPyConnection:
    """The tables and views of ``args.runs_dir`` and ``args.db`` in one connection, their
    CUDA rows those of one GPU (``args.gpu``, else the one with the most)."""
    return connect_card(args)[0]


def card_name(asked: str, recorded: list[str | None]) -> str:
    """The recorded GPU name that ``--gpu`` means: the name itself, or the one name that
    contains it (case aside). Anything else exits with status 2, naming the cards."""
    names = sorted({name for name in recorded if name is not None})
    if asked in names:
        return asked
    matches = [name for name in names if asked.strip() and asked.strip().lower() in name.lower()]
    if len(matches) == 1:
        return matches[0]
    listed = ", ".join(repr(name) for name in names) or "none (no CUDA rows)"
    problem = "names more than one card" if matches else "names no card with CUDA rows"
    print(
        f"error: --gpu {asked!r} {problem}; the recorded cards are: {listed}. "
        "Pass one of them, or a part of its name that no other card's contains.",
        file=sys.stderr,
    )
    raise SystemExit(2)


def connect_card(args: argparse.Namespace) -> tuple[duckdb.DuckDBPyConnection, Card]:
    """``connect``, and which GPU's rows it kept."""
    con, sources = load(args.runs_dir, args.db)
    for problem in sources.problems:
        print(f"warning: {problem}", file=sys.stderr)
    cards = con.execute(
        f"SELECT e.gpu, count(DISTINCT r.cell_key) FROM {_WITH_GPU} WHERE r.device = 'cuda' "
        "GROUP BY e.gpu ORDER BY count(DISTINCT r.cell_key) DESC, e.gpu"
    ).fetchall()
    if args.gpu is not None:
        gpu = card_name(args.gpu, [card for card, _ in cards])
    else:
        gpu = cards[0][0] if cards else None
    others = sum(count for card, count in cards if card != gpu)
    if others:
        con.execute(
            "CREATE TEMP TABLE elsewhere AS SELECT r.result_id, r.run_id FROM "
            f"{_WITH_GPU} WHERE r.device = 'cuda' AND e.gpu IS DISTINCT FROM $gpu",
            {"gpu": gpu},
        )
        con.execute("DELETE FROM graph_breaks WHERE result_id IN (SELECT result_id FROM elsewhere)")
        con.execute("DELETE FROM results WHERE result_id IN (SELECT result_id FROM elsewhere)")
        # A run left without rows was the other card's (its chunk is not this sweep's).
        con.execute(
            "DELETE FROM runs WHERE run_id IN (SELECT run_id FROM elsewhere) "
            "AND run_id NOT IN (SELECT run_id FROM results)"
        )
    return con, Card(gpu, others)
