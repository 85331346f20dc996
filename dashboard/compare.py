"""Compare two sides of the matrix (runs, labels or environments), cell by cell.

``zoo-compare A B`` prints what changed from A to B; ``compare_frames`` is the same
comparison as a DataFrame for the dashboard's Compare page. A speed change counts only
when it is larger than the measured spread (the latency quartiles stored with each row)
and than a minimum relative threshold, so run-to-run noise reads as ``same``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO

import duckdb
import pandas as pd

from dashboard import queries
from dashboard.data import DB_ENV, RUNS_DIR_ENV, default_paths, load
from runner.matrix.labels import DISTURBED_RATIO, is_disturbed
from zoo.errors import UsageError, run_command

NEW_FAILURE = "new failure"
SLOWER = "slower"
STATUS_CHANGE = "status change"
# Its speed moved beyond the spread, but one side's timing was disturbed (a median far
# above its fastest sample): neither faster nor slower can be told.
DISTURBED = "disturbed"
# Its speed moved beyond the spread between a row timed inside one autocast region and
# one timed per call (runner.store.schema.one_autocast_region): the measurement changed.
MEASURED_DIFFERENTLY = "measured differently"
FIXED = "fixed"
FASTER = "faster"
SAME = "same"
# Worst first: the order of the table and of the counts.
CHANGES = (NEW_FAILURE, SLOWER, STATUS_CHANGE, DISTURBED, MEASURED_DIFFERENTLY, FIXED, FASTER, SAME)
REGRESSIONS = (NEW_FAILURE, SLOWER)
DEFAULT_THRESHOLD = 0.05
# What a speedup is measured by: median wall-clock latency, or GPU busy time.
WALL = "wall"
GPU = "gpu"
METRICS = (WALL, GPU)
METRIC_TEXT = {
    WALL: "wall-clock speedup (median latencies; what a user gets)",
    GPU: "GPU-time speedup (kernel busy time of one profiled call; unmoved by the host)",
}
MIN_PREFIX = 8
KINDS = ("run", "label", "env")
RESOLUTION_HELP = (
    "A and B each name a run id (or a prefix of it, 8 characters at least), a run label "
    "(every run with that label) or an environment id (every run in that environment, or "
    "a prefix of it, 8 characters at least). Exact names win over prefixes; a name that "
    "matches several is an error listing them. On each side the latest row of each cell "
    "counts; cells match on their key without the environment, so two environments can "
    "be compared."
)


@dataclass(frozen=True)
class Side:
    """One side of a comparison: ``ids`` are run ids (kind run, label) or env ids (env)."""

    kind: str
    name: str
    ids: tuple[str, ...]
    description: str

    def params(self) -> list[list[str]]:
        """The side's parameters of the compare queries: run ids, then environment ids."""
        if self.kind == "env":
            return [[], list(self.ids)]
        return [list(self.ids), []]


def list_sides(con: duckdb.DuckDBPyConnection) -> list[Side]:
    """Every label, run and environment that can be compared, in that order."""
    sides = [
        Side(
            "label",
            label,
            tuple(run_ids),
            f"label {label} ({len(run_ids)} run(s), last {last:%Y-%m-%d %H:%M})",
        )
        for label, run_ids, last in con.execute(queries.COMPARE_LABELS).fetchall()
    ]
    sides += [
        Side(
            "run",
            run_id,
            (run_id,),
            f"run {run_id[:MIN_PREFIX]} ({label or 'no label'}, {started:%Y-%m-%d %H:%M}, "
            f"{status}, {cells} cell(s))",
        )
        for run_id, label, started, status, cells in con.execute(queries.COMPARE_RUNS).fetchall()
    ]
    sides += [
        Side(
            "env",
            env_id,
            (env_id,),
            f"environment {env_id} (torch {torch or '?'}, {gpu or 'no GPU'}, {cells} cell(s))",
        )
        for env_id, torch, gpu, cells in con.execute(queries.COMPARE_ENVIRONMENTS).fetchall()
    ]
    return sides


def _choices(sides: list[Side]) -> str:
    if not sides:
        return "there are no runs at all: record some with zoo-run or pass --runs-dir/--db."
    return "\n".join(f"  {side.name:<36}  {side.description}" for side in sides)


def resolve_side(con: duckdb.DuckDBPyConnection, text: str) -> Side:
    """The run, label or environment that ``text`` names (see ``RESOLUTION_HELP``)."""
    text = text.strip()
    sides = list_sides(con)
    exact = [side for side in sides if side.name == text]
    prefixed = [
        side
        for side in sides
        if side.kind != "label" and len(text) >= MIN_PREFIX and side.name.startswith(text)
    ]
    matches = exact or prefixed
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise UsageError(
            f"{text!r} is ambiguous; it matches:\n{_choices(matches)}\n"
            "Pass a longer run id, or the full name."
        )
    hint = ""
    if text and any(side.kind != "label" and side.name.startswith(text) for side in sides):
        hint = f" (a run or environment id prefix needs {MIN_PREFIX} characters at least)"
    raise UsageError(
        f"no run, label or environment {text!r}{hint}. What exists:\n{_choices(sides)}"
    )


