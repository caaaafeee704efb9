"""The Goodhart curve of a run: what the agent was paid against its true objective.

An env trained on a proxy reward may log both, per 1k agent steps of the training rollouts:
`reward/paid_per_1k` (what the agent was paid) and `true/objective_per_1k` (the objective the
proxy stands for). A run whose metrics.csv has both gets this curve in `ppo-lab plots`; an
experiment's report draws it per reward mode (`ppo_lab.experiments.goodhart.report`).
"""

from __future__ import annotations

from ppo_lab.analysis.sweep import mean_curve
from ppo_lab.estimators import SMALL_SAMPLE

PAID, TRUE = "reward/paid_per_1k", "true/objective_per_1k"


def draw_goodhart(ax, paid: list, true: list, confidence: float = 0.95, title: str = "") -> bool:
    """On `ax`: the mean over seeds of what was paid and of the true objective, each with its
    interval band (`paid`, `true`: lists of (timesteps, values) series, one per seed), fewer than
    5 seeds marked in the legend.
    Returns whether anything was drawn."""
    drawn = False
    # The truth solid and wide, what was paid dashed on top: where a mode pays the truth
    # (ground_truth) the two coincide and both stay visible.
    for series, label, color, style, width in ((true, "true objective", "tab:blue", "-", 2.2),
                                               (paid, "paid (training reward)", "tab:orange", "--", 1.4)):
        x, mean, low, high, _ = mean_curve(series, confidence)
        if x.size == 0:
            continue
        n = f"{len(series)}" + (f" < {SMALL_SAMPLE}" if len(series) < SMALL_SAMPLE else "")
        ax.plot(x, mean, color=color, lw=width, ls=style, label=f"{label}, n={n}")
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
