"""The project's user-facing errors.

A ``UsageError`` is bad input from the user: the message says what was wrong and
what to do, and the command line exits with status 2 before anything runs.
"""


class ZooMatrixError(Exception):
    """Base of every error zoo-matrix raises on purpose."""

    exit_code = 1


class UsageError(ZooMatrixError):
    """Bad input: unknown model, axis value, path or module."""

    exit_code = 2
