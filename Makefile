# The README's test command: `make test` (unit, end-to-end, notebook and SLURM-cluster tests).
.PHONY: test test-fast coverage
test:
	bash tests/run.sh

# Without the SLURM cluster and the slow end-to-end runs (the README's Tests section has the suite's
# time); its last line says how to run the rest.
test-fast:
	python -m pytest -q -n 2 --dist loadgroup --durations=10 -m "not slow and not cluster"

# Line coverage of ppo_lab/ over the whole suite (subprocesses included), as a table.
coverage:
	bash tests/run.sh --cov --cov-report=term:skip-covered
