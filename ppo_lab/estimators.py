"""Every statistic the lab reports, in one module: numpy, scipy's special functions, no pandas,
no plotting, no run files. Every table, curve, notebook, zoo table and closing summary asks here.

The unit is one value per (run, seed), e.g. the final evaluation return of each seed.

- The mean across seeds with an interval that holds its confidence (``mean_summary``, the one
  entry point; ``mean_interval`` per row of a matrix, for curves): Student t for a metric
  without known bounds; Anderson's distribution-free interval for a metric whose bounds are both
  known (shares and fractions: [0, 1]; a range an env declares, `env.metrics.bounds`), valid at
  any number of seeds, where t under-covers (seeds at the bound, as CartPole's 500, give t a
  zero spread). The interval of a difference of two groups' means (``difference_interval``):
  Welch's, or Anderson's for bounded metrics. Welch's t-test, a permutation test (for values
  Welch's t cannot take: groups without spread), Cohen's d, Bonferroni.
- The interquartile mean and rliable's aggregates (IQM, median, mean, optimality gap), the
  probability of improvement and performance profiles (Agarwal et al., NeurIPS 2021, to the
  letter), with one bootstrap: rliable's stratified resampling of runs within each task, read at
  Hesterberg's expanded percentiles and given only from ``BOOTSTRAP_MIN_RUNS`` runs per task
  (a percentile bootstrap of n values cannot leave their range, and under-covers at small n).

docs/statistics.md gives each method, its reference and its coverage as measured by
``ppo_lab.analysis.coverage``.

NaN values (a seed that diverged, a metric a run did not log) are dropped before any statistic;
``n_seeds`` counts the values used and :func:`finite` the dropped ones. +/-inf is kept.
"""

from __future__ import annotations

import itertools
import math
import re
import warnings
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from ppo_lab.parts import lazy_module

# scipy.stats takes 0.5-0.8 s to import: loaded when a t-test is first asked for, not by every
# training process that closes with an interval. Student t's and the normal's quantiles come
# from scipy.special (`stdtrit` is what `scipy.stats.t.ppf` calls; 0.2 s).
_st = lazy_module("scipy.stats")
_special = lazy_module("scipy.special")

SMALL_SAMPLE = 5  # fewer seeds than this: marked wherever an interval is shown (wide intervals)
BOOTSTRAP_MIN_RUNS = 8  # fewer runs per task: no bootstrap interval (docs/statistics.md, measured)
DEFAULT_REPS = 2000
DEFAULT_SEED = 0
T, ANDERSON, WELCH = "t", "anderson", "welch"  # the interval methods, as tables name them

#: Keys of ``mean_summary``'s result (besides ``ci_method``), exactly and in order.
SUMMARY_KEYS = ("n_seeds", "mean", "std", "var", "sem", "ci_low", "ci_high", "iqm", "iqm_ci_low", "iqm_ci_high")

_NAN = float("nan")
Bounds = Mapping[str, tuple]  # metric -> (low, high), an end None when open (`env.metrics.bounds`)
# Metrics in [0, 1] by their name: shares, fractions, efficiencies, a discrete action's share.
UNIT_RANGE = re.compile(r"(share|_frac|frac_|fraction|efficiency)|^actions/(?!(mean|std)_\d+$)")
# Metrics that cannot be negative, with no upper bound the name tells.
NON_NEGATIVE = re.compile(r"(episode_length|survival_mean|^actions/std_\d+$)")
# The evaluation's two plays, said by a metric's suffix (`episode_return_sampled`,
# `efficiency_per_life_greedy`): a play's metric has its metric's bounds and words.
PLAY_SUFFIXES = ("_sampled", "_greedy")


def play_of(leaf: str) -> tuple[str, str | None]:
    """`episode_return_greedy` -> ("episode_return", "greedy"); a leaf without a play's suffix -> (leaf, None)."""
    for suffix in PLAY_SUFFIXES:
        if leaf.endswith(suffix):
            return leaf.removesuffix(suffix), suffix[1:]
    return leaf, None


