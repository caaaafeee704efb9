"""evals.csv: the evaluations along training (`eval.every_updates`, ppo_lab/run/along.py), one
row per (evaluation, seed): `KEY_COLUMNS` first (the update evaluated after, its seed, its
timesteps and training wall time), then every `eval/*` metric, sorted. It has metrics.csv's
layout, types and writer (`metrics.py`): appended and fsynced once per evaluation, a torn last
line skipped by every reader, a metric met later widening the header.

On resume it is cut back to the rows at or before the checkpoint's update, and a fresh start
empties it, as metrics.csv is: a run killed and relaunched has no duplicate and no missing
evaluation; those after the checkpoint are done again (bit for bit: an evaluation's keys are
a function of its seed and update).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ppo_lab.rundir.metrics import MetricsCSV, columns_by_seed, copy_rows_until, read_metrics
from ppo_lab.rundir.paths import EVALS


def evals_file(run_dir: Path) -> MetricsCSV:
    """The writer of `run_dir`'s evals.csv (appends rows; `truncate_after`)."""
    return MetricsCSV(Path(run_dir) / EVALS)


def read_evals(run_dir: Path) -> list[dict]:
    """Every complete row of `run_dir`'s evals.csv, typed, in file order ([] when there is none)."""
    return read_metrics(Path(run_dir) / EVALS)


def evals_by_seed(run_dir: Path) -> dict[int, dict[str, np.ndarray]]:
    """Per seed, every column of evals.csv as a float array ordered by update."""
    return columns_by_seed(Path(run_dir) / EVALS)


def evaluated_updates(run_dir: Path) -> set[int]:
    """The updates evals.csv has rows of."""
    return {row["update"] for row in read_evals(run_dir)}


def keep_evals(run_dir: Path, update: int, source: Path | None) -> int:
    """Make `run_dir`'s evals.csv hold the evaluations up to `update` of the run resumed from
    `source` (`run_dir` itself, or another run's dir whose rows are copied); none for a fresh
    start (`source` None). Returns how many of its own rows were dropped."""
    if source is not None and Path(source) != Path(run_dir) and (Path(source) / EVALS).exists():
        copy_rows_until(Path(source) / EVALS, Path(run_dir) / EVALS, update)
        return 0
    return evals_file(run_dir).truncate_after(update if source is not None else -1)
