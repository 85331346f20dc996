"""The project's errors, one hierarchy for every command (zoo, runner, dashboard).

Each says what was wrong and what to do; a command prints the message and exits with
the error's ``exit_code`` (``run_command``): 2 for bad input the user can fix, 1
for a condition of the moment, 130 or 143 for a run interrupted by SIGINT or SIGTERM.
Failures of models are not errors: they are results.
"""

import signal


class ZooMatrixError(Exception):
    """Base of every error zoo-matrix raises on purpose."""

    exit_code = 1


class UsageError(ZooMatrixError):
    """Bad input: unknown model, axis value, path or module."""

    exit_code = 2


class DataError(ZooMatrixError):
    """Stored data that cannot be read (a database, a parquet shard): the message names
    the file and what to do."""

    exit_code = 2


class DatabaseLockedError(ZooMatrixError):
    """Another process held the database for longer than the store waits."""


class Interrupted(ZooMatrixError):
    """The user pressed Ctrl-C (SIGINT) or the run got SIGTERM; in-flight cells were
    dropped. The exit status is 128 + the signal's number, what a shell reports for a
    process that signal ended: 130 for Ctrl-C, 143 for SIGTERM."""

    exit_code = 128 + signal.SIGINT

    def __init__(self, message: str = "", signum: int | None = signal.SIGINT) -> None:
        super().__init__(message)
        self.signal = signal.Signals(signum) if signum is not None else None
        if self.signal is not None:
            self.exit_code = 128 + self.signal


class NodesLost(Interrupted):
    """Every node of a cluster run died with cells left; the cells they held are
    recorded or were run elsewhere, the rest are left for the same command to resume.
    No signal stopped it."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message, signum=None)


class Terminated(KeyboardInterrupt):
    """SIGTERM, taken the way of Ctrl-C (workers killed, the run recorded as
    interrupted) but told apart from it in the exit status."""


def raise_terminated(signum, frame):
    """A SIGTERM handler: the running loop stops as on Ctrl-C."""
    raise Terminated


def interruption(stop: KeyboardInterrupt) -> Interrupted:
    """What a caught Ctrl-C or SIGTERM (``raise_terminated``) is reported as."""
    return Interrupted(signum=signal.SIGTERM if isinstance(stop, Terminated) else signal.SIGINT)


def run_command(prog: str, body, *args, **kwargs) -> int:
    """``body(*args, **kwargs)``'s exit status, the one handler of every console command:
    an error of ours is printed as ``prog: error: message`` (plain text on stderr) and
    ends the command with its exit code."""
    import sys

    try:
        return body(*args, **kwargs)
    except ZooMatrixError as error:
        message = str(error)
        if message:
            print(f"{prog}: error: {message}", file=sys.stderr)
        return error.exit_code