# ----------------------------------------------------------------------------- values
def finite_number(value) -> bool:
    """A finite int or float, and not a bool (True is an int to Python, never a value here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def finite_mean(values) -> float | None:
    """The mean of the finite numbers among `values` (None, NaN and infinities left out); None without one."""
    xs = [v for v in values or () if finite_number(v)]
    return sum(xs) / len(xs) if xs else None


def finite(values: Iterable[float] | np.ndarray) -> tuple[np.ndarray, int]:
    """Flatten to float64 and drop NaN: (the values left, how many NaN were dropped)."""
    x = np.asarray(list(values) if not hasattr(values, "__array__") else values, dtype=np.float64).reshape(-1)
    nan = np.isnan(x)
    return x[~nan], int(nan.sum())


def _declared(metric: str, bounds: Bounds) -> tuple | None:
    """The declared range of `metric` (`eval/episode_return`, `eval/episode_return_greedy`,
    `eval/episode_return_sampled` and `train/mean_episode_return` all answer to
    `episode_return`), or None."""
    if metric in bounds:
        return bounds[metric]
    leaf = play_of(metric.rsplit("/", 1)[-1])[0].removeprefix("mean_")
    return bounds.get(leaf, bounds.get(f"eval/{leaf}"))


def metric_range(metric: str, bounds: Bounds = {}) -> tuple[float | None, float | None]:  # noqa: B006 - read only
    """(low, high) that `metric`'s values cannot pass, an end None when unknown: the env's
    declared `bounds` first, else what the name says (UNIT_RANGE, NON_NEGATIVE)."""
    declared = _declared(metric, bounds)
    if declared is not None:
        return tuple(None if v is None else float(v) for v in declared)
    if UNIT_RANGE.search(metric):
        return 0.0, 1.0
    if NON_NEGATIVE.search(metric):
        return 0.0, None
    return None, None


# ----------------------------------------------------------------------------- the mean
def interval_method(low: float | None, high: float | None) -> str:
    """Anderson's interval where both bounds are known, Student t otherwise."""
    return ANDERSON if low is not None and high is not None else T


