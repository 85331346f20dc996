"""The project's errors, one hierarchy for every command (zoo, runner, dashboard).

Each says what was wrong and what to do; a command prints the message and exits with
the error's ``exit_code`` (``runner.cli.errors``): 2 for bad input the user can fix, 1
for a condition of the moment, 130 for an interrupted run. Failures of models are not
errors: they are results.
"""


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
    """The user pressed Ctrl-C (or the run got SIGTERM); in-flight cells were dropped."""

    exit_code = 130


class NodesLost(Interrupted):
    """Every node of a cluster run died with cells left; the cells they held are
    recorded or were run elsewhere, the rest are left for the same command to resume."""

    exit_code = 1


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
