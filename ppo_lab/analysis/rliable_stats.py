"""rliable's estimators (Agarwal et al., NeurIPS 2021), with rliable's definitions: pure numpy/scipy.

Scores are a matrix of shape (runs, tasks): one (normalised) score per run and task. The
aggregates are rliable's `metrics` module to the letter:

- ``iqm``: the 25% trimmed mean of all runs x tasks scores (``scipy.stats.trim_mean(x, 0.25)``);
- ``median``: the median over tasks of each task's mean over runs;
- ``mean``: the mean over tasks of each task's mean over runs;
- ``optimality_gap``: ``gamma - mean(min(scores, gamma))`` with ``gamma = 1`` (normalised scores);

each with a stratified percentile bootstrap interval: every replicate resamples the runs with
replacement within each task (rliable's ``StratifiedBootstrap``), ``reps`` replicates drawn
from ``numpy.random.RandomState(seed)`` in the order rliable draws them, so that
``np.random.seed(seed)`` and rliable's ``get_interval_estimates`` give the same numbers
(``tests/test_rliable_stats.py`` checks it against rliable itself). Performance profiles (the
fraction of all runs whose score exceeds tau, with bootstrap bands) and the probability of
improvement of X over Y (Mann-Whitney's U over runs, averaged over tasks, with independent
stratified bootstrap intervals) follow rliable's ``library`` the same way.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np
from scipy import stats as _st

DEFAULT_REPS = 2000
DEFAULT_SEED = 0


def aggregate_iqm(scores: np.ndarray) -> float:
    return float(_st.trim_mean(scores, proportiontocut=0.25, axis=None))


def aggregate_median(scores: np.ndarray) -> float:
    return float(np.median(np.mean(scores, axis=0)))


def aggregate_mean(scores: np.ndarray) -> float:
    return float(np.mean(np.mean(scores, axis=0)))


def aggregate_optimality_gap(scores: np.ndarray, gamma: float = 1.0) -> float:
    return float(gamma - np.mean(np.minimum(scores, gamma)))


#: name -> estimator of a (runs, tasks) matrix, in the order rliable.json lists them.
AGGREGATES: dict[str, Callable[[np.ndarray], float]] = {
    "iqm": aggregate_iqm,
    "median": aggregate_median,
    "mean": aggregate_mean,
    "optimality_gap": aggregate_optimality_gap,
}


# The same estimators over a stack of resamples (reps, runs, tasks) at once.
_BATCHED: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "iqm": lambda s: _st.trim_mean(s.reshape(s.shape[0], -1), proportiontocut=0.25, axis=1),
    "median": lambda s: np.median(np.mean(s, axis=1), axis=1),
    "mean": lambda s: np.mean(np.mean(s, axis=1), axis=1),
    "optimality_gap": lambda s: 1.0 - np.mean(np.minimum(s, 1.0).reshape(s.shape[0], -1), axis=1),
}


def _percentile_interval(replicates: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """arch's percentile method, as rliable calls it: np.percentile at 100*alpha, 100*(1-alpha)."""
    alpha = (1.0 - confidence) / 2
    low, high = np.percentile(replicates, [100 * alpha, 100 * (1.0 - alpha)], axis=0)
    return low, high


def _stratified_indices(rng: np.random.RandomState, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """One replicate's indices: runs resampled with replacement within each task (column)."""
    runs = rng.choice(shape[0], shape, replace=True)
    return runs, np.arange(shape[1])[None, :]


def stratified_resamples(scores: np.ndarray, reps: int, seed: int) -> np.ndarray:
    """``reps`` stratified resamples of ``scores`` stacked: (reps, runs, tasks). Drawn in one
    call, which gives the same numbers as rliable's one draw per replicate (RandomState's
    bounded integers come one by one from the stream either way)."""
    rows = np.random.RandomState(seed).choice(scores.shape[0], (reps, *scores.shape), replace=True)
    return scores[rows, np.arange(scores.shape[1])[None, None, :]]


def bootstrap_replicates(scores: np.ndarray, func: Callable[[np.ndarray], object], reps: int, seed: int) -> np.ndarray:
    """``func`` of ``reps`` stratified resamples of ``scores``: shape (reps, ...)."""
    return np.asarray([func(s) for s in stratified_resamples(scores, reps, seed)], dtype=np.float64)


def _as_matrix(scores) -> np.ndarray:
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]  # one task
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"scores must be a non-empty (runs, tasks) matrix, got shape {x.shape}")
    return x


