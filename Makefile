# The README's test command: `make test` (unit, end-to-end, notebook and SLURM-cluster tests).
.PHONY: test test-fast
test:
	bash tests/run.sh

# Without the SLURM cluster and the slow end-to-end runs (seconds, for editing loops).
test-fast:
	python -m pytest -q -m "not slow and not cluster"
