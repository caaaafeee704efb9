"""ppo_lab.estimators against small hand-computed cases (their coverage: tests/test_coverage.py)."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats as st

from ppo_lab.estimators import (
    SUMMARY_KEYS,
    anderson_interval,
    bonferroni,
    cohens_d,
    difference_interval,
    interval_estimates,
    iqm,
    mean_summary,
    metric_range,
    trim_mean,
    welch_t_test,
)
from ppo_lab.judging.headline import declared_bounds

NAN = float("nan")
# Student's t, two-sided 95%, 3 degrees of freedom (statistical tables: 3.182446).
T_975_DF3 = 3.182446305284263
# Anderson's eps at 95% for 3 values: sqrt(ln(2 / 0.05) / 6)
EPS_3 = math.sqrt(math.log(40.0) / 6.0)


def summarize(values, **kw):
    """The summary of a metric with no known bounds (Student t)."""
    return mean_summary(values, "x", **kw)


def test_summary_has_exactly_the_documented_keys():
    assert tuple(summarize([1.0, 2.0, 3.0])) == (*SUMMARY_KEYS, "ci_method")
    assert set(SUMMARY_KEYS) == {
        "n_seeds", "mean", "std", "var", "sem", "ci_low", "ci_high",
        "iqm", "iqm_ci_low", "iqm_ci_high",
    }


def test_summary_of_one_to_four_by_hand():
    s = summarize([1, 2, 3, 4])
    assert s["n_seeds"] == 4 and s["ci_method"] == "t"
    assert s["mean"] == pytest.approx(2.5)
    # sum of squared deviations 2.25+0.25+0.25+2.25 = 5, over n-1 = 3
    assert s["var"] == pytest.approx(5 / 3)
    assert s["std"] == pytest.approx(math.sqrt(5 / 3))
    # sem = sqrt(5/3) / sqrt(4) = sqrt(5/12) = 0.645497...
    assert s["sem"] == pytest.approx(0.6454972243679028)
    # 2.5 -/+ 3.182446 * 0.645497 = 2.5 -/+ 2.054260
    assert s["ci_low"] == pytest.approx(0.445739743, abs=1e-8)
    assert s["ci_high"] == pytest.approx(4.554260257, abs=1e-8)
    assert s["ci_high"] - s["mean"] == pytest.approx(T_975_DF3 * math.sqrt(5 / 12))
    # IQM of 4 values trims one from each end: mean(2, 3); no bootstrap interval below 8 seeds
    assert s["iqm"] == pytest.approx(2.5)
    assert math.isnan(s["iqm_ci_low"]) and math.isnan(s["iqm_ci_high"])


def test_iqm_trims_a_quarter_each_side():
    assert iqm(range(1, 9)) == pytest.approx(4.5)  # middle 3, 4, 5, 6
    # outliers at both ends do not move it: sorted [-100, 1, 2, 3, 4, 5, 6, 10] -> 2, 3, 4, 5
    assert iqm([10, 1, 2, 3, 4, 5, 6, -100]) == pytest.approx(3.5)
    # n = 5 cuts int(1.25) = 1 value each side: mean(2, 3, 4)
    assert iqm([1, 2, 3, 4, 100]) == pytest.approx(3.0)
    # fewer than 4 values: nothing is cut
    assert iqm([1, 2, 9]) == pytest.approx(4.0)
    # same as rliable's definition
    x = np.random.default_rng(3).normal(size=37)
    assert iqm(x) == pytest.approx(st.trim_mean(x, 0.25))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8, 37, 100])
def test_trim_mean_is_scipys_bit_for_bit(n):
    """The IQM is computed without importing scipy.stats (0.5 s in every training process):
    the same numbers, to the bit, as scipy's, for one list and for bootstrap resamples."""
    x = np.random.default_rng(n).normal(size=n) * 1e3
    assert trim_mean(x, 0.25) == st.trim_mean(x, 0.25)
    samples = x[np.random.default_rng(0).integers(0, n, size=(50, n))]
    assert np.array_equal(trim_mean(samples, 0.25, axis=1), st.trim_mean(samples, 0.25, axis=1))


def test_the_interval_is_scipys_student_t():
    """The half-width without importing scipy.stats: t.ppf's own `stdtrit`."""
    for n in [2, 3, 5, 10, 31, 200]:
        x = np.random.default_rng(n).normal(size=n)
        s = summarize(x, confidence=0.9)
        sem = math.sqrt(float(np.var(x, ddof=1))) / math.sqrt(n)
        half = float(st.t.ppf(0.95, df=n - 1)) * sem
        assert (s["ci_low"], s["ci_high"]) == pytest.approx((s["mean"] - half, s["mean"] + half), rel=1e-12, abs=1e-12)


