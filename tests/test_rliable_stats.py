"""rliable's estimators against rliable itself (the oracle): same scores, same seed, same numbers.

rliable 1.2's bootstrap imports `arch`, whose package `__init__` fails under pandas 3 (its
univariate models use a pandas decorator that changed); its `bootstrap` subpackage, which is
all rliable needs, imports fine on its own, so the oracle loads it without `arch/__init__`.
"""

from __future__ import annotations

import importlib.util
import sys
import types

import numpy as np
import pytest
from scipy import stats

from ppo_lab import estimators as rs


def _rliable():
    if "arch" not in sys.modules:
        spec = importlib.util.find_spec("arch")
        if spec is None or importlib.util.find_spec("rliable") is None:
            pytest.skip("rliable (the test extra) is not installed")
        pkg = types.ModuleType("arch")
        pkg.__path__ = list(spec.submodule_search_locations)
        sys.modules["arch"] = pkg
    from rliable import library, metrics
    return library, metrics


SCORES = np.random.default_rng(1).normal(0.5, 0.4, size=(5, 3))
OTHER = np.random.default_rng(2).normal(0.4, 0.4, size=(4, 3))


@pytest.mark.parametrize("name", list(rs.AGGREGATES))
def test_interval_estimates_match_rliable(name):
    library, metrics = _rliable()
    func = {"iqm": metrics.aggregate_iqm, "median": metrics.aggregate_median, "mean": metrics.aggregate_mean,
            "optimality_gap": metrics.aggregate_optimality_gap}[name]
    np.random.seed(7)  # rliable 1.2 draws its resamples from numpy's global generator
    point, ci = library.get_interval_estimates({"a": SCORES}, lambda s: np.array([func(s)]), reps=400)
    ours = rs.interval_estimates(SCORES, reps=400, seed=7, names=[name], as_rliable=True)[name]
    assert ours["point"] == pytest.approx(float(point["a"][0]), abs=1e-12)
    assert [ours["ci_low"], ours["ci_high"]] == pytest.approx(ci["a"].ravel().tolist(), abs=1e-12)
    assert ours["ci_low"] <= ours["point"] <= ours["ci_high"]


def test_iqm_is_scipys_trimmed_mean():
    assert rs.aggregate("iqm", SCORES) == pytest.approx(stats.trim_mean(SCORES.ravel(), 0.25))


def test_performance_profile_matches_rliable():
    library, _ = _rliable()
    taus = np.linspace(-0.5, 1.5, 9)
    np.random.seed(3)
    profiles, bands = library.create_performance_profile({"a": SCORES}, taus, reps=200)
    ours = rs.performance_profile(SCORES, taus, reps=200, seed=3, as_rliable=True)
    assert ours["profile"] == pytest.approx(profiles["a"].tolist())
    np.testing.assert_allclose([ours["low"], ours["high"]], bands["a"])


def test_probability_of_improvement_matches_rliable():
    library, metrics = _rliable()
    np.random.seed(5)
    point, ci = library.get_interval_estimates(
        {"xy": [SCORES, OTHER]}, lambda x, y: np.array([metrics.probability_of_improvement(x, y)]), reps=200)
    ours = rs.probability_of_improvement_interval(SCORES, OTHER, reps=200, seed=5, as_rliable=True)
    assert ours["point"] == pytest.approx(float(point["xy"][0]))
    assert [ours["ci_low"], ours["ci_high"]] == pytest.approx(ci["xy"].ravel().tolist())
    assert rs.probability_of_improvement(SCORES, SCORES) == 0.5
    # Groups of the same shape draw their resamples in one call: rliable's numbers still
    np.random.seed(5)
    _, ci = library.get_interval_estimates(
        {"xy": [SCORES, OTHER[:1].repeat(5, 0) + SCORES]}, lambda x, y: np.array([metrics.probability_of_improvement(x, y)]),
        reps=200)
    same = rs.probability_of_improvement_interval(SCORES, OTHER[:1].repeat(5, 0) + SCORES, reps=200, seed=5, as_rliable=True)
    assert [same["ci_low"], same["ci_high"]] == pytest.approx(ci["xy"].ravel().tolist())


def test_normalize_and_matrix():
    assert rs.normalize([22.0, 500.0], 22.0, 500.0).tolist() == [0.0, 1.0]
    with pytest.raises(ValueError):
        rs.normalize([1.0], 3.0, 3.0)
    matrix, tasks = rs.score_matrix({"a": [1, 2, 3], "b": [4, 5]})
    assert matrix.shape == (2, 2) and tasks == ["a", "b"]


def test_the_lab_reads_rliables_replicates_wider_and_not_below_eight_runs():
    """The same replicates, read at Hesterberg's expanded percentiles: wider than rliable's at
    8 runs (alpha'/2 = Phi(-sqrt(8/7) * t_{0.975, 7}) = 0.57%), and no interval from 5 runs."""
    eight = np.random.default_rng(4).normal(0.5, 0.4, size=(8, 3))
    theirs = rs.interval_estimates(eight, reps=400, seed=7, names=["mean"], as_rliable=True)["mean"]
    ours = rs.interval_estimates(eight, reps=400, seed=7, names=["mean"])["mean"]
    assert ours["point"] == theirs["point"] and ours["ci_low"] < theirs["ci_low"] < theirs["ci_high"] < ours["ci_high"]
    assert rs.bootstrap_percentiles(0.95, 8) == pytest.approx((100 * stats.norm.cdf(-np.sqrt(8 / 7) * stats.t.ppf(0.975, 7)),
                                                              100 * stats.norm.cdf(np.sqrt(8 / 7) * stats.t.ppf(0.975, 7))))
    assert rs.bootstrap_percentiles(0.95, None) == pytest.approx((2.5, 97.5))
    five = rs.interval_estimates(SCORES, reps=100, seed=7)
    assert all(np.isnan(e["ci_low"]) and np.isnan(e["ci_high"]) and np.isfinite(e["point"]) for e in five.values())
    assert np.isnan(rs.probability_of_improvement_interval(SCORES, OTHER, reps=50)["ci_low"])