def _side(con: duckdb.DuckDBPyConnection, side: str | Side) -> Side:
    return side if isinstance(side, Side) else resolve_side(con, side)


def classify(row: pd.Series, threshold: float = DEFAULT_THRESHOLD, metric: str = WALL) -> str:
    """The change from A to B of one matched cell (the rule is in ``zoo-compare --help``),
    by the speedup columns of the frame (``compare_frames`` puts the metric's there). A
    wall-clock change of a cell whose timing was disturbed on either side is
    ``disturbed``: GPU time, which a busy host does not move, is judged all the same. A
    change between a row timed inside one autocast region and one timed per call is
    ``measured differently``, by either metric (the eager backend's GPU time moved too)."""
    a_pass, b_pass = row["a_status"] == "pass", row["b_status"] == "pass"
    if a_pass and not b_pass:
        return NEW_FAILURE
    if b_pass and not a_pass:
        return FIXED
    if not a_pass:
        return SAME if row["a_status"] == row["b_status"] else STATUS_CHANGE
    if pd.isna(row["a_speedup"]) or pd.isna(row["b_speedup"]):
        return SAME
    relative = row["b_speedup"] / row["a_speedup"] - 1
    if abs(relative) <= threshold:
        return SAME
    if row["b_speedup_high"] < row["a_speedup_low"]:
        change = SLOWER
    elif row["b_speedup_low"] > row["a_speedup_high"]:
        change = FASTER
    else:
        return SAME
    if bool(row.get("a_one_region")) != bool(row.get("b_one_region")):
        return MEASURED_DIFFERENTLY
    if metric == WALL and any(
        is_disturbed(row.get(f"{side}_disturbance"), 1.0) for side in ("a", "b")
    ):
        return DISTURBED
    return change


def compare_frames(
    con: duckdb.DuckDBPyConnection,
    a: str | Side,
    b: str | Side,
    threshold: float = DEFAULT_THRESHOLD,
    metric: str = WALL,
) -> pd.DataFrame:
    """One row per cell present on both sides (latest row of each), with its ``change``.

    ``a`` and ``b`` are Sides or names for ``resolve_side``. ``metric`` is ``wall``
    (median wall-clock latencies: what a user gets; ``*_speedup_low``/``_high`` bound
    each speedup by the latency quartiles) or ``gpu`` (GPU busy time of one profiled call
    per side: what the compiler changed, unmoved by the host's speed; a point, no
    interval). ``speedup_change`` is B / A - 1 of the metric's speedup.
    """
    if metric not in METRICS:
        raise UsageError(f"unknown speedup metric {metric!r}; one of {', '.join(METRICS)}")
    a, b = _side(con, a), _side(con, b)
    frame = con.execute(queries.COMPARE_CELLS, [*a.params(), *b.params()]).df()
    if metric == GPU:
        # The GPU-time speedups take the speedup columns (classify and the tables read
        # those), the wall ones stay beside them.
        for side in ("a", "b"):
            frame[f"{side}_wall_speedup"] = frame[f"{side}_speedup"]
            for column in ("speedup", "speedup_low", "speedup_high"):
                frame[f"{side}_{column}"] = frame[f"{side}_gpu_speedup"]
    frame["speedup_change"] = frame["b_speedup"] / frame["a_speedup"] - 1
    frame["change"] = (
        frame.apply(classify, axis=1, threshold=threshold, metric=metric)
        if len(frame)
        else pd.Series(dtype=str)
    )
    order = {change: rank for rank, change in enumerate(CHANGES)}
    frame = frame.sort_values("change", key=lambda column: column.map(order), kind="stable")
    return frame.reset_index(drop=True)


def unmatched_counts(con: duckdb.DuckDBPyConnection, a: Side, b: Side) -> tuple[int, int]:
    """Cells only on side A and only on side B (not compared)."""
    only_a, only_b = con.execute(queries.COMPARE_UNMATCHED, [*a.params(), *b.params()]).fetchone()
    return only_a, only_b


def change_counts(frame: pd.DataFrame) -> dict[str, int]:
    counts = frame["change"].value_counts()
    return {change: int(counts.get(change, 0)) for change in CHANGES}


