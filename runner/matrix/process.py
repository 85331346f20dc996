"""Which process owns a run, and whether that process still lives.

A run row and a run's temporary folder carry the host, pid and a start token of the
``zoo-run`` process that made them. A later run on the same host tells a dead owner
(killed, the host rebooted) from a live one (another sweep writing to the same
database now) by these: a pid alone is not enough, as pids are reused, so the token
holds the boot, the pid namespace and the process's start time, which a new process
with the same pid does not share. Where the owner cannot be judged (another host,
another pid namespace, no token), it counts as alive: a live run is never declared
dead.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

_PROC = Path("/proc")


def current_host() -> str:
    return socket.gethostname()


def start_token(pid: int) -> str | None:
    """``boot/pid-namespace/start-time`` of the process ``pid`` (Linux), None where
    there is no such process or no /proc to read it from."""
    try:
        boot = (_PROC / "sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink(_PROC / str(pid) / "ns/pid")
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: fields after
    # the last ")" are plain; the start time is field 22 of the whole line.
    fields = stat.rpartition(")")[2].split()
    return f"{boot}/{namespace}/{fields[19]}"


def alive(host: str | None, pid: int | None, token: str | None) -> bool:
    """Whether the process that recorded ``host``, ``pid`` and ``token`` may still run
    (True also where this process cannot tell, see the module's docstring)."""
    if host != current_host() or pid is None:
        return True
    if token is None:
        return _signal_reaches(pid)
    mine = start_token(os.getpid())
    if mine is None:
        return _signal_reaches(pid)
    boot, namespace, _ = token.split("/", 2)
    my_boot, my_namespace, _ = mine.split("/", 2)
    if namespace != my_namespace:
        return True  # another container's processes: not visible from here
    if boot != my_boot:
        return False  # the host rebooted since: every process of before is gone
    return start_token(pid) == token


def _signal_reaches(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
