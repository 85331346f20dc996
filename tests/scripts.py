"""Running the benchmark scripts from tests, as a user runs them: a fresh process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_benchmark(
    name: str, *args: str, check: bool = False, timeout: float = 300
) -> subprocess.CompletedProcess:
    """One run of ``benchmarks/<name>`` from the checkout's root, its output captured as
    text."""
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / name), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
        cwd=ROOT,
    )