def config_label(row: pd.Series) -> str:
    parts = [f"{row['backend']}/{row['mode']}", f"dynamic={row['dynamic']}", row["precision"]]
    parts.append(row["step"])
    # A column with NULLs comes back as floats: print 64, not 64.0.
    for prefix, column in (("bs", "batch_size"), ("seq", "seq_len")):
        if not pd.isna(row[column]):
            parts.append(f"{prefix}{int(row[column])}")
    parts.append(row["device"])
    if row["size"] != "full":
        parts.append(row["size"])
    return " ".join(str(part) for part in parts)


def _speedup_text(speedup: float, low: float, high: float) -> str:
    if pd.isna(speedup):
        return "-"
    if pd.isna(low) or pd.isna(high) or low == high:
        return f"{speedup:.2f}x"
    return f"{speedup:.2f}x ({low:.2f}-{high:.2f})"


def table_rows(frame: pd.DataFrame) -> list[list[str]]:
    return [
        [
            row["model_id"],
            config_label(row),
            row["a_status"],
            _speedup_text(row["a_speedup"], row["a_speedup_low"], row["a_speedup_high"]),
            row["b_status"],
            _speedup_text(row["b_speedup"], row["b_speedup_low"], row["b_speedup_high"]),
            row["change"],
        ]
        for _, row in frame.iterrows()
    ]


HEADER = ["model", "config", "A status", "A speedup", "B status", "B speedup", "change"]


def plain_table(rows: list[list[str]]) -> str:
    widths = [max(len(cell) for cell in column) for column in zip(HEADER, *rows, strict=False)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in [HEADER, ["-" * width for width in widths], *rows]
    ]
    return "\n".join(lines)


def _rich_table(rows: list[list[str]], out: TextIO) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    styles = {
        NEW_FAILURE: "bold red",
        SLOWER: "red",
        DISTURBED: "yellow",
        FIXED: "green",
        FASTER: "green",
    }
    table = Table(*HEADER)
    for row in rows:
        # Text, not str: a "[" in a model id would be read as rich markup.
        table.add_row(*map(Text, row[:-1]), Text(row[-1], style=styles.get(row[-1], "")))
    Console(file=out).print(table)


def _use_rich(out: TextIO) -> bool:
    # Off a terminal rich wraps to 80 columns, which mangles CI logs and pipes.
    if not out.isatty():
        return False
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


def _changed(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["change"] != SAME]


def write_text(
    frame: pd.DataFrame,
    a: Side,
    b: Side,
    unmatched: tuple[int, int],
    out: TextIO,
    changed_only: bool = False,
    use_rich: bool | None = None,
    metric: str = WALL,
) -> None:
    print(f"A: {a.description}", file=out)
    print(f"B: {b.description}", file=out)
    print(f"speedup: {METRIC_TEXT[metric]}", file=out)
    rows = table_rows(_changed(frame) if changed_only else frame)
    if rows and (_use_rich(out) if use_rich is None else use_rich):
        _rich_table(rows, out)
    elif rows:
        print(plain_table(rows), file=out)
    counts = change_counts(frame)
    print(
        f"{len(frame)} cell(s) compared (only in A: {unmatched[0]}, only in B: {unmatched[1]}): "
        + ", ".join(f"{change} {count}" for change, count in counts.items()),
        file=out,
    )


def write_json(
    frame: pd.DataFrame,
    a: Side,
    b: Side,
    unmatched: tuple[int, int],
    threshold: float,
    out: TextIO,
    changed_only: bool = False,
    metric: str = WALL,
) -> None:
    cells = _changed(frame) if changed_only else frame
    document = {
        "a": asdict(a),
        "b": asdict(b),
        "threshold": threshold,
        "metric": metric,
        "counts": change_counts(frame),
        "only_a": unmatched[0],
        "only_b": unmatched[1],
        # pandas writes NaN as null, which json.dumps of the raw values would not.
        "cells": json.loads(cells.to_json(orient="records", date_format="iso")),
    }
    json.dump(document, out, indent=2)
    out.write("\n")


def _threshold(text: str) -> float:
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number like 0.05 or 5%") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give a fraction from 0 to 1 (0.05) or a percentage (5%)"
        )
    return value


