"""Overoptimisation along one training path: how the true objective J moves while a policy is
optimised on what it is paid, from its evaluations along training (evals.csv: update, the
distance d = sqrt(KL(pi || pi_initial)), J, the paid return). Jax-free, numpy only.

- `gao_fit`: Gao, Schulman and Hilton, "Scaling Laws for Reward Model Overoptimization" (ICML
  2023), the RL form: J(d) - J(0) = d (alpha - beta log d), fitted by least squares (the form is
  linear in alpha and beta), with its residual (RMSE, R^2). For beta > 0 it peaks at
  d* = exp(alpha / beta - 1), where J - J(0) = beta d*; for beta <= 0 it never peaks.
- `drop_height`: Karwowski, Hayman, Bai, Kiendlhofer, Griffin and Skalse, "Goodhart's Law in
  Reinforcement Learning" (ICLR 2024, arXiv:2310.09144), the Normalised Drop Height: how far
  the true objective falls after its maximum along the optimisation path, max_t J_t - J_T,
  normalised by the range of the true objective over policies, so that drops are compared on
  one scale (0 where J never falls). Here the path is the evaluations in update order and the
  range the caller's (the Goodhart report: the range over every policy the experiment
  evaluated); `falls` says whether the drop is larger than the evaluations' own noise.
- `plateau_stop`: an early-stopping rule that reads only the paid return, as a practitioner
  who cannot see the true objective would: stop once the paid return has not beaten its best by
  more than `tolerance` of what it gained so far for `patience` evaluations, and keep the
  policy of that best evaluation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

PATIENCE = 5  # evaluations without a new best paid return before the rule stops
TOLERANCE = 0.01  # a new best must beat the old by this fraction of the paid return's gain so far
NOISE_TIMES = 3.0  # a drop counts as a fall beyond noise when it exceeds this many noise sds


@dataclass(frozen=True)
class GaoFit:
    alpha: float
    beta: float
    rmse: float  # root mean square residual, in J's units
    r2: float  # 1 - residual / total sum of squares of J - J(0) (NaN where J never moves)
    n: int  # evaluations fitted
    d_peak: float  # d* (NaN: beta <= 0, the form never peaks; inf: past any float)
    gain_peak: float  # J(d*) - J(0) = beta d* (NaN without a peak)
    d_max: float  # the largest d fitted

    @property
    def peaks_within(self) -> bool:
        """The fitted form peaks inside the distances measured (not beyond them)."""
        return not math.isnan(self.d_peak) and self.d_peak <= self.d_max


def _d_log_d(d: np.ndarray) -> np.ndarray:
    return np.where(d > 0, d * np.log(np.where(d > 0, d, 1.0)), 0.0)  # d log d -> 0 as d -> 0


def gao_gain(alpha: float, beta: float, d) -> np.ndarray:
    """The RL form's J(d) - J(0) = d (alpha - beta log d)."""
    d = np.asarray(d, dtype=float)
    return alpha * d - beta * _d_log_d(d)


def gao_fit(d, gain) -> GaoFit:
    """Least squares of `gain` (J - J(0)) on d (alpha - beta log d) over the finite pairs; NaN
    throughout with fewer than 3 of them at d > 0."""
    d, gain = np.asarray(d, dtype=float), np.asarray(gain, dtype=float)
    ok = np.isfinite(d) & np.isfinite(gain)
    d, gain = d[ok], gain[ok]
    if np.sum(d > 0) < 3:
        return GaoFit(*(math.nan,) * 4, int(d.size), math.nan, math.nan, float(d.max()) if d.size else math.nan)
    design = np.stack([d, -_d_log_d(d)], axis=1)
    (alpha, beta), *_ = np.linalg.lstsq(design, gain, rcond=None)
    residual = gain - design @ np.array([alpha, beta])
    total = float(np.sum(np.square(gain - gain.mean())))
    r2 = 1.0 - float(np.sum(np.square(residual))) / total if total > 0 else math.nan
    with np.errstate(over="ignore"):  # a beta near 0 puts the peak past any float: inf
        d_peak = float(np.exp(alpha / beta - 1.0)) if beta > 0 else math.nan
    return GaoFit(float(alpha), float(beta), float(np.sqrt(np.mean(np.square(residual)))), r2, int(d.size), d_peak,
                  beta * d_peak if beta > 0 else math.nan, float(d.max()))


@dataclass(frozen=True)
class Drop:
    peak_index: int  # the evaluation where J is highest (the first, if tied)
    peak: float  # max_t J_t
    final: float  # J_T
    drop: float  # peak - final, in J's units
    ndh: float  # drop / scale
    noise: float  # the sd of one evaluation's J, from its successive differences late in the path
    falls: bool  # the drop exceeds NOISE_TIMES x noise


def evaluation_noise(true) -> float:
    """The sd of one evaluation of J: the sd of successive differences over the last half of
    the path (where training has mostly settled), over sqrt 2. A trend left there counts as
    noise, so this errs large, and `falls` toward no."""
    x = np.asarray(true, dtype=float)
    tail = np.diff(x[len(x) // 2:])
    return float(np.std(tail, ddof=1) / math.sqrt(2.0)) if tail.size >= 2 else math.nan


def drop_height(true, scale: float | None = None) -> Drop:
    """The drop of J after its maximum along the path (in update order) and its Normalised Drop
    Height over `scale` (default: the range J spans along this path)."""
    x = np.asarray(true, dtype=float)
    if x.size == 0 or not np.all(np.isfinite(x)):
        return Drop(-1, *(math.nan,) * 5, False)
    peak_index = int(np.argmax(x))
    drop = float(x[peak_index] - x[-1])
    scale = float(np.ptp(x)) if scale is None else float(scale)
    noise = evaluation_noise(x)
    return Drop(peak_index, float(x[peak_index]), float(x[-1]), drop, drop / scale if scale > 0 else 0.0, noise,
                bool(drop > NOISE_TIMES * noise) if not math.isnan(noise) else drop > 0)


@dataclass(frozen=True)
class Stop:
    index: int  # the evaluation at which the rule stops (its patience used up), or the last
    kept: int  # the evaluation whose policy it keeps: the best paid return before stopping
    triggered: bool  # False: it never stopped before the end (it keeps the best of the whole path)


def plateau_stop(paid, patience: int = PATIENCE, tolerance: float = TOLERANCE) -> Stop:
    """The module docstring's rule on the paid return, in update order."""
    x = np.asarray(paid, dtype=float)
    best, since = 0, 0
    for i in range(1, x.size):
        gained = abs(x[best] - x[0])
        if x[i] > x[best] + tolerance * gained:
            best, since = i, 0
        else:
            since += 1
            if since >= patience:
                return Stop(i, best, True)
    return Stop(x.size - 1, best, False)
