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
# The H200's reports and progress, and the H100's progress on the core set (its chunks
# run when the device tool lends an H100: data/runs/README.md, "zoo-core-h100").
H200 := --gpu H200
H100 := --gpu H100

shipped-docs:
	python benchmarks/sweep_progress.py $(H200) --readme data/runs/README.md
	python benchmarks/sweep_progress.py $(H200) --models @core --configs @core --label zoo-core --readme data/runs/README.md
	python benchmarks/sweep_progress.py $(H100) --models @core --configs @core --label zoo-core-h100 --readme data/runs/README.md
	python benchmarks/zoo_report.py $(H200) > docs/zoo-h200.md
	python benchmarks/remeasure_pairs.py $(H200) > docs/logs/remeasure_pairs_h200.md
	python benchmarks/published_compare.py $(H200) > docs/timm-published.md
	python benchmarks/card_pairs.py $(H100) --against H200 > docs/h100-vs-h200.md
