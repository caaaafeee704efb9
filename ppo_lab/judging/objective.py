"""The number a tuning sweep optimises: one evaluation metric of a job, reduced across its seeds.

    optimize:
      metric: eval/episode_return     # summary.json's eval/<name> or final/<name>; a bare name: eval, then final
      direction: maximize             # or minimize
      reduce: mean                    # or iqm (the interquartile mean across the job's vmapped seeds)

The value comes from the job's `summary.json`, so a sweeper can read it from the run dir
whatever launcher ran the job (in this process, local processes, SLURM), and `launch.py`
returns the same number when a sweeper asks for one (an `optimize` section is in the config).
Only `completed` and `timed_out` runs have an objective, the runs the aggregate uses too.

No jax, no optuna: imported by `launch.py` and by the sweeper before any job runs.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping

from ppo_lab import rundir
from ppo_lab.config import OptimizeConfig, read
from ppo_lab.estimators import iqm
from ppo_lab.judging.headline import DEFAULT_HEADLINE
from ppo_lab.rundir.run_summary import RunSummary

USABLE_STATUS = ("completed", "timed_out")


class ObjectiveError(RuntimeError):
    """A job left no usable objective (it failed, stopped early, or lacks the metric)."""


# The `optimize` section: its keys and checks are its dataclass's (ppo_lab/config.py).
Objective = OptimizeConfig


def parse_objective(optimize: Mapping | None) -> Objective:
    """The `optimize` config section, read and checked; what it leaves out (or null): the headline
    metric, maximised, its mean across seeds."""
    given = {k: v for k, v in dict(optimize or {}).items() if v is not None}
    return read(OptimizeConfig, {"metric": DEFAULT_HEADLINE, "direction": "maximize", "reduce": "mean", **given}, "optimize")


def seed_values(summary: RunSummary, metric: str) -> list[float]:
    """One value per seed of `metric` in a summary (`RunSummary.values`), NaN where a seed has none."""
    values = summary.values(metric)
    if values is None:
        known = [f"{s}/{k}" for s, values in summary.per_seed().items() for k in sorted(values)]
        raise ObjectiveError(f"optimize.metric={metric!r} is not in this summary; it has {', '.join(known) or 'no metrics'}")
    return [math.nan if v is None else float(v) for v in values]


def reduce_seeds(values: list[float], how: str) -> float:
    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        return math.nan
    if how == "iqm":
        return iqm(finite)
    return float(sum(finite) / len(finite))


def objective_value(summary: RunSummary, objective: Objective) -> tuple[float, list[float]]:
    """(reduced value, per-seed values); ObjectiveError when the run has no usable value."""
    status = summary.status
    if status not in USABLE_STATUS:
        reason = summary.error or summary.stop_reason
        raise ObjectiveError(f"the run ended {status}" + (f" ({reason})" if reason else "") + ": no objective")
    per_seed = seed_values(summary, objective.metric)
    value = reduce_seeds(per_seed, objective.reduce)
    if not math.isfinite(value):
        raise ObjectiveError(f"{objective.metric} is {value} for every seed: no objective")
    return value, per_seed


def read_objective(run_dir: Path, objective: Objective) -> tuple[float, list[float]]:
    """The objective of the run in `run_dir`, from its summary.json."""
    summary = rundir.read_summary(run_dir)
    if summary is None:
        raise ObjectiveError(f"{run_dir} has no {rundir.SUMMARY}: the job never trained")
    return objective_value(summary, objective)


def job_result(summary: RunSummary, resolved: Mapping):
    """What `launch.py` returns: the objective (a float) when the config asks for one (an
    `optimize` section, set by `hydra/sweeper=optuna`), else the summary."""
    if not resolved.get("optimize", None):  # None, or missing (???) in a composed config without one
        return summary
    try:
        return objective_value(summary, parse_objective(resolved["optimize"]))[0]
    except ObjectiveError:
        return math.nan
