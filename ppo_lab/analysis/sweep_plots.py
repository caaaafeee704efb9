"""Figures for sweeps: mean learning curves with interval bands, per-seed spread, mode bars.

Matplotlib with the non-interactive Agg backend unless one is already chosen (notebooks).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np

from ppo_lab.analysis.figures import plt, save_figure
from ppo_lab.analysis.intervals import SMALL_SAMPLE, is_bounded
from ppo_lab.analysis.stats import iqm
from ppo_lab.analysis.sweep import Collection, group_bounds, mean_curve, read_metric_curves


def plot_curves(col: Collection, metrics: Sequence[str], confidence: float = 0.95, path: Path | None = None):
    """One panel per metric; per group the mean over its seeds against env steps, with the
    Student-t `confidence` band (where at least two seeds logged that step), or a percentile
    bootstrap band (inside the seeds' range) for a bounded metric or fewer than 5 seeds; a
    warning in the title when a group has fewer than 5 seeds."""
    metrics = list(metrics) or ["train/mean_episode_return"]
    fig, axes = plt.subplots(1, len(metrics), figsize=(6.0 * len(metrics), 4.0), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        series = read_metric_curves(col, metric)
        drawn, small, kinds = 0, [], set()
        for group in col.groups:
            n_seeds = len(series.get(group, []))
            boot = is_bounded(metric, group_bounds(col, group)) or n_seeds < SMALL_SAMPLE
            x, mean, low, high, n = mean_curve(series.get(group, []), confidence, bootstrap=boot)
            if x.size == 0:
                continue
            kinds.add("bootstrap" if boot else "t")
            if n_seeds < SMALL_SAMPLE:
                small.append(n_seeds)
            line, = ax.plot(x, mean, label=f"{group} (n={n_seeds}{', too few' if n_seeds < SMALL_SAMPLE else ''})", lw=1.5)
            ax.fill_between(x, low, high, color=line.get_color(), alpha=0.2, lw=0)
            drawn += 1
        title = f"{metric}: mean and {int(confidence * 100)}% {'/'.join(sorted(kinds)) or 't'} interval over seeds"
        if small:
            title += f"\nWARNING: n={min(small)} seed(s) < {SMALL_SAMPLE}: bands not to be trusted"
        ax.set_title(title, fontsize=9, color="tab:red" if small else "k")
        ax.set_xlabel("env steps per seed")
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
        if drawn:
            ax.legend(fontsize=8, loc="best")
        else:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center")
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path)
    return fig


def plot_seed_spread(col: Collection, metric: str, path: Path | None = None):
    """Per group: every used seed's value of `metric` (dots), the mean and the IQM."""
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(col.groups) + 2), 4.0))
    rng = np.random.default_rng(0)
    for i, group in enumerate(col.groups):
        values = np.array([u.values.get(metric, math.nan) for u in col.units if u.group == group and u.used], dtype=float)
        values = values[~np.isnan(values)]
        if values.size:
            ax.scatter(i + rng.uniform(-0.15, 0.15, values.size), values, s=18, alpha=0.7)
            ax.hlines(values.mean(), i - 0.3, i + 0.3, color="k", lw=2, label="mean" if i == 0 else None)
            ax.hlines(iqm(values), i - 0.3, i + 0.3, color="tab:red", lw=1.5, ls="--", label="IQM" if i == 0 else None)
    ax.set_xticks(range(len(col.groups)))
    ax.set_xticklabels(col.groups, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(metric)
    ax.set_title(f"{metric}: one dot per seed")
    ax.grid(alpha=0.3, axis="y")
    if col.groups:
        ax.legend(fontsize=8)
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path)
    return fig


def plot_bars(labels: Sequence[str], means: Sequence[float], lows: Sequence[float], highs: Sequence[float],
              ylabel: str, title: str, reference: Sequence[float] | None = None, path: Path | None = None):
    """Bars with interval whiskers; `reference` (optional) drawn as hollow bars beside them."""
    x = np.arange(len(labels))
    means = np.asarray(means, dtype=float)
    err = np.vstack([means - np.asarray(lows, dtype=float), np.asarray(highs, dtype=float) - means])
    err = np.where(np.isnan(err), 0.0, err)
    width = 0.38 if reference is not None else 0.6
    fig, ax = plt.subplots(figsize=(max(5.0, 1.4 * len(labels) + 2), 4.0))
    ax.bar(x - (width / 2 if reference is not None else 0), np.nan_to_num(means), width, yerr=err, capsize=4, label="ours (mean, 95% CI)")
    if reference is not None:
        ax.bar(x + width / 2, np.asarray(reference, dtype=float), width, fill=False, hatch="//", label="reference (1 seed)")
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=15, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.axhline(0, color="k", lw=0.8)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path)
    return fig
