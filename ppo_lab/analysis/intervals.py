"""Which interval a mean across seeds gets, and when a sample is too small to trust.

- A metric with known bounds (episode lengths: 0..the env's cap; shares, fractions and
  efficiencies: 0..1) gets a seeded percentile bootstrap interval of the mean over seeds
  (``ci_method = "bootstrap"``): every resampled mean lies between the smallest and the largest
  seed, so the interval stays inside the bounds whatever the sample size. A Student-t
  interval does not: two CartPole seeds at 22 and 500 give [-2800, 3300].
- So does every metric of a group with fewer than ``SMALL_SAMPLE`` seeds: a t interval from
  2..4 values rests on a variance estimated from as few, and its width explodes with t's
  quantile (12.7 at n=2). Such a group is also flagged (``small_sample``) and warned about in
  the printed table and the figures: no interval means much there (a bootstrap of 2 values
  can only return those two values and their midpoint).
- Every other metric gets the Student-t interval (``ci_method = "t"``).

An env declares the bounds of its own metrics that no name pattern knows (a return that cannot
pass 1) under `metrics.bounds` in its YAML (``declared_bounds``); those get the bootstrap too, and
the interval is also held inside the declared range. The same rule serves every place that shows
a mean across seeds: a run's closing summary, ``ppo-lab aggregate``, ``compare`` and the notebooks.
"""

from __future__ import annotations

import re
from typing import Mapping

import numpy as np

from ppo_lab.analysis.stats import bootstrap_ci, summarize

SMALL_SAMPLE = 5
# Metric names (or their last part) whose values lie in a known range.
BOUNDED = re.compile(r"(episode_length|length|share|_frac|frac_|fraction|efficiency|survival_mean)|^actions/")


Bounds = Mapping[str, tuple]  # metric -> (low, high), as an env declares them (``declared_bounds``)


def declared_bounds(env_section: Mapping | None) -> dict[str, tuple]:
    """`metrics.bounds` of an env's config section: metric -> (low, high), a bound None when open."""
    raw = ((env_section or {}).get("metrics") or {}).get("bounds") or {}
    return {str(k): (v[0], v[1]) for k, v in raw.items()}


def _declared(metric: str, bounds: Bounds) -> tuple | None:
    """The declared range of `metric` (`eval/episode_return`, `eval/episode_return_greedy` and
    `train/mean_episode_return` all answer to `episode_return`), or None."""
    if metric in bounds:
        return bounds[metric]
    leaf = metric.rsplit("/", 1)[-1].removesuffix("_greedy").removeprefix("mean_")
    return bounds.get(leaf, bounds.get(f"eval/{leaf}"))


def is_bounded(metric: str, bounds: Bounds = {}) -> bool:  # noqa: B006 - read only
    return bool(BOUNDED.search(metric)) or _declared(metric, bounds) is not None


def ci_method(metric: str, n: int, bounds: Bounds = {}) -> str:  # noqa: B006 - read only
    return "bootstrap" if is_bounded(metric, bounds) or n < SMALL_SAMPLE else "t"


def bounded_mean_interval(values, confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean (NaN for fewer than 2 values), held to the
    seeds' range against rounding (a mean of three 31.1s is 31.100000000000005)."""
    low, high = bootstrap_ci(values, np.mean, confidence=confidence, seed=seed)
    x = np.asarray(values, dtype=np.float64)
    x = x[~np.isnan(x)]
    if x.size >= 2:
        low, high = float(np.clip(low, x.min(), x.max())), float(np.clip(high, x.min(), x.max()))
    return low, high


def mean_summary(values, metric: str, confidence: float = 0.95, bounds: Bounds = {}) -> dict:  # noqa: B006
    """`stats.summarize` of `values`, with `ci_low, ci_high` the interval `ci_method` picks
    for `metric` at this sample size (and the env's declared `bounds`), and `ci_method` saying
    which it is."""
    s = summarize(values, confidence=confidence)
    method = ci_method(metric, s["n_seeds"], bounds)
    if method == "bootstrap":  # stays inside the metric's bounds (between the extreme seeds)
        s["ci_low"], s["ci_high"] = bounded_mean_interval(values, confidence)
    declared = _declared(metric, bounds)
    if declared is not None and s["n_seeds"] >= 2:
        low, high = (-np.inf if declared[0] is None else declared[0]), (np.inf if declared[1] is None else declared[1])
        s["ci_low"], s["ci_high"] = float(np.clip(s["ci_low"], low, high)), float(np.clip(s["ci_high"], low, high))
    s["ci_method"] = method
    return s


def small_sample_warning(n: int) -> str | None:
    if 0 < n < SMALL_SAMPLE:
        return f"n={n} < {SMALL_SAMPLE}: too few seeds for these intervals to be trusted"
    return None