def _moments(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row (the last axis), NaN ignored: the count, the mean and the variance (ddof=1)."""
    n = np.sum(~np.isnan(x), axis=-1)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # rows with fewer than 2 values
        return n, np.nanmean(x, axis=-1), np.nanvar(x, axis=-1, ddof=1)


def t_interval(x, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Student t interval of the mean of each row of `x` (the last axis: seeds; NaN ignored):
    ``mean -/+ t_{(1+c)/2, n-1} * std / sqrt(n)``; NaN where a row has fewer than 2 values."""
    n, mean, var = _moments(np.asarray(x, dtype=np.float64))
    with np.errstate(all="ignore"):
        half = _special.stdtrit(np.maximum(n - 1, 1), (1.0 + confidence) / 2.0) * (np.sqrt(var) / np.sqrt(n))
    ok = n >= 2
    return np.where(ok, mean - half, np.nan), np.where(ok, mean + half, np.nan)


def anderson_interval(x, low: float, high: float, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Anderson's interval of the mean of a variable that lies in [low, high], per row of `x`
    (NaN ignored; NaN where a row has fewer than 2 values). T. W. Anderson (1969), "Confidence
    limits for the expected value of an arbitrary bounded random variable with a continuous
    distribution function"; valid for any distribution on [low, high] (Learned-Miller and
    Thomas, 2019, arXiv:1905.06208), at any n.

    With probability 1 - alpha/2 the true CDF lies above the empirical one less
    eps = sqrt(ln(2/alpha) / (2n)) everywhere (the Dvoretzky-Kiefer-Wolfowitz inequality with
    Massart's constant), and below it plus eps with the same probability. The upper end is the
    mean of the highest distribution in that band: eps of the probability moved from the lowest
    seeds to `high`; the lower end moves eps from the highest seeds to `low`. A value past a bound
    widens that bound to it (a declaration that was wrong does not make the interval miss)."""
    x = np.asarray(x, dtype=np.float64)
    n = np.sum(~np.isnan(x), axis=-1, keepdims=True)
    with np.errstate(all="ignore"):
        low = np.minimum(low, np.min(np.where(np.isnan(x), np.inf, x), axis=-1, keepdims=True))
        high = np.maximum(high, np.max(np.where(np.isnan(x), -np.inf, x), axis=-1, keepdims=True))
        # NaN sorted past every value, at the upper bound: their gaps are 0 and add nothing.
        z = np.sort(np.where(np.isnan(x), high, x), axis=-1)
        k = np.arange(1, z.shape[-1] + 1)
        eps = np.sqrt(np.log(2.0 / (1.0 - confidence)) / (2.0 * n))
        gaps_above = np.diff(np.concatenate([z, high], axis=-1), axis=-1)  # z_(k+1) - z_(k), z_(n+1) = high
        gaps_below = np.diff(np.concatenate([low, z], axis=-1), axis=-1)  # z_(k) - z_(k-1), z_(0) = low
        upper = high[..., 0] - np.sum(np.clip(k / n - eps, 0.0, None) * gaps_above, axis=-1)
        lower = low[..., 0] + np.sum(np.clip(1.0 - (k - 1) / n - eps, 0.0, None) * gaps_below, axis=-1)
    ok = n[..., 0] >= 2
    return np.where(ok, lower, np.nan), np.where(ok, upper, np.nan)


def mean_interval(x, low: float | None = None, high: float | None = None,
                  confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The interval of the mean of each row of `x` the lab reports for a metric in [low, high]
    (`metric_range`): Anderson's where both ends are known, else Student t held inside the
    known end (which only drops impossible values: coverage is unchanged)."""
    if interval_method(low, high) == ANDERSON:
        return anderson_interval(x, low, high, confidence)
    lo, hi = t_interval(x, confidence)
    return np.clip(lo, low, high), np.clip(hi, low, high)


def mean_summary(values, metric: str, confidence: float = 0.95, bounds: Bounds = {}) -> dict:  # noqa: B006
    """The mean of one metric across seeds, as every table and summary of the lab gives it: a
    dict with the keys ``SUMMARY_KEYS`` and ``ci_method``:

    - ``n_seeds``: the non-NaN values used; ``std``/``var``: ``ddof=1``; ``sem = std / sqrt(n)``;
    - ``ci_low``/``ci_high``: the interval of the mean for `metric` (`mean_interval` over its
      `metric_range`, the env's declared `bounds` first), ``ci_method`` naming it (``t`` or
      ``anderson``);
    - ``iqm``: the interquartile mean; ``iqm_ci_low``/``iqm_ci_high``: its bootstrap interval
      (`interval_estimates`), NaN below BOOTSTRAP_MIN_RUNS seeds.

    One value: its mean and IQM, every spread and interval NaN; none: ``n_seeds`` 0, the rest NaN."""
    x, _ = finite(values)
    n = int(x.size)
    low, high = metric_range(metric, bounds)
    out = {**dict.fromkeys(SUMMARY_KEYS, _NAN), "n_seeds": n, "ci_method": interval_method(low, high)}
    if n == 0:
        return out
    out.update(mean=float(np.mean(x)), iqm=iqm(x))
    if n >= 2:
        var = float(np.var(x, ddof=1))
        ci_low, ci_high = mean_interval(x, low, high, confidence)
        out.update(var=var, std=math.sqrt(var), sem=math.sqrt(var) / math.sqrt(n),
                   ci_low=float(ci_low), ci_high=float(ci_high))
        est = interval_estimates(x, confidence=confidence, names=("iqm",))["iqm"]
        out.update(iqm_ci_low=est["ci_low"], iqm_ci_high=est["ci_high"])
    return out


def small_sample_warning(n: int) -> str | None:
    """The mark of fewer than SMALL_SAMPLE seeds, or None."""
    if 0 < n < SMALL_SAMPLE:
        return f"n={n} < {SMALL_SAMPLE}: too few seeds to tell settings apart (wide intervals; docs/statistics.md)"
    return None


# ----------------------------------------------------------------------------- two groups
def difference_interval(a, b, low: float | None = None, high: float | None = None, confidence: float = 0.95):
    """The interval of mean(a) - mean(b), per row of `a` and `b` (the last axis: seeds; NaN
    ignored), and its method: for a metric in a known [low, high], each group's Anderson interval
    at 1 - alpha/2 and their extreme differences (Bonferroni: valid at any n); else Welch's
    (Student t with the Welch-Satterthwaite degrees of freedom). (low, high, method); floats for
    1-D groups; NaN with fewer than 2 values in a group."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if interval_method(low, high) == ANDERSON:
        level = 1.0 - (1.0 - confidence) / 2.0
        (al, ah), (bl, bh) = anderson_interval(a, low, high, level), anderson_interval(b, low, high, level)
        lo, hi, method = al - bh, ah - bl, ANDERSON
    else:
        (na, ma, va), (nb, mb, vb) = _moments(a), _moments(b)
        with np.errstate(all="ignore"):
            sa, sb = va / na, vb / nb
            df = (sa + sb) ** 2 / (sa ** 2 / (na - 1) + sb ** 2 / (nb - 1))
            half = np.where(sa + sb > 0, _special.stdtrit(df, (1.0 + confidence) / 2.0) * np.sqrt(sa + sb), 0.0)
        ok = (na >= 2) & (nb >= 2)
        lo, hi, method = np.where(ok, ma - mb - half, np.nan), np.where(ok, ma - mb + half, np.nan), WELCH
    if a.ndim == 1:
        return float(lo), float(hi), method
    return lo, hi, method


def welch_t_test(a: Iterable[float], b: Iterable[float]) -> tuple[float, float]:
    """Welch's two-sided t-test (unequal variances) of mean(a) vs mean(b): ``(t, p)``, ``t > 0``
    when a's mean is larger; (NaN, NaN) with fewer than 2 values in a group."""
    x, _ = finite(a)
    y, _ = finite(b)
    if x.size < 2 or y.size < 2:
        return _NAN, _NAN
    with warnings.catch_warnings():  # groups of equal values: scipy warns of its moments' precision
        warnings.simplefilter("ignore", RuntimeWarning)
        res = _st.ttest_ind(x, y, equal_var=False)
    return float(res.statistic), float(res.pvalue)


def permutation_test(a: Iterable[float], b: Iterable[float], reps: int = 20000, seed: int = DEFAULT_SEED) -> float:
    """Two-sided permutation test of mean(a) vs mean(b): the share of the splits of the pooled
    values into groups of a's and b's sizes whose difference of means is at least as far from 0
    as the observed one. Exact (every split) when there are at most `reps` splits, else `reps`
    random ones and the observed, (k + 1) / (reps + 1). It assumes no spread and no shape: where
    Welch's t has none to work with (a group of equal values, as a drop height of 0 in every
    seed) it still answers. NaN with no value in a group."""
    x, _ = finite(a)
    y, _ = finite(b)
    if x.size == 0 or y.size == 0:
        return _NAN
    pooled, n = np.concatenate([x, y]), x.size
    observed = abs(x.mean() - y.mean())
    total = pooled.sum()
    if math.comb(pooled.size, n) <= reps:
        picks = np.array(list(itertools.combinations(range(pooled.size), n)))
        sums = pooled[picks].sum(axis=1)
        extra = 0
    else:
        rng = np.random.default_rng(seed)
        sums = np.array([pooled[rng.permutation(pooled.size)[:n]].sum() for _ in range(reps)])
        extra = 1  # the observed split, counted once among reps + 1
    diffs = np.abs(sums / n - (total - sums) / (pooled.size - n))
    tol = 1e-12 * max(1.0, float(np.max(np.abs(pooled))))  # equal differences computed in another order
    return float((np.count_nonzero(diffs >= observed - tol) + extra) / (diffs.size + extra))


def cohens_d(a: Iterable[float], b: Iterable[float]) -> float:
    """Cohen's d: ``(mean(a) - mean(b)) / s_pooled``, ``s_pooled = sqrt(((n_a - 1) var_a +
    (n_b - 1) var_b) / (n_a + n_b - 2))`` (``ddof=1``). NaN with fewer than 2 values in a group;
    +/-inf when the pooled spread is zero and the means differ, 0 when both are equal."""
    x, _ = finite(a)
    y, _ = finite(b)
    na, nb = x.size, y.size
    if na < 2 or nb < 2:
        return _NAN
    diff = float(np.mean(x) - np.mean(y))
    pooled = math.sqrt(((na - 1) * np.var(x, ddof=1) + (nb - 1) * np.var(y, ddof=1)) / (na + nb - 2))
    if pooled == 0.0:
        return 0.0 if diff == 0.0 else math.copysign(math.inf, diff)
    return diff / pooled


def bonferroni(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    """Bonferroni-adjusted p-values ``min(1, p * m)`` for m comparisons; NaN p-values stay NaN
    and do not count towards m (a comparison that could not be made is not a test)."""
    p = np.asarray(pvalues, dtype=np.float64).reshape(-1)
    return np.minimum(1.0, p * int(np.count_nonzero(~np.isnan(p))))


# ----------------------------------------------------------------------------- IQM and rliable
def trim_mean(a: np.ndarray, proportion: float, axis: int | None = 0) -> np.ndarray | float:
    """``scipy.stats.trim_mean``'s computation, bit for bit (the same cut, partition and mean),
    without importing scipy.stats: cut ``int(proportion * n)`` values from each end along
    `axis` (None: the flattened array), average the rest."""
    if axis is None:
        a, axis = np.ravel(a), 0
    n = a.shape[axis]
    low = int(proportion * n)
    parted = np.partition(a, (low, n - low - 1), axis)
    middle = [slice(None)] * a.ndim
    middle[axis] = slice(low, n - low)
    return np.mean(parted[tuple(middle)], axis=axis)


def iqm(values: Iterable[float] | np.ndarray) -> float:
    """Interquartile mean, rliable's: ``scipy.stats.trim_mean(x, 0.25)`` of the non-NaN values
    (for n < 4 nothing is cut: the mean); NaN for none."""
    x, _ = finite(values)
    return float(trim_mean(x, 0.25)) if x.size else _NAN


#: rliable's aggregates, in the order rliable.json lists them, each over a stack of (runs, tasks)
#: score matrices at once (reps, runs, tasks): the bootstrap's replicates in one call, and one
#: matrix's aggregate as its stack of one (`aggregate`). Median and mean: of the per-task means.
AGGREGATES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "iqm": lambda s: trim_mean(s.reshape(s.shape[0], -1), 0.25, axis=1),
    "median": lambda s: np.median(np.mean(s, axis=1), axis=1),
    "mean": lambda s: np.mean(np.mean(s, axis=1), axis=1),
    "optimality_gap": lambda s: 1.0 - np.mean(np.minimum(s, 1.0).reshape(s.shape[0], -1), axis=1),
}


def aggregate(name: str, scores) -> float:
    """rliable's aggregate `name` (AGGREGATES) of one (runs, tasks) matrix."""
    return float(AGGREGATES[name](np.asarray(scores, dtype=np.float64)[None])[0])


def bootstrap_percentiles(confidence: float, runs: int | None) -> tuple[float, float]:
    """The percentiles (0-100) a bootstrap interval is read at. ``runs=None``: rliable's,
    100 * alpha/2 and 100 * (1 - alpha/2). Given the runs per task: Hesterberg's expanded
    percentile interval (T. Hesterberg, 2015, "What teachers should know about the bootstrap",
    The American Statistician 69(4)): alpha'/2 = Phi(-sqrt(n / (n - 1)) * t_{1-alpha/2, n-1}),
    which undoes the bootstrap's narrowness at small n (its variance is (n - 1) / n of the
    sample's, and it uses the normal's quantile where t's applies)."""
    alpha = 1.0 - confidence
    if runs is None:
        tail = alpha / 2.0
    else:
        z = math.sqrt(runs / (runs - 1)) * float(_special.stdtrit(runs - 1, 1.0 - alpha / 2.0))
        tail = float(_special.ndtr(-z))
    return 100.0 * tail, 100.0 * (1.0 - tail)


def percentile_interval(replicates: np.ndarray, confidence: float, runs: int | None) -> tuple[np.ndarray, np.ndarray]:
    """The one percentile bootstrap reading of the lab: the `bootstrap_percentiles` of
    `replicates` (axis 0); NaN (no interval) where `runs` is below BOOTSTRAP_MIN_RUNS."""
    if runs is not None and runs < BOOTSTRAP_MIN_RUNS:
        shape = np.shape(replicates)[1:]
        return np.full(shape, np.nan), np.full(shape, np.nan)
    low, high = np.percentile(replicates, bootstrap_percentiles(confidence, runs), axis=0)
    return low, high


def stratified_resamples(scores: np.ndarray, reps: int, seed: int) -> np.ndarray:
    """``reps`` resamples of ``scores`` (runs, tasks), the runs drawn with replacement within each
    task (rliable's ``StratifiedBootstrap``), stacked: (reps, runs, tasks). Drawn from
    ``numpy.random.RandomState(seed)`` in one call, which gives rliable's numbers (RandomState's
    bounded integers come one by one from the stream either way)."""
    rows = np.random.RandomState(seed).choice(scores.shape[0], (reps, *scores.shape), replace=True)
    return scores[rows, np.arange(scores.shape[1])[None, None, :]]


def _as_matrix(scores) -> np.ndarray:
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]  # one task
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"scores must be a non-empty (runs, tasks) matrix, got shape {x.shape}")
    return x


