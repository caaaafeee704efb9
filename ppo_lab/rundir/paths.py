"""The names of the files a run or a sweep leaves (docs/architecture.md, "Contracts").

Only names here: every reader and writer of these files lives in a sibling module.
"""

from __future__ import annotations

from pathlib import Path

# In a run directory.
CONFIG = "config.yaml"
CONFIG_HISTORY = "config_history.jsonl"  # only after allow_config_change=true: which change ran from which update
METRICS = "metrics.csv"
EVALS = "evals.csv"  # evaluations along training, one row per (evaluation, seed) (rundir/metrics.py)
PBT_LOG = "pbt.jsonl"  # a population run's exploit steps (rundir/pbt_log.py)
SUMMARY = "summary.json"
BENCHMARK = "benchmark.json"
CHECKPOINTS = "checkpoints"
STOP_FILE = "STOP"
MANIFEST = "manifest.json"  # the reproducibility record (rundir/manifest.py)
RUN_LOCK = "run.lock"  # while a run trains: its holder (rundir/lock.py)
LOGGERS = "loggers.json"  # the W&B, TensorBoard and MLflow loggers' runs per seed (rundir/logger_state.py)
ERROR = "error.txt"  # a job that failed before the runner wrote summary.json (sweep callback)
HYDRA_OVERRIDES = ".hydra/overrides.yaml"

# In a sweep directory.
JOBS = "jobs.json"
MULTIRUN = "multirun.yaml"
AGGREGATE = "aggregate.csv"
RUNS = "runs.csv"
CRITERIA = "criteria.csv"  # the success criteria per cell (ppo_lab/analysis/criteria.py)

# metrics.csv: the first columns, in this order; every logged metric follows, sorted.
KEY_COLUMNS = ["update", "seed", "timesteps", "wall_s"]
# Columns read as integers; every other column is a float (NaN where blank).
INT_COLUMNS = ("update", "seed", "timesteps")

# Any of these in a folder makes it a run directory.
RUN_MARKERS = (CONFIG, METRICS, SUMMARY, CHECKPOINTS)


def has_run_files(path: Path) -> bool:
    """Whether `path` holds any file a run writes (so it is, or was, a run directory)."""
    return any((Path(path) / name).exists() for name in RUN_MARKERS)
