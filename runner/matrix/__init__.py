"""The matrix's vocabulary, importable without torch: axes, cells, results, statuses,
phase names. The only part of the runner the dashboard imports (with
``runner.store.schema`` and ``runner.backends.registry``, both torch-free too)."""