def build_parser() -> argparse.ArgumentParser:
    runs_dir, db = default_paths()
    parser = argparse.ArgumentParser(
        prog="zoo-compare",
        description="Compare the cells of two runs, labels or environments: what broke, what "
        "was fixed, what got slower or faster. " + RESOLUTION_HELP,
        epilog="Changes: 'new failure' (A pass, B not), 'fixed' (A not pass, B pass), "
        "'status change' (two different non-pass statuses), 'slower'/'faster' (both pass, "
        "the speedup intervals [eager p25 / compiled p75, eager p75 / compiled p25] of A "
        "and B do not overlap, and B/A - 1 is beyond the threshold), 'disturbed' (such a "
        f"change of wall-clock speed where a side's median is {DISTURBED_RATIO:g}x its "
        "fastest sample or more: the timing was disturbed, no verdict), 'measured "
        "differently' (such a change where one side was timed inside one autocast region, "
        "before 2026-12-05, and the other per call: no verdict), else 'same'.",
    )
    parser.add_argument("a", metavar="A", help="the baseline side")
    parser.add_argument("b", metavar="B", help="the side compared with it")
    parser.add_argument(
        "--db", type=Path, default=None, help=f"the user's database (default {db}; env ZOO_DB)"
    )
    parser.add_argument(
        "--runs-dir",
        type=Path,
        default=None,
        help=f"shipped parquet runs (default {runs_dir}; env ZOO_RUNS_DIR)",
    )
    parser.add_argument("--format", choices=("text", "csv", "json"), default="text")
    parser.add_argument(
        "--threshold",
        type=_threshold,
        default=DEFAULT_THRESHOLD,
        help="the smallest relative speedup change that counts, as 0.05 or 5%% (default 5%%)",
    )
    parser.add_argument(
        "--speedup",
        choices=METRICS,
        default=WALL,
        help="compare wall-clock speedups (default: what a user gets) or GPU-time speedups "
        "(kernel busy time of one profiled call per side: the stable figure for compiler "
        "regressions, unmoved by the host's speed; cells without a GPU profile count as same)",
    )
    parser.add_argument(
        "--changed-only", action="store_true", help="list only the cells that changed"
    )
    parser.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when any cell is a new failure or slower, or when no cell is on both "
        "sides (a gate that compared nothing has checked nothing; for CI)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command("zoo-compare", _compare, args)


def _path(given: Path | None, default: Path, flag: str, env: str) -> Path:
    """The path to read: the flag's, else the environment's, else the default. One the
    user named must exist (comparing without its data would compare less than asked,
    and say nothing); the default may be missing (no database yet)."""
    named = given if given is not None else default if env in os.environ else None
    if named is not None and not named.exists():
        source = flag if given is not None else env
        raise UsageError(f"{source}: {named} does not exist. Pass an existing path.")
    return default if named is None else named


def _compare(args: argparse.Namespace) -> int:
    out = sys.stdout
    runs_dir, db = default_paths()
    runs_dir = _path(args.runs_dir, runs_dir, "--runs-dir", RUNS_DIR_ENV)
    db = _path(args.db, db, "--db", DB_ENV)
    con, sources = load(runs_dir, db)
    for problem in sources.problems:
        print(f"zoo-compare: warning: {problem}", file=sys.stderr)
    a, b = resolve_side(con, args.a), resolve_side(con, args.b)
    frame = compare_frames(con, a, b, args.threshold, args.speedup)
    unmatched = unmatched_counts(con, a, b)
    try:
        if args.format == "csv":
            (_changed(frame) if args.changed_only else frame).to_csv(out, index=False)
        elif args.format == "json":
            write_json(frame, a, b, unmatched, args.threshold, out, args.changed_only, args.speedup)
        else:
            write_text(frame, a, b, unmatched, out, args.changed_only, metric=args.speedup)
        out.flush()
    except BrokenPipeError:
        # `zoo-compare ... | head` closed the pipe: the exit code still tells the verdict.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if frame.empty:
        # A gate that compared nothing has checked nothing: it must not pass.
        print(
            f"zoo-compare: {'error' if args.fail_on_regression else 'warning'}: no cell is on "
            f"both sides (only in A: {unmatched[0]}, only in B: {unmatched[1]}), so nothing "
            "was compared. Check the names of A and B, and the warnings above.",
            file=sys.stderr,
        )
        return 1 if args.fail_on_regression else 0
    disturbed = int((frame["change"] == DISTURBED).sum())
    if disturbed:
        print(
            f"zoo-compare: note: {disturbed} cell(s) changed speed while their timing was "
            f"disturbed (a median {DISTURBED_RATIO:g}x its fastest sample or more): neither "
            "faster nor slower is called. Rerun them alone (zoo-run --workers 1 --force) to "
            "compare them, or compare GPU time (--speedup gpu).",
            file=sys.stderr,
        )
    rescoped = int((frame["change"] == MEASURED_DIFFERENTLY).sum())
    if rescoped:
        print(
            f"zoo-compare: note: {rescoped} cell(s) changed speed between a row timed inside "
            "one autocast region (recorded before 2026-12-05) and one timed per call: the "
            "measurement changed, so neither faster nor slower is called. Measure the older "
            "side again with today's zoo-run to compare them.",
            file=sys.stderr,
        )
    regressions = frame["change"].isin(REGRESSIONS).sum()
    if args.fail_on_regression and regressions:
        print(f"zoo-compare: {regressions} regression(s) from A to B", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
