"""``zoo-dashboard``: start the Streamlit dashboard (``streamlit run dashboard/app.py``,
through ``dashboard.serve``, which loads the results as the server starts).

``--db`` and ``--runs-dir`` reach the app as ``ZOO_DB`` and ``ZOO_RUNS_DIR``; every other
argument goes to ``streamlit run`` as it is (``--server.port 8502``, ...). The server
listens on localhost unless ``--server.address`` says otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from dashboard.data import DB_ENV, RUNS_DIR_ENV

APP = Path(__file__).resolve().parent / "app.py"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zoo-dashboard",
        description="Browse recorded zoo-matrix results: the runs shipped under data/runs "
        "together with your database. Other arguments go to `streamlit run`.",
    )
    parser.add_argument(
        "--db",
        type=Path,
        help=f"your results database (default data/zoo.duckdb; env {DB_ENV})",
    )
    parser.add_argument(
        "--runs-dir",
        type=Path,
        help=f"a folder of parquet runs, <run_id>/<table>.parquet (default data/runs; "
        f"env {RUNS_DIR_ENV})",
    )
    return parser


def main(argv: list[str] | None = None) -> None:
    args, streamlit_args = build_parser().parse_known_args(argv)
    env = dict(os.environ)
    # Absolute, so the app finds them whatever directory streamlit runs it from.
    if args.db is not None:
        env[DB_ENV] = str(args.db.resolve())
    if args.runs_dir is not None:
        if not args.runs_dir.is_dir():
            print(f"zoo-dashboard: note: {args.runs_dir} is not a folder yet", file=sys.stderr)
        env[RUNS_DIR_ENV] = str(args.runs_dir.resolve())
    # Before the user's arguments, which override them: no usage statistics sent from an
    # offline lab, no "Deploy" button in a tool that only reads local results, and a
    # server only this machine reaches (Streamlit's own default is every interface):
    # sharing the results is asked for with --server.address 0.0.0.0.
    defaults = ["--browser.gatherUsageStats", "false", "--client.toolbarMode", "viewer"]
    defaults += ["--server.address", "localhost"]
    command = [sys.executable, "-m", "dashboard.serve", str(APP), *defaults, *streamlit_args]
    # Become the server rather than wait on it: a signal to zoo-dashboard then stops the
    # server instead of orphaning it.
    os.execve(sys.executable, command, env)


if __name__ == "__main__":
    main()
