"""Success criteria of a run, per (run, seed), from metrics.csv: PPO's health and progress
for any env, and those the run's env declares.

A tuning spec judges a setting by eye ("approx_kl < 0.06 and clip_frac < 0.30 throughout,
entropy above 1.0 through 500+ updates, episode length up, return above the old plateau").
Here each becomes a number per seed, so that aggregation gives it a mean and an interval per
sweep cell like any other metric:

==================================  ===========================================================
`criteria/kl_ok_frac`               share of updates with `train/approx_kl` < 0.06
`criteria/clip_ok_frac`             share of updates with `train/clip_frac` < 0.30
`criteria/entropy_above_1_frac`     share of updates with `train/entropy` > 1.0
`criteria/entropy_at_<U>`           `train/entropy` at update U, for U in `ENTROPY_UPDATES`
                                    that the run reached
`criteria/length_gain`              mean episode length over the last tenth of the updates
                                    minus over the first tenth (> 0: episodes got longer)
`criteria/return_gain`              the same for the mean episode return
`criteria/final_return`             mean episode return over the last tenth of the updates
==================================  ===========================================================

An env adds criteria of its own by naming, in its YAML, `metrics.criteria: DOTTED.PATH` of a
jax-free function `criteria(columns) -> {name: value}` (one seed's columns, as here): each
becomes `criteria/<name>` beside these (an experiment's own live in `ppo_lab/experiments/`).
It is loaded through `ppo_lab.parts`, the one late loader.

A criterion whose metric the run did not log is left out. The thresholds are the health
warnings' defaults (`health.kl_max`, `health.clip_frac_max`).
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

import numpy as np

from ppo_lab import parts
from ppo_lab.judging.headline import TRAIN_LENGTH, TRAIN_RETURN

KL_MAX = 0.06
CLIP_FRAC_MAX = 0.30
ENTROPY_MIN = 1.0
ENTROPY_UPDATES = (50, 100, 200, 300, 500, 1000)
PREFIX = "criteria/"
# An env's own criteria: one seed's metrics.csv columns -> {name (no prefix): value}.
EnvCriteria = Callable[[Mapping[str, np.ndarray]], Mapping[str, float]]


def _share(values: np.ndarray, ok) -> float:
    values = values[~np.isnan(values)]
    return float(np.mean(ok(values))) if values.size else math.nan


def tenth_mean(values: np.ndarray, last: bool) -> float:
    """NaN-ignoring mean over the first or last tenth of the updates (at least one update)."""
    values = np.asarray(values, dtype=float)
    n = max(1, len(values) // 10)
    part = values[-n:] if last else values[:n]
    part = part[~np.isnan(part)]
    return float(np.mean(part)) if part.size else math.nan


def declared_criteria(env_section: Mapping | None) -> EnvCriteria | None:
    """The criteria function an env section declares (`metrics.criteria`), loaded; or None."""
    path = ((env_section or {}).get("metrics") or {}).get("criteria")
    return None if path is None else parts.load("env.metrics.criteria", path)


def seed_criteria(columns: Mapping[str, np.ndarray], env_criteria: EnvCriteria | None = None) -> dict[str, float]:
    """The criteria of one seed from its metrics.csv columns (arrays ordered by update): the
    generic ones, then `env_criteria`'s (the env's own, `declared_criteria`)."""
    out: dict[str, float] = {}
    col = {k: np.asarray(v, dtype=float) for k, v in columns.items()}
    if "train/approx_kl" in col:
        out["kl_ok_frac"] = _share(col["train/approx_kl"], lambda v: v < KL_MAX)
    if "train/clip_frac" in col:
        out["clip_ok_frac"] = _share(col["train/clip_frac"], lambda v: v < CLIP_FRAC_MAX)
    if "train/entropy" in col:
        entropy = col["train/entropy"]
        out["entropy_above_1_frac"] = _share(entropy, lambda v: v > ENTROPY_MIN)
        updates = col.get("update", np.arange(1, len(entropy) + 1))
        for u in ENTROPY_UPDATES:
            hit = np.flatnonzero(updates == u)
            if hit.size:
                out[f"entropy_at_{u}"] = float(entropy[hit[-1]])
    for name, metric in (("length", TRAIN_LENGTH), ("return", TRAIN_RETURN)):
        if metric in col:
            out[f"{name}_gain"] = tenth_mean(col[metric], last=True) - tenth_mean(col[metric], last=False)
    if TRAIN_RETURN in col:
        out["final_return"] = tenth_mean(col[TRAIN_RETURN], last=True)
    if env_criteria is not None:
        out.update(env_criteria(col))
    return {PREFIX + k: v for k, v in out.items()}


def criteria_by_seed(history: Mapping[int, Mapping[str, np.ndarray]], env_section: Mapping | None) -> dict[int, dict]:
    """seed -> its criteria from its metrics.csv columns (`rundir.columns_by_seed`), the env's own
    (`declared_criteria` of its env section) included."""
    env_criteria = declared_criteria(env_section)
    return {seed: seed_criteria(columns, env_criteria) for seed, columns in history.items()}


def criteria_table(rows: list[dict], group_keys: Mapping[str, Mapping[str, str]]) -> tuple[list[dict], list[str]]:
    """criteria.csv: one row per cell (group), per criterion its mean and 95% interval as
    columns `<criterion>`, `<criterion>_ci_low`, `<criterion>_ci_high`, and `n_seeds`.
    `rows` are aggregate.csv's rows (one per group and metric)."""
    table: dict[str, dict] = {}
    names: list[str] = []
    for r in rows:
        if not r["metric"].startswith(PREFIX):
            continue
        name = r["metric"][len(PREFIX):]
        if name not in names:
            names.append(name)
        row = table.setdefault(r["group"], {"group": r["group"], **group_keys.get(r["group"], {}), "n_seeds": r["n_seeds"]})
        row[name], row[f"{name}_ci_low"], row[f"{name}_ci_high"] = r["mean"], r["ci_low"], r["ci_high"]
    columns = [c for name in names for c in (name, f"{name}_ci_low", f"{name}_ci_high")]
    return list(table.values()), columns
