"""The lab's 95% intervals cover what they claim, measured: seeds simulated from distributions
whose truth is known (ppo_lab/analysis/coverage.py's families: normal; skewed lognormal; bounded
with mass at the bound like CartPole's return; a 0/1 success) at n = 3, 4, 5, 8, 16.

The interval of a mean across seeds (what `mean_summary` gives every table and closing summary)
and of a difference of two groups (`ppo-lab compare`) cover at least 93% for normal, CartPole-like
and 0/1 seeds, at least 85% for lognormal ones and no less than Student t does for those; the
interval the lab gave before (a percentile bootstrap below 5 seeds and for known-bounded metrics,
Student t for an undeclared CartPole return) is shown to fail the same check. The bootstrap
intervals (the IQM, rliable's aggregates, P(A > B)) are given only from 8 runs, where they cover."""

from __future__ import annotations

import numpy as np
import pytest

from ppo_lab import estimators as es
from ppo_lab.analysis import coverage

TRIALS = 4000
NS = (3, 4, 5, 8, 16)
FAMILIES = {f.name: f for f in coverage.FAMILIES}
FLOOR = {"normal": 0.93, "CartPole-like": 0.93, "0/1 success": 0.93, "lognormal (sigma 0.8)": 0.85}


def covered(interval, family, n, seed=0, difference=False) -> float:
    """The share of `TRIALS` samples of n seeds whose interval holds the truth; `interval(x,
    bounds)` gives (low, high) per row of x (or of x - y's groups with `difference`)."""
    rng = np.random.default_rng([seed, n])
    a = family.draw(rng, (TRIALS, n))
    if difference:
        b = family.draw(rng, (TRIALS, n), True)
        low, high = interval(a, b, family.bounds)
        truth = family.mean() - family.mean(True)
    else:
        low, high = interval(a, family.bounds)
        truth = family.mean()
    return float(np.mean((low <= truth) & (truth <= high)))


def lab_mean(x, bounds):
    return es.mean_interval(x, *bounds)


def lab_difference(a, b, bounds):
    return es.difference_interval(a, b, *bounds)[:2]


def student_t(x, bounds):
    return es.t_interval(x)


def old_mean(x, bounds):
    """The interval the lab gave before: a seeded percentile bootstrap of the mean held to the
    seeds' range below 5 seeds or for a metric bounded by its name (a share, a 0/1 success),
    else Student t (a CartPole return: no env declared its bounds)."""
    n = x.shape[1]
    if n >= 5 and bounds != (0.0, 1.0):
        return es.t_interval(x)
    means = x[:, np.random.default_rng(0).integers(0, n, (500, n))].mean(axis=2)
    return np.quantile(means, 0.025, axis=1), np.quantile(means, 0.975, axis=1)


def test_the_families_truths_by_hand():
    assert FAMILIES["normal"].mean() == pytest.approx(0.0, abs=1e-6)
    assert FAMILIES["lognormal (sigma 0.8)"].mean() == pytest.approx(np.exp(0.8 ** 2 / 2), rel=1e-4)
    assert FAMILIES["CartPole-like"].mean() == pytest.approx(0.7 * 500 + 0.3 * 160)  # 398
    assert FAMILIES["CartPole-like"].mean(True) == pytest.approx(0.4 * 500 + 0.6 * 160)
    assert FAMILIES["0/1 success"].mean() == pytest.approx(0.7) and FAMILIES["0/1 success"].mean(True) == pytest.approx(0.4)
    x = FAMILIES["CartPole-like"].draw(np.random.default_rng(0), (100_000,))
    assert np.mean(x == 500) == pytest.approx(0.7, abs=0.01) and x.min() >= 20 and x[x < 500].max() <= 300


@pytest.mark.parametrize("name", list(FAMILIES))
def test_the_interval_of_a_mean_covers_what_it_claims(name):
    family = FAMILIES[name]
    for n in NS:
        lab, t = covered(lab_mean, family, n), covered(student_t, family, n)
        assert lab >= FLOOR[name], (name, n, lab)
        if family.bounds == (None, None):  # unbounded, skewed or not: never below Student t
            assert lab >= t, (name, n, lab, t)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_the_interval_of_a_difference_covers_what_it_claims(name):
    family = FAMILIES[name]
    for n in NS:
        assert covered(lab_difference, family, n, difference=True) >= FLOOR[name], (name, n)


def test_the_check_fails_the_interval_the_lab_gave_before():
    """The same simulation rejects the old interval: 76% for 3 normal seeds, a CartPole
    return under 93% at 8 seeds, a 0/1 success under 80% at 3."""
    assert covered(old_mean, FAMILIES["normal"], 3) < 0.8
    assert covered(old_mean, FAMILIES["CartPole-like"], 8) < 0.93
    assert covered(old_mean, FAMILIES["0/1 success"], 3) < 0.8
    assert covered(old_mean, FAMILIES["lognormal (sigma 0.8)"], 4) < covered(student_t, FAMILIES["lognormal (sigma 0.8)"], 4)


def test_a_bootstrap_interval_only_from_eight_runs():
    """Below BOOTSTRAP_MIN_RUNS a percentile bootstrap of n values cannot leave their range (for
    3 normal seeds it covers at most 1 - 2/8 = 75%): the lab gives no interval there."""
    x = np.random.default_rng(0).normal(size=7)
    assert np.isnan(es.mean_summary(x, "x")["iqm_ci_low"]) and not np.isnan(es.mean_summary(np.r_[x, 0.0], "x")["iqm_ci_low"])
    assert np.isnan(es.interval_estimates(x, names=["mean"])["mean"]["ci_high"])
    assert np.isnan(es.probability_of_improvement_interval(x, x + 1, reps=50)["ci_low"])


@pytest.mark.slow
@pytest.mark.parametrize("n", [8, 16])
def test_the_bootstrap_intervals_cover_from_eight_runs(n):
    """The IQM over seeds, rliable's aggregates over four tasks and P(A > B), each read at the
    lab's expanded percentiles, on 300 samples (a 95% interval of their coverage is about
    +/- 2.5 points: the floor is 90%)."""
    rng = np.random.default_rng(n)
    rows = [row for family in coverage.FAMILIES for row in coverage.iqm_rows(family, n, 300, rng, 500)
            + coverage.improvement_rows(family, n, 300, rng, 500)] + coverage.rliable_rows(n, 300, rng, 500)
    lab = [row for row in rows if row["method"].startswith("the lab's")]
    assert len(lab) == 4 + 4 + 3
    assert all(row["coverage"] >= 0.90 for row in lab), [(r["estimate"], r["family"], r["coverage"]) for r in lab]