def test_iqm_bootstrap_from_eight_seeds_is_deterministic_and_seeded():
    x = np.random.default_rng(0).normal(10.0, 2.0, size=10)
    a, b = summarize(x), summarize(list(x))
    assert (a["iqm_ci_low"], a["iqm_ci_high"]) == (b["iqm_ci_low"], b["iqm_ci_high"])
    assert a["iqm_ci_low"] < a["iqm"] < a["iqm_ci_high"]
    assert (a["iqm_ci_low"], a["iqm_ci_high"]) == (interval_estimates(x, names=["iqm"])["iqm"]["ci_low"],
                                                  interval_estimates(x, names=["iqm"])["iqm"]["ci_high"])
    assert interval_estimates(x, seed=0, names=["iqm"]) != interval_estimates(x, seed=1, names=["iqm"])
    # a constant sample has a degenerate interval
    assert summarize([7.0] * 8)["iqm_ci_low"] == summarize([7.0] * 8)["iqm_ci_high"] == 7.0


def test_single_seed_gives_nan_spread_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = summarize([3.5])
        bounded = mean_summary([0.5], "eval/food_share")
    assert s["n_seeds"] == 1
    assert s["mean"] == 3.5 and s["iqm"] == 3.5
    for k in ("std", "var", "sem", "ci_low", "ci_high", "iqm_ci_low", "iqm_ci_high"):
        assert math.isnan(s[k]) and math.isnan(bounded[k]), k


def test_empty_input():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = summarize([])
    assert s["n_seeds"] == 0
    assert all(math.isnan(s[k]) for k in SUMMARY_KEYS if k != "n_seeds")


def test_nan_values_are_dropped_and_counted():
    x = [1.0, NAN, 3.0, NAN]
    np.testing.assert_equal(summarize(x), summarize([1.0, 3.0]))
    assert summarize(x)["n_seeds"] == 2
    assert summarize([NAN])["n_seeds"] == 0


def test_anderson_by_hand():
    """eps = sqrt(ln(2/alpha) / 2n) of the probability moves to a bound: from the lowest seeds
    up to `high` for the upper end, from the highest down to `low` for the lower end."""
    # [0.2, 0.5, 0.9] in [0, 1], eps = 0.784: the upper end moves 1 - eps of the top seed's
    # mass past 0.9 ... = 1 - (1 - eps) * (1 - 0.9); the lower end keeps (1 - eps) of 0.2.
    low, high = anderson_interval(np.array([0.2, 0.5, 0.9]), 0.0, 1.0)
    assert (low, high) == pytest.approx(((1 - EPS_3) * 0.2, 1 - (1 - EPS_3) * 0.1))
    # Three CartPole seeds at 500: [500 (1 - eps), 500] = [107.95, 500]
    low, high = anderson_interval(np.array([500.0] * 3), 0.0, 500.0)
    assert (low, high) == pytest.approx((500 * (1 - EPS_3), 500.0)) and round(float(low)) == 108
    # NaN rows are ignored per row; a row of fewer than 2 values has no interval
    lows, highs = anderson_interval(np.array([[0.2, 0.5, 0.9, NAN], [0.4, NAN, NAN, NAN]]), 0.0, 1.0)
    assert lows[0] == pytest.approx((1 - EPS_3) * 0.2) and math.isnan(lows[1]) and math.isnan(highs[1])
    # Many seeds: eps -> 0 and the interval closes on the mean
    x = np.random.default_rng(0).uniform(size=200_000)
    low, high = anderson_interval(x, 0.0, 1.0)
    assert low < x.mean() < high and high - low < 0.02
    # A seed past a declared bound widens that bound: the interval still holds the mean
    low, high = anderson_interval(np.array([0.5, 1.5]), 0.0, 1.0)
    assert low <= 1.0 <= high and high == pytest.approx(1.5)


def test_which_interval_a_metric_gets():
    assert metric_range("eval/food_share") == metric_range("criteria/kl_ok_frac") == metric_range("actions/left") == (0.0, 1.0)
    assert metric_range("eval/efficiency_per_life_greedy") == (0.0, 1.0)
    assert metric_range("eval/episode_length") == metric_range("actions/std_0") == (0.0, None)
    assert metric_range("actions/mean_0") == metric_range("eval/episode_return") == (None, None)
    assert metric_range("criteria/length_gain") == (None, None)  # a gain may be negative
    bounds = declared_bounds({"metrics": {"bounds": {"episode_return": [0, 500], "eval/x": [None, 3]}}})
    for metric in ("eval/episode_return", "eval/episode_return_greedy", "train/mean_episode_return"):
        assert metric_range(metric, bounds) == (0.0, 500.0)
    assert metric_range("eval/x", bounds) == (None, 3.0)
    assert mean_summary([0.2, 0.9], "eval/food_share")["ci_method"] == "anderson"
    # Two CartPole lengths: Student t, held at 0 (t alone gives [-2800, 3300])
    s = mean_summary([22.0, 500.0], "eval/episode_length")
    assert s["ci_method"] == "t" and s["ci_low"] == 0.0 and s["ci_high"] > 3000