def interval_estimates(scores, *, reps: int = DEFAULT_REPS, seed: int = DEFAULT_SEED, confidence: float = 0.95,
                       names: Sequence[str] = tuple(AGGREGATES), as_rliable: bool = False) -> dict[str, dict]:
    """Each aggregate in ``names`` of a (runs, tasks) matrix with its stratified bootstrap
    interval: name -> {point, ci_low, ci_high}, each bootstrapped from ``seed`` on its own as
    rliable's ``get_interval_estimates`` does. The interval is read at the expanded percentiles
    and is NaN below BOOTSTRAP_MIN_RUNS runs; ``as_rliable``: rliable's own percentiles at any n."""
    x = _as_matrix(scores)
    out = {}
    for name in names:
        replicates = AGGREGATES[name](stratified_resamples(x, reps, seed))
        low, high = percentile_interval(replicates, confidence, None if as_rliable else x.shape[0])
        out[name] = {"point": aggregate(name, x), "ci_low": float(low), "ci_high": float(high)}
    return out


def performance_profile(scores, taus, *, reps: int = DEFAULT_REPS, seed: int = DEFAULT_SEED,
                        confidence: float = 0.95, as_rliable: bool = False) -> dict[str, list[float]]:
    """rliable's performance profile, the fraction of all runs x tasks scores above each of
    ``taus``, with its stratified bootstrap band, read as `interval_estimates` reads it (NaN below
    BOOTSTRAP_MIN_RUNS runs per task): {tau, profile, low, high}."""
    x = _as_matrix(scores)
    taus = np.asarray(taus, dtype=np.float64)
    stack = stratified_resamples(x, reps, seed).reshape(reps, -1)
    replicates = np.mean(stack[:, :, None] > taus[None, None, :], axis=1)
    low, high = percentile_interval(replicates, confidence, None if as_rliable else x.shape[0])
    return {"tau": taus.tolist(), "profile": np.mean(x.reshape(-1)[:, None] > taus[None, :], axis=0).tolist(),
            "low": np.asarray(low).tolist(), "high": np.asarray(high).tolist()}


