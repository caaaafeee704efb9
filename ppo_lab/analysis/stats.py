"""Statistics across seeds: pure numpy/scipy, no pandas, no plotting.

The unit is one value per (run, seed), e.g. the final evaluation return of each seed. These
are the numbers the Goodhart experiment reports: mean with a Student-t interval, the
interquartile mean (IQM) with a bootstrap interval as recommended by rliable (Agarwal et al.,
2021, "Deep RL at the Edge of the Statistical Precipice"), Welch's t-test between two groups
of seeds, Cohen's d as effect size, and a Bonferroni correction across several comparisons.

NaN handling: NaN values (a seed that diverged, a metric a run did not log) are dropped before
any statistic; ``n_seeds`` counts only the values used, and :func:`count_nan` counts the dropped
ones (report both when they differ). +/-inf is kept (it is a value, and it makes the mean
infinite, which is honest).
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np

from ppo_lab.parts import lazy_module

# scipy.stats takes 0.5-0.8 s to import: loaded when a t-test is first asked for, not by every
# training process that closes with an interval. The interval's Student-t quantile is
# scipy.special's `stdtrit`, the function `scipy.stats.t.ppf` calls (the same bits; 0.2 s).
_st = lazy_module("scipy.stats")
_special = lazy_module("scipy.special")

__all__ = [
    "SUMMARY_KEYS",
    "summarize",
    "count_nan",
    "iqm",
    "bootstrap_ci",
    "welch_t_test",
    "cohens_d",
    "trim_mean",
    "bonferroni",
]

#: Keys of ``summarize``'s result, exactly and in order.
SUMMARY_KEYS = (
    "n_seeds",
    "mean",
    "std",
    "var",
    "sem",
    "ci_low",
    "ci_high",
    "iqm",
    "iqm_ci_low",
    "iqm_ci_high",
)

_NAN = float("nan")


def _as_1d(values: Iterable[float] | np.ndarray) -> tuple[np.ndarray, int]:
    """Flatten to float64 and drop NaN. Returns (finite-or-inf values, number of NaN dropped)."""
    x = np.asarray(list(values) if not hasattr(values, "__array__") else values, dtype=np.float64)
    x = x.reshape(-1)
    nan = np.isnan(x)
    return x[~nan], int(nan.sum())


def trim_mean(a: np.ndarray, proportion: float, axis: int = 0) -> np.ndarray | float:
    """``scipy.stats.trim_mean``'s computation, bit for bit (the same cut, partition and mean),
    without importing scipy.stats: cut ``int(proportion * n)`` values from each end along
    `axis`, average the rest."""
    n = a.shape[axis]
    low = int(proportion * n)
    parted = np.partition(a, (low, n - low - 1), axis)
    middle = [slice(None)] * a.ndim
    middle[axis] = slice(low, n - low)
    return np.mean(parted[tuple(middle)], axis=axis)


def iqm(values: Iterable[float] | np.ndarray) -> float:
    """Interquartile mean: the mean of the middle 50% of the values.

    As in rliable: ``scipy.stats.trim_mean(x, 0.25)``, which cuts ``int(0.25 * n)`` values from
    each end of the sorted values (so for n < 4 nothing is cut and it equals the mean).
    NaN values are dropped; an empty input gives NaN.
    """
    x, _ = _as_1d(values)
    if x.size == 0:
        return _NAN
    return float(trim_mean(x, 0.25))


def bootstrap_ci(
    values: Iterable[float] | np.ndarray,
    statistic=iqm,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic`` over seeds.

    Resamples the seeds with replacement ``n_resamples`` times using a generator seeded with
    ``seed``, so the same input always gives the same interval. With fewer than 2 values there
    is nothing to resample and the interval is (NaN, NaN).
    """
    x, _ = _as_1d(values)
    n = x.size
    if n < 2:
        return _NAN, _NAN
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_resamples, n))
    samples = x[idx]
    if statistic is iqm:
        # vectorised trim_mean over the resamples (same cut as scipy: int(0.25 * n) each side)
        boot = trim_mean(samples, 0.25, axis=1)
    elif statistic is np.mean:
        boot = samples.mean(axis=1)
    else:
        boot = np.array([statistic(row) for row in samples], dtype=np.float64)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(boot, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def summarize(
    values: Iterable[float] | np.ndarray,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> dict:
    """Summary of one metric across seeds.

    Returns a dict with exactly the keys ``n_seeds, mean, std, var, sem, ci_low, ci_high, iqm,
    iqm_ci_low, iqm_ci_high`` (``SUMMARY_KEYS``), floats except ``n_seeds``:

    - ``n_seeds``: number of non-NaN values used (NaN are dropped; see :func:`count_nan`).
    - ``std``/``var``: sample statistics (``ddof=1``); ``sem = std / sqrt(n)``.
    - ``ci_low``/``ci_high``: ``confidence`` interval of the mean from Student's t with n-1
      degrees of freedom: ``mean -/+ t_{(1+c)/2, n-1} * sem``.
    - ``iqm``: interquartile mean (see :func:`iqm`); ``iqm_ci_low``/``iqm_ci_high``: seeded
      percentile bootstrap over seeds (see :func:`bootstrap_ci`), deterministic for the
      same input and ``seed``.

    With one value, the mean and IQM are that value and every spread and interval is NaN;
    with none, ``n_seeds`` is 0 and everything else NaN. Never raises for short inputs.
    """
    x, _ = _as_1d(values)
    n = int(x.size)
    out = dict.fromkeys(SUMMARY_KEYS, _NAN)
    out["n_seeds"] = n
    if n == 0:
        return out
    mean = float(np.mean(x))
    out["mean"] = mean
    out["iqm"] = iqm(x)
    if n >= 2:
        var = float(np.var(x, ddof=1))
        std = math.sqrt(var)
        sem = std / math.sqrt(n)
        half = float(_special.stdtrit(n - 1, (1.0 + confidence) / 2.0)) * sem
        out.update(var=var, std=std, sem=sem, ci_low=mean - half, ci_high=mean + half)
        out["iqm_ci_low"], out["iqm_ci_high"] = bootstrap_ci(
            x, iqm, confidence=confidence, n_resamples=n_resamples, seed=seed
        )
    return out


def count_nan(values: Iterable[float] | np.ndarray) -> int:
    """Number of NaN values that :func:`summarize` and the tests below drop."""
    return _as_1d(values)[1]


def welch_t_test(a: Iterable[float], b: Iterable[float]) -> tuple[float, float]:
    """Welch's two-sided t-test (unequal variances) of mean(a) vs mean(b).

    Returns ``(t, p)``; ``t > 0`` when a's mean is larger. NaN values are dropped; with fewer
    than 2 values in either group the result is (NaN, NaN).
    """
    x, _ = _as_1d(a)
    y, _ = _as_1d(b)
    if x.size < 2 or y.size < 2:
        return _NAN, _NAN
    res = _st.ttest_ind(x, y, equal_var=False)
    return float(res.statistic), float(res.pvalue)


def cohens_d(a: Iterable[float], b: Iterable[float]) -> float:
    """Cohen's d: ``(mean(a) - mean(b)) / s_pooled``.

    ``s_pooled = sqrt(((n_a - 1) var_a + (n_b - 1) var_b) / (n_a + n_b - 2))`` with ``ddof=1``
    variances. NaN values are dropped. NaN when either group has fewer than 2 values; +/-inf
    when the pooled spread is zero and the means differ, 0 when both are equal.
    """
    x, _ = _as_1d(a)
    y, _ = _as_1d(b)
    na, nb = x.size, y.size
    if na < 2 or nb < 2:
        return _NAN
    diff = float(np.mean(x) - np.mean(y))
    pooled = math.sqrt(
        ((na - 1) * np.var(x, ddof=1) + (nb - 1) * np.var(y, ddof=1)) / (na + nb - 2)
    )
    if pooled == 0.0:
        return 0.0 if diff == 0.0 else math.copysign(math.inf, diff)
    return diff / pooled


def bonferroni(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    """Bonferroni-adjusted p-values: ``min(1, p * m)`` for m comparisons.

    Compare the adjusted values with the family-wise level (e.g. 0.05). NaN p-values stay NaN
    and do not count towards m (a comparison that could not be made is not a test).
    """
    p = np.asarray(pvalues, dtype=np.float64).reshape(-1)
    m = int(np.count_nonzero(~np.isnan(p)))
    return np.minimum(1.0, p * m)
