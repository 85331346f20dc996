# The checks to run before a commit. `make check` is the fast loop (a few minutes on
# 2 cores); `make test` is the whole suite, as CI runs it (README's test command).
.PHONY: check lint layers fast test shipped-docs

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

# After new runs land in data/runs: the sweep's progress tables in data/runs/README.md,
# the zoo report and the re-measured pairs, regenerated from the shipped parquet.
shipped-docs:
	python benchmarks/sweep_progress.py --readme data/runs/README.md
	python benchmarks/sweep_progress.py --models @core --configs @core --label zoo-core --readme data/runs/README.md
	python benchmarks/zoo_report.py > docs/zoo-h200.md
	python benchmarks/remeasure_pairs.py > docs/logs/remeasure_pairs_h200.md
	python benchmarks/published_compare.py > docs/timm-published.md
