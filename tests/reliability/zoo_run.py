"""zoo-run as a child process, the way a user or a CI job starts it, for the fault tests:
its own temporary directory (so its run folder, and what is left of it, can be
checked) and its output read line by line while it runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
MISBEHAVING = FIXTURES / "misbehaving.py"
TOY = FIXTURES / "toy_models.py"


@dataclass
class ZooRun:
    process: subprocess.Popen
    lines: list[str] = field(default_factory=list)

    def wait_for(self, text: str, timeout_s: float = 180) -> str:
        """Read output until a line holding ``text``; that line."""
        deadline = time.monotonic() + timeout_s
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            if text in line:
                return line
            assert time.monotonic() < deadline, self.output()
        raise AssertionError(f"zoo-run ended before printing {text!r}:\n{self.output()}")

    def finish(self, timeout_s: float = 300) -> int:
        rest, _ = self.process.communicate(timeout=timeout_s)
        self.lines.append(rest)
        return self.process.returncode

    def output(self) -> str:
        return "".join(self.lines)


def sigint_as_a_terminal_sends_it() -> None:
    """A launched zoo-run's ``preexec_fn``: a test run started in the background
    inherits SIGINT ignored, and Python then leaves it so; reset, zoo-run gets Ctrl-C as
    a terminal would send it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(tmp: Path, *args: str) -> ZooRun:
    """``zoo-run ARGS`` (this checkout's) with ``tmp`` as its temporary directory."""
    tmp.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, TMPDIR=str(tmp))
    process = subprocess.Popen(
        [sys.executable, "-m", "runner.cli.run", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=REPO,
        preexec_fn=sigint_as_a_terminal_sends_it,
    )
    return ZooRun(process)


def run(tmp: Path, *args: str, timeout_s: float = 300) -> tuple[int, str]:
    """``zoo-run ARGS`` to its end: the exit status and everything it printed."""
    zoo_run = start(tmp, *args)
    code = zoo_run.finish(timeout_s)
    return code, zoo_run.output()


def processes_under(folder: Path) -> list[str]:
    """Command lines of live processes that name ``folder`` (a run's workers do: their
    status and log files are in its run folder)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if str(folder) in command and state != "Z":
            found.append(command)
    return found


def run_folders(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("zoo-run-*"))