def test_a_return_the_env_declares_bounded_gets_andersons_interval_inside_the_bounds():
    returns = [0.99, 0.97, 0.95, 0.99, 0.76]  # five seeds of a corridor's return, at most 0.99
    free = mean_summary(returns, "eval/episode_return")
    assert free["ci_method"] == "t" and free["ci_high"] > 0.99  # a t interval passes the bound
    bounds = declared_bounds({"metrics": {"bounds": {"episode_return": [0, 0.99]}}})
    for metric in ("eval/episode_return", "eval/episode_return_greedy", "train/mean_episode_return"):
        s = mean_summary(returns, metric, bounds=bounds)
        assert s["ci_method"] == "anderson" and 0 <= s["ci_low"] <= s["mean"] <= s["ci_high"] <= 0.99, (metric, s)
        assert (s["ci_low"], s["ci_high"]) == tuple(float(v) for v in anderson_interval(np.array(returns), 0, 0.99))


def test_welch_by_hand_and_against_scipy():
    # a = 1,2,3 and b = 3,4,5: both var 1, n 3 -> t = -2 / sqrt(1/3 + 1/3) = -sqrt(6), df = 4
    t, p = welch_t_test([1, 2, 3], [3, 4, 5])
    assert t == pytest.approx(-math.sqrt(6))
    assert p == pytest.approx(2 * st.t.sf(math.sqrt(6), df=4))
    rng = np.random.default_rng(7)
    a, b = rng.normal(0, 1, 8), rng.normal(1, 3, 5)
    ref = st.ttest_ind(a, b, equal_var=False)
    t, p = welch_t_test(a, b)
    assert t == pytest.approx(ref.statistic) and p == pytest.approx(ref.pvalue)
    assert all(math.isnan(v) for v in welch_t_test([1.0], [2.0, 3.0]))


def test_difference_interval_by_hand():
    # Welch: -2 -/+ t_{0.975, 4} * sqrt(1/3 + 1/3) = -2 -/+ 2.776 * 0.8165
    low, high, method = difference_interval([1, 2, 3], [3, 4, 5])
    assert method == "welch" and (low, high) == pytest.approx((-2 - st.t.ppf(0.975, 4) * math.sqrt(2 / 3),
                                                              -2 + st.t.ppf(0.975, 4) * math.sqrt(2 / 3)))
    # the same as scipy's Welch interval for unequal sizes and spreads
    rng = np.random.default_rng(7)
    a, b = rng.normal(0, 1, 8), rng.normal(1, 3, 5)
    ref = st.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert difference_interval(a, b)[:2] == pytest.approx((ref.low, ref.high))
    # bounded: each group's Anderson interval at 97.5%, the extreme differences
    a, b = np.array([0.2, 0.5, 0.9]), np.array([0.1, 0.3, 0.4])
    (al, ah), (bl, bh) = anderson_interval(a, 0, 1, 0.975), anderson_interval(b, 0, 1, 0.975)
    assert difference_interval(a, b, 0.0, 1.0) == pytest.approx((al - bh, ah - bl, "anderson"))
    assert difference_interval([1.0, 1.0], [1.0, 1.0])[:2] == (0.0, 0.0)
    assert all(math.isnan(v) for v in difference_interval([1.0], [1.0, 2.0])[:2])


def test_cohens_d_by_hand():
    # equal unit variances, means 2 and 4
    assert cohens_d([1, 2, 3], [3, 4, 5]) == pytest.approx(-2.0)
    # var_a = 4 (n 3), var_b = 2.5 (n 5): pooled = sqrt((2*4 + 4*2.5) / 6) = sqrt(3); diff = 1
    assert cohens_d([2, 4, 6], [1, 2, 3, 4, 5]) == pytest.approx(1 / math.sqrt(3))
    assert cohens_d([1, 1], [1, 1]) == 0.0
    assert cohens_d([2, 2], [1, 1]) == math.inf
    assert math.isnan(cohens_d([1.0], [1.0, 2.0]))


def test_bonferroni():
    np.testing.assert_allclose(bonferroni([0.01, 0.04, 0.5]), [0.03, 0.12, 1.0])
    adj = bonferroni([0.01, NAN])
    assert adj[0] == pytest.approx(0.01) and math.isnan(adj[1])
    assert bonferroni([]).shape == (0,)
