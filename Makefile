# The checks to run before a commit. `make check` is the fast loop (a few minutes on
# 2 cores); `make test` is the whole suite, as CI runs it (README's test command).
.PHONY: check lint layers fast test

check: lint layers fast

lint:
	ruff check .
	ruff format --check .

layers:
	pytest -q tests/test_layers.py

fast:
	pytest -q -m "not inductor and not browser and not slow"

test: lint
	pytest