def _improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(X > Y) of stacks of matrices (..., runs, tasks): per task Mann-Whitney's U over n_x * n_y,
    a tie counting one half, averaged over tasks."""
    greater = np.sum(x[..., :, None, :] > y[..., None, :, :], axis=(-3, -2))
    ties = np.sum(x[..., :, None, :] == y[..., None, :, :], axis=(-3, -2))
    return np.mean((greater + 0.5 * ties) / (x.shape[-2] * y.shape[-2]), axis=-1)


def probability_of_improvement(x, y) -> float:
    """P(X > Y): per task, Mann-Whitney's U of X's runs over Y's divided by n_x * n_y (a tie
    counts one half), averaged over tasks (rliable's ``probability_of_improvement``)."""
    x, y = _as_matrix(x), _as_matrix(y)
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"X has {x.shape[1]} task(s), Y {y.shape[1]}: compare on the same tasks")
    return float(_improvement(x, y))


def probability_of_improvement_interval(x, y, *, reps: int = DEFAULT_REPS, seed: int = DEFAULT_SEED,
                                        confidence: float = 0.95, as_rliable: bool = False) -> dict:
    """P(X > Y) with rliable's independent stratified bootstrap interval (X's and Y's runs
    resampled apart, within each task, drawn in rliable's order), read as `interval_estimates`
    reads it (the fewer runs of the two count): {point, ci_low, ci_high}."""
    x, y = _as_matrix(x), _as_matrix(y)
    point = probability_of_improvement(x, y)
    rng = np.random.RandomState(seed)
    if x.shape == y.shape:  # one draw of the same bounded integers, in the same order as one pair per replicate
        rows = rng.randint(0, x.shape[0], (reps, 2, *x.shape))
        rx, ry = rows[:, 0], rows[:, 1]
    else:
        draws = [(rng.choice(x.shape[0], x.shape, replace=True), rng.choice(y.shape[0], y.shape, replace=True))
                 for _ in range(reps)]
        rx, ry = np.stack([d[0] for d in draws]), np.stack([d[1] for d in draws])
    tasks = np.arange(x.shape[1])[None, None, :]
    replicates = _improvement(x[rx, tasks], y[ry, tasks])
    low, high = percentile_interval(replicates, confidence, None if as_rliable else min(x.shape[0], y.shape[0]))
    return {"point": point, "ci_low": float(low), "ci_high": float(high)}


def normalize(raw, random_score: float, reference_score: float) -> np.ndarray:
    """(raw - random) / (reference - random): 0 is a random policy, 1 the reference."""
    span = float(reference_score) - float(random_score)
    if span == 0:
        raise ValueError(f"reference score {reference_score} equals the random score: cannot normalise")
    return (np.asarray(raw, dtype=np.float64) - float(random_score)) / span


def score_matrix(per_task: Mapping[str, Sequence[float]]) -> tuple[np.ndarray, list[str]]:
    """(runs, tasks) from task -> its runs' scores; tasks with more runs than the fewest are cut
    to the fewest (rliable's stratified bootstrap needs the same number of runs per task)."""
    tasks = list(per_task)
    n = min(len(v) for v in per_task.values())
    return np.array([list(per_task[t])[:n] for t in tasks], dtype=np.float64).T, tasks
