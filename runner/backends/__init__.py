"""Backends: how a cell's program is compiled (``runner.backends.registry`` lists them)."""
