"""A dashboard server on a free port, started as users start it (``zoo-dashboard``), and
the flags headless Chromium runs with here: for the end-to-end test and
benchmarks/dashboard_speed.py."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from dashboard.serve import READY

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass(frozen=True)
class LiveDashboard:
    url: str
    # Seconds from starting the process until it said it was ready (None: not awaited).
    ready_s: float | None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def live_dashboard(
    runs_dir: Path,
    db_path: Path,
    log_path: Path,
    wait_for_data: bool = False,
    port: int | None = None,
) -> Iterator[LiveDashboard]:
    """``zoo-dashboard`` on ``runs_dir`` and ``db_path`` until the block ends; its output
    goes to ``log_path``. With ``wait_for_data``, the block starts once the server has
    loaded the results (what it does as it starts), not only once it answers."""
    command = ["-m", "dashboard.cli", "--runs-dir", str(runs_dir), "--db", str(db_path)]
    with live_server(command, log_path, READY if wait_for_data else None, port) as server:
        yield server


@contextmanager
def live_server(
    command: list[str],
    log_path: Path,
    ready: str | None = None,
    port: int | None = None,
    timeout_s: float = 60,
) -> Iterator[LiveDashboard]:
    """``python COMMAND`` (a Streamlit server: ``-m streamlit run app.py`` or
    ``-m dashboard.cli``), headless on ``port`` (a free one by default), until the block
    ends; with ``ready``, the block starts once that text is in its output."""
    port = port or free_port()
    options = ["--server.headless", "true", "--server.port", str(port)]
    options += ["--server.address", "127.0.0.1", "--server.fileWatcherType", "none"]
    options += ["--browser.gatherUsageStats", "false"]
    url = f"http://127.0.0.1:{port}"
    with log_path.open("w") as log:
        start = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, *command, *options], stdout=log, stderr=subprocess.STDOUT
        )
        try:
            deadline = time.monotonic() + timeout_s
            while not _healthy(url):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the server did not start:\n{log_path.read_text()}")
                time.sleep(0.05)
            loaded = None
            while ready is not None and loaded is None:
                if ready in log_path.read_text():
                    loaded = time.perf_counter() - start
                elif process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the server never said {ready!r}:\n{log_path.read_text()}")
                else:
                    time.sleep(0.05)
            yield LiveDashboard(url, loaded)
        finally:
            process.terminate()
            process.wait(timeout=30)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as response:
            return response.read() == b"ok"
    except OSError:
        return False