def interval_estimates(scores, *, reps: int = DEFAULT_REPS, seed: int = DEFAULT_SEED,
                       confidence: float = 0.95, names: Sequence[str] = tuple(AGGREGATES)) -> dict[str, dict]:
    """Point estimate and stratified bootstrap interval of each aggregate in ``names``:
    name -> {point, ci_low, ci_high}. Each aggregate is bootstrapped from ``seed`` on its own,
    as rliable's ``get_interval_estimates`` does for each function it is given."""
    x = _as_matrix(scores)
    out = {}
    for name in names:
        func = AGGREGATES[name]
        reps_values = _BATCHED[name](stratified_resamples(x, reps, seed))
        low, high = _percentile_interval(reps_values, confidence)
        out[name] = {"point": func(x), "ci_low": float(low), "ci_high": float(high)}
    return out


def score_distribution(scores: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """rliable's performance profile: the fraction of all runs x tasks scores above each tau."""
    flat = np.asarray(scores, dtype=np.float64).reshape(-1)
    return np.mean(flat[:, None] > np.asarray(taus, dtype=np.float64)[None, :], axis=0)


def performance_profile(scores, taus, *, reps: int = DEFAULT_REPS, seed: int = DEFAULT_SEED,
                        confidence: float = 0.95) -> dict[str, list[float]]:
    """The score distribution at ``taus`` with its stratified bootstrap band: {tau, profile, low, high}."""
    x = _as_matrix(scores)
    taus = np.asarray(taus, dtype=np.float64)
    stack = stratified_resamples(x, reps, seed).reshape(reps, -1)
    replicates = np.mean(stack[:, :, None] > taus[None, None, :], axis=1)
    low, high = _percentile_interval(replicates, confidence)
    return {"tau": taus.tolist(), "profile": score_distribution(x, taus).tolist(),
            "low": np.asarray(low).tolist(), "high": np.asarray(high).tolist()}


def probability_of_improvement(x, y) -> float:
    """P(X > Y): per task, Mann-Whitney's U of X's runs over Y's divided by n_x * n_y (a tie
    counts one half), averaged over tasks (rliable's ``probability_of_improvement``)."""
    x, y = _as_matrix(x), _as_matrix(y)
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"X has {x.shape[1]} task(s), Y {y.shape[1]}: compare on the same tasks")
    probs = []
    for task in range(x.shape[1]):
        a, b = x[:, task], y[:, task]
        if np.array_equal(a, b):
            probs.append(0.5)
            continue
        greater = (a[:, None] > b[None, :]).sum() + 0.5 * (a[:, None] == b[None, :]).sum()
        probs.append(greater / (a.size * b.size))
    return float(np.mean(probs))


def probability_of_improvement_interval(x, y, *, reps: int = DEFAULT_REPS, seed: int = DEFAULT_SEED,
                                        confidence: float = 0.95) -> dict:
    """P(X > Y) with rliable's independent stratified bootstrap interval (X's and Y's runs
    resampled apart, within each task): {point, ci_low, ci_high}."""
    x, y = _as_matrix(x), _as_matrix(y)
    rng = np.random.RandomState(seed)
    replicates = []
    for _ in range(reps):
        rx, cx = _stratified_indices(rng, x.shape)
        ry, cy = _stratified_indices(rng, y.shape)
        replicates.append(probability_of_improvement(x[rx, cx], y[ry, cy]))
    low, high = _percentile_interval(np.asarray(replicates), confidence)
    return {"point": probability_of_improvement(x, y), "ci_low": float(low), "ci_high": float(high)}


def normalize(raw, random_score: float, reference_score: float) -> np.ndarray:
    """(raw - random) / (reference - random): 0 is a random policy, 1 the reference."""
    span = float(reference_score) - float(random_score)
    if span == 0:
        raise ValueError(f"reference score {reference_score} equals the random score: cannot normalise")
    return (np.asarray(raw, dtype=np.float64) - float(random_score)) / span


def score_matrix(per_task: Mapping[str, Sequence[float]]) -> tuple[np.ndarray, list[str]]:
    """(runs, tasks) from task -> its runs' scores; tasks with fewer runs than the most are cut to
    the fewest (rliable's stratified bootstrap needs the same number of runs per task)."""
    tasks = list(per_task)
    n = min(len(v) for v in per_task.values())
    return np.array([list(per_task[t])[:n] for t in tasks], dtype=np.float64).T, tasks
