"""A run's temporary folder, ``zoo-run-*`` in the system's temporary directory, and a
Ray node's, ``zoo-node-*`` on that node.

It holds what the run's workers leave while they work: logs, status and result files,
lock holds, and the cold compile caches of their cells. The run removes it when it
ends; a run killed before it can (SIGKILL, a reboot, a Ray node's actor killed) leaves
it behind, so each folder names its owner (``runner.matrix.process``) and the next run
(the next node actor on that host) removes the folders of owners that are gone. A
folder whose owner cannot be judged stays.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from runner.matrix.process import alive, current_host, start_token

PREFIX = "zoo-run-"
NODE_PREFIX = "zoo-node-"
OWNER_FILE = "owner.json"


@contextmanager
def run_workdir(
    run_id: str, root: Path | None = None, on_left: Callable[[Path], None] | None = None
) -> Iterator[Path]:
    """A new folder for the run ``run_id`` under ``root`` (the temporary directory by
    default), removed when the block ends. Removing it can take a while (14 workers'
    Inductor caches after max-autotune cells: many thousands of files), and a Ctrl-C or
    SIGTERM that lands then finds the run's work done: it stops the removal and nothing
    else, and what is left, owner file included, is the next run's to remove
    (``remove_stale``); ``on_left`` gets the folder."""
    path = make_workdir(run_id, root)
    try:
        yield path
    finally:
        try:
            remove_workdir(path)
        except KeyboardInterrupt:
            if on_left is not None:
                on_left(path)


def make_workdir(owner_id: str, root: Path | None = None, prefix: str = PREFIX) -> Path:
    """A new folder named ``prefix``* under ``root`` (the temporary directory by
    default), owned by this process for ``owner_id`` (a run id, a Ray node's id)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    pid = os.getpid()
    owner = {
        "run_id": owner_id,
        "host": current_host(),
        "pid": pid,
        "pid_started": start_token(pid),
    }
    (path / OWNER_FILE).write_text(json.dumps(owner))
    return path


def remove_workdir(path: Path) -> None:
    """``path`` and all it holds, its owner file last (a removal cut short leaves a
    folder that ``remove_stale`` can still judge)."""
    try:
        entries = list(path.iterdir())
    except OSError:
        return  # gone already
    for entry in entries:
        if entry.name == OWNER_FILE:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    shutil.rmtree(path, ignore_errors=True)


def remove_stale(root: Path | None = None, prefix: str = PREFIX) -> list[Path]:
    """Remove the folders named ``prefix``* under ``root`` whose owner is gone; the
    folders removed."""
    removed = []
    for folder in sorted(Path(root or tempfile.gettempdir()).glob(f"{prefix}*")):
        try:
            owner = json.loads((folder / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue  # no owner yet (being made), or made by an older zoo-run
        if not alive(owner.get("host"), owner.get("pid"), owner.get("pid_started")):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed
