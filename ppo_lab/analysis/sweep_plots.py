"""Figures for sweeps: mean learning curves with interval bands, per-seed spread, mode bars, and
the Goodhart curve.

Matplotlib with the non-interactive Agg backend unless one is already chosen (notebooks).

The Goodhart curve: an env trained on a proxy reward may log both, per 1k agent steps of the
training rollouts, `reward/paid_per_1k` (what the agent was paid) and `true/objective_per_1k`
(the objective the proxy stands for). A run whose metrics.csv has both gets this curve in
`ppo-lab plots`; an experiment's report draws it per reward mode
(`ppo_lab.experiments.goodhart.report`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np

from ppo_lab.analysis.figures import finish, plt
from ppo_lab.analysis.sweep import SPARSE, Collection, mean_curve, read_metric_curves
from ppo_lab.estimators import SMALL_SAMPLE, interval_method, iqm, metric_range
from ppo_lab.judging.headline import TRAIN_RETURN
from ppo_lab.judging.metric_names import axis_label, label
from ppo_lab.judging.reward_modes import is_paid_return, modes_by_group, paid_label

PAID, TRUE = "reward/paid_per_1k", "true/objective_per_1k"


def plot_curves(col: Collection, metrics: Sequence[str], confidence: float = 0.95, path: Path | None = None,
                notes: list[str] | None = None, formats: tuple[str, ...] = ()):
    """One panel per metric; per group the mean over its seeds against env steps, with the
    `confidence` band of the interval the tables give (where at least two seeds logged that step:
    Student t, or Anderson's for a metric with known bounds); a group of fewer than 5 seeds is
    marked in its legend entry (`n=3 < 5`).

    An episode return of runs paid under different reward functions gets one panel per reward
    mode (`paid reward (<mode>)`, ppo_lab/judging/reward_modes.py): its lines are never drawn on one
    axis. A sparse metric (a value in fewer than half of the updates) is drawn as markers where
    it has values. A metric no run logged gets no panel. What a reader must know (sparse
    metrics, panels left out, too few seeds) is appended to `notes` (printed beside the figure
    by `ppo-lab aggregate`), never written into the titles. Returns the figure, or None when no
    metric has data (nothing is written then)."""
    notes = [] if notes is None else notes
    modes = modes_by_group(col)
    panels = []  # (metric, its series per group, title, the groups drawn)
    for metric in list(metrics) or [TRAIN_RETURN]:
        series = read_metric_curves(col, metric)
        groups = [g for g in col.groups if series.get(g)]
        if not groups:
            notes.append(f"{metric}: no panel: no run in the statistics logged it")
        elif is_paid_return(metric) and modes:
            for mode in dict.fromkeys(modes.get(g, g) for g in groups):
                panels.append((metric, series, f"{paid_label(mode)}: {label(metric)}", [g for g in groups if modes.get(g, g) == mode]))
            notes.append(f"{metric}: one panel per reward mode: each mode's return is measured under its own reward function")
        else:
            panels.append((metric, series, label(metric), groups))
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(6.0 * len(panels), 4.0), squeeze=False)
    small = {}
    for ax, (metric, series, title, groups) in zip(axes[0], panels):
        kinds = set()
        for group in groups:
            n_seeds = len(series[group])
            bounds = metric_range(metric, col.bounds(group))
            x, mean, low, high, n = mean_curve(series[group], confidence, *bounds)
            kinds.add(interval_method(*bounds))
            if n_seeds < SMALL_SAMPLE:
                small[group] = n_seeds
            logged = col.logged_share(group, metric)
            sparse = logged is not None and logged < SPARSE
            text = f"{group} (n={n_seeds}" + (f" < {SMALL_SAMPLE}" if n_seeds < SMALL_SAMPLE else "") \
                + (f", sparse: {logged:.0%} of updates" if sparse else "") + ")"
            line, = ax.plot(x, mean, label=text, lw=1.0 if sparse else 1.5, marker="o" if sparse else None, ms=3)
            ax.fill_between(x, low, high, color=line.get_color(), alpha=0.2, lw=0)
            if sparse:
                notes.append(f"{metric}, {group}: sparse (a value in {logged:.0%} of the updates): drawn where it has values")
        ax.set_title(f"{title}: mean and {int(confidence * 100)}% {'/'.join(sorted(kinds))} interval over seeds", fontsize=9)
        ax.set_xlabel("env steps per seed")
        ax.set_ylabel(axis_label(metric))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    for group, n in small.items():
        notes.append(f"{group}: n={n} seed(s) < {SMALL_SAMPLE} (marked in the legend): wide bands")
    return finish(fig, path, formats=formats)


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
    ax.set_ylabel(axis_label(metric))
    ax.set_title(f"{label(metric)}: one dot per seed")
    ax.grid(alpha=0.3, axis="y")
    if col.groups:
        ax.legend(fontsize=8)
    return finish(fig, path)


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
    return finish(fig, path)


def draw_goodhart(ax, paid: list, true: list, confidence: float = 0.95, title: str = "") -> bool:
    """On `ax`: the mean over seeds of what was paid and of the true objective, each with its
    interval band (`paid`, `true`: lists of (timesteps, values) series, one per seed), fewer than
    5 seeds marked in the legend.
    Returns whether anything was drawn."""
    drawn = False
    # The truth solid and wide, what was paid dashed on top: where a mode pays the truth
    # (ground_truth) the two coincide and both stay visible.
    for series, name, color, style, width in ((true, "true objective", "tab:blue", "-", 2.2),
                                              (paid, "paid (training reward)", "tab:orange", "--", 1.4)):
        x, mean, low, high, _ = mean_curve(series, confidence)
        if x.size == 0:
            continue
        n = f"{len(series)}" + (f" < {SMALL_SAMPLE}" if len(series) < SMALL_SAMPLE else "")
        ax.plot(x, mean, color=color, lw=width, ls=style, label=f"{name}, n={n}")
        ax.fill_between(x, low, high, color=color, alpha=0.2, lw=0)
        drawn = True
    ax.axhline(0.0, color="k", lw=0.7)
    ax.set_title(title or "Goodhart curve", fontsize=10)
    ax.set_xlabel("env steps per seed", fontsize=8)
    ax.set_ylabel("per 1k agent steps", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    if drawn:
        ax.legend(fontsize=7, loc="best")
    return drawn
