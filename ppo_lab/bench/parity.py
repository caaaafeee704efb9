"""Learning parity with a peer trainer: one score per seed, reduced the same way on both sides.

A seed's score is the mean return of the training episodes that ended in the last 10% of
updates (each update's mean over the episodes that ended in it, then the mean over those
updates; updates where none ended are left out). Both sides' numbers come from their own
training logs: the lab's `metrics.csv` (`train/mean_episode_return` per update and seed) and
a PureJaxRL `LogWrapper`'s info (`returned_episode`, `returned_episode_returns`). The table
gives the mean over seeds with its 95% Student-t interval (`estimators.mean_summary`; no bounds declared: Student t).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ppo_lab import rundir
from ppo_lab.estimators import mean_summary
from ppo_lab.judging import tables as tb
from ppo_lab.judging.headline import TRAIN_RETURN

TAIL_FRACTION = 0.1


def tail_mean(per_update: list[list[float]], fraction: float = TAIL_FRACTION) -> list[float]:
    """Per seed: the mean over the last `fraction` of updates of each update's mean return."""
    out = []
    for seed in per_update:
        n = max(1, int(len(seed) * fraction))
        tail = [v for v in seed[-n:] if math.isfinite(v)]
        out.append(sum(tail) / len(tail) if tail else math.nan)
    return out


def lab_per_update(run_dir: Path) -> list[list[float]]:
    """[seed][update] mean training episode return from a lab run's metrics.csv."""
    per_seed: dict[int, list[float]] = {}
    for row in rundir.read_metrics(Path(run_dir) / rundir.METRICS):
        per_seed.setdefault(row["seed"], []).append(row["train/mean_episode_return"])
    return [per_seed[s] for s in sorted(per_seed)]


def log_wrapper_per_update(info: dict) -> list[list[float]]:
    """[seed][update] mean return of the episodes that ended in each update, from PureJaxRL's
    `LogWrapper` info arrays shaped [seeds, updates, steps, envs]."""
    done = np.asarray(info["returned_episode"], np.float64)
    returns = np.asarray(info["returned_episode_returns"], np.float64)
    ended = done.sum(axis=(2, 3))
    per_update = np.where(ended > 0, (returns * done).sum(axis=(2, 3)) / np.maximum(ended, 1), np.nan)
    return per_update.tolist()


def table(results: list[dict]) -> str:
    """Markdown rows: each result's score (mean and 95% interval over seeds) and its speed.
    A result has `label`, `seeds`, `timesteps` (per seed), `score` (per seed), `wall_s`, `sps`."""
    rows = []
    for r in results:
        s = mean_summary(r["score"], TRAIN_RETURN)
        rows.append([r["label"], f"{r['seeds']} x {r['timesteps']:,}", tb.interval(s["mean"], s["ci_low"], s["ci_high"], spec=".1f"),
                     ", ".join(f"{v:.0f}" for v in r["score"]), f"{r['wall_s']:.0f}", f"{r['sps']:,.0f}"])
    return tb.table(["side", "seeds x steps", "score: mean [95% t-interval]", "per seed", "wall s", "steps/s"],
                    ["l", "r", "l", "l", "r", "r"], rows)
