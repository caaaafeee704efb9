"""ppo_lab.analysis.stats against small hand-computed cases."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats as st

from ppo_lab.analysis.stats import (
    SUMMARY_KEYS,
    bonferroni,
    bootstrap_ci,
    cohens_d,
    count_nan,
    iqm,
    summarize,
    trim_mean,
    welch_t_test,
)

NAN = float("nan")
# Student's t, two-sided 95%, 3 degrees of freedom (statistical tables: 3.182446).
T_975_DF3 = 3.182446305284263


def test_summarize_has_exactly_the_documented_keys():
    assert tuple(summarize([1.0, 2.0, 3.0])) == SUMMARY_KEYS
    assert set(SUMMARY_KEYS) == {
        "n_seeds", "mean", "std", "var", "sem", "ci_low", "ci_high",
        "iqm", "iqm_ci_low", "iqm_ci_high",
    }


def test_summarize_one_to_four_by_hand():
    s = summarize([1, 2, 3, 4])
    assert s["n_seeds"] == 4
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
    # IQM of 4 values trims one from each end: mean(2, 3)
    assert s["iqm"] == pytest.approx(2.5)
    # Its bootstrap: a resample's IQM is the mean of its middle two values; it is 1 when at least
    # three of the four draws are 1: P = (4 * 3 + 1) / 4**4 = 13/256 = 5.1% > 2.5%, so the 2.5%
    # quantile is 1, and by symmetry the 97.5% quantile is 4: the interval is the whole range.
    assert (s["iqm_ci_low"], s["iqm_ci_high"]) == (1.0, 4.0)


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


def test_the_interval_is_scipys_student_t_bit_for_bit():
    """summarize's half-width without importing scipy.stats: t.ppf's own `stdtrit`, the same bits."""
    for n in [2, 3, 5, 10, 31, 200]:
        x = np.random.default_rng(n).normal(size=n)
        s = summarize(x, confidence=0.9)
        sem = math.sqrt(float(np.var(x, ddof=1))) / math.sqrt(n)
        half = float(st.t.ppf(0.95, df=n - 1)) * sem
        assert (s["ci_low"], s["ci_high"]) == (s["mean"] - half, s["mean"] + half)


def test_iqm_bootstrap_is_deterministic_and_seeded():
    x = np.random.default_rng(0).normal(10.0, 2.0, size=10)
    a = summarize(x)
    b = summarize(x.copy())
    assert (a["iqm_ci_low"], a["iqm_ci_high"]) == (b["iqm_ci_low"], b["iqm_ci_high"])
    assert bootstrap_ci(x, seed=0) == bootstrap_ci(list(x), seed=0)
    assert bootstrap_ci(x, seed=0) != bootstrap_ci(x, seed=1)
    lo, hi = bootstrap_ci(x)
    assert lo < iqm(x) < hi
    # a constant sample has a degenerate interval
    assert bootstrap_ci([7.0] * 6) == (7.0, 7.0)


def test_bootstrap_other_statistic():
    # Median of 5 draws from 1..5 is 1 when at least 3 draws are 1:
    # P = 10 * 0.2**3 * 0.8**2 + 5 * 0.2**4 * 0.8 + 0.2**5 = 5.8% > 2.5%: the whole range again.
    assert bootstrap_ci([1.0, 2.0, 3.0, 4.0, 5.0], np.median, n_resamples=500, seed=2) == (1.0, 5.0)
    # 1..41: the median of a resample is the k-th smallest value with k about binomial around
    # 21 +/- 1.96 * sqrt(41) / 2 = 21 +/- 6.3 (the sign test's interval), so about [15, 27],
    # well inside the range [1, 41].
    lo, hi = bootstrap_ci(np.arange(1.0, 42.0), np.median, n_resamples=500, seed=2)
    assert 14.0 <= lo <= 16.0 and 26.0 <= hi <= 28.0, (lo, hi)


def test_single_seed_gives_nan_spread_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = summarize([3.5])
    assert s["n_seeds"] == 1
    assert s["mean"] == 3.5 and s["iqm"] == 3.5
    for k in ("std", "var", "sem", "ci_low", "ci_high", "iqm_ci_low", "iqm_ci_high"):
        assert math.isnan(s[k]), k


def test_empty_input():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = summarize([])
    assert s["n_seeds"] == 0
    assert all(math.isnan(s[k]) for k in SUMMARY_KEYS if k != "n_seeds")


def test_nan_values_are_dropped_and_counted():
    x = [1.0, NAN, 3.0, NAN]
    assert summarize(x) == summarize([1.0, 3.0])
    assert summarize(x)["n_seeds"] == 2
    assert count_nan(x) == 2
    assert count_nan(np.array([[1.0, NAN], [NAN, NAN]])) == 3
    assert summarize([NAN])["n_seeds"] == 0


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


def test_a_return_the_env_declares_bounded_keeps_its_interval_inside_the_bounds():
    from ppo_lab.analysis.intervals import declared_bounds, mean_summary

    returns = [0.99, 0.97, 0.95, 0.99, 0.76]  # five seeds of a corridor's return, at most 0.99
    free = mean_summary(returns, "eval/episode_return")
    assert free["ci_method"] == "t" and free["ci_high"] > 0.99  # a t interval passes the bound
    bounds = declared_bounds({"metrics": {"bounds": {"episode_return": [0, 0.99]}}})
    for metric in ("eval/episode_return", "eval/episode_return_greedy", "train/mean_episode_return"):
        s = mean_summary(returns, metric, bounds=bounds)
        assert s["ci_method"] == "bootstrap" and 0 <= s["ci_low"] <= s["mean"] <= s["ci_high"] <= 0.99, (metric, s)
