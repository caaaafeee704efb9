"""The Goodhart report's numbers: modes of a sweep, the mode table, pairwise tests, the curves.

Used by `notebooks/goodhart_report.ipynb`; `ppo-lab plots` draws one run's curve with the
generic `ppo_lab.analysis.sweep_plots.draw_goodhart`.
A sweep's groups are mapped to reward modes by their `reward=` override (or the run's summary).

- `REFERENCE`: the reference project's published one-seed table, under OUR metric names and
  definitions: its headline "efficiency" is per life (`efficiency_per_life`), and its aggregate
  food share (`food_share`) is total food / (food + poison) from its own per-1k columns. Its
  evaluation sampled actions, so it sits beside our sampled metrics (no `_greedy` suffix).
- `mode_table`: per mode and metric, the mean over seeds with its interval (`estimators.mean_summary`).
- `pairwise_tests`: every pair of modes, Welch's t-test and Cohen's d per metric, p-values
  Bonferroni-corrected within each metric (the family: which modes differ on that metric).
- The Goodhart curve: per update, what the agent was paid (`reward/paid_per_1k`) against the
  true objective from counts (`true/objective_per_1k`), both per 1k agent steps of the training
  rollouts; per mode, the mean over seeds with its interval band (`analysis.sweep_plots.draw_goodhart`).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Callable, Sequence

from ppo_lab.analysis.figures import finish, plt
from ppo_lab.analysis.sweep import Collection, read_metric_curves
from ppo_lab.analysis.sweep_plots import PAID, TRUE, draw_goodhart
from ppo_lab.envs.foraging.config import MODES
from ppo_lab.estimators import bonferroni, cohens_d, finite, mean_summary, welch_t_test
from ppo_lab.judging.tables import interval

# The survival protocol's headline metrics, in the report's order; each also as `<name>_greedy`.
METRICS = ("efficiency_per_life", "food_share", "efficiency_per_world", "energy_per_1k",
           "survival_mean", "deaths_per_1k", "food_per_1k", "poison_per_1k")

_REF_MODES = ("ground_truth", "ground_truth_blinded", "proxy_mortal", "proxy")
_REF_COLUMNS = {
    "efficiency_per_life": (0.999, 0.299, 0.247, 0.238),
    "food_share": (154.7 / 154.8, 55.8 / 85.1, 59.0 / 104.3, 79.2 / 143.2),  # 99.9/65.6/56.6/55.3%
    "energy_per_1k": (144.6, -12.8, -41.5, -58.7),
    "survival_mean": (16364.0, 95.1, 41.5, 29.0),
    "deaths_per_1k": (0.00, 10.46, 24.03, 34.43),
    "food_per_1k": (154.7, 55.8, 59.0, 79.2),
    "poison_per_1k": (0.1, 29.3, 45.3, 64.0),
}
#: mode -> metric -> the reference's value (one seed, sampled play, 128x128, 2048 updates).
REFERENCE = {mode: {m: col[i] for m, col in _REF_COLUMNS.items()} for i, mode in enumerate(_REF_MODES)}


def mode_of_group(col: Collection) -> dict[str, str]:
    """group label -> reward mode (its `reward` override, else the runs' summary)."""
    out = {}
    for group in col.groups:
        mode = col.group_keys.get(group, {}).get("reward")
        if mode is None:
            runs = [u.run for u in col.units if u.group == group]
            mode = runs[0].summary.reward if runs and runs[0].summary else None
        out[group] = mode or group
    return out


def modes_in(col: Collection) -> list[str]:
    """The sweep's modes, in the report's order (`in_report_order`)."""
    return in_report_order(mode_of_group(col).values())


def in_report_order(modes) -> list[str]:
    """The distinct `modes`, the known ones (MODES) first in the report's order, then the rest as found."""
    found = list(dict.fromkeys(modes))
    return [m for m in MODES if m in found] + [m for m in found if m not in MODES]


def seed_units(col: Collection, label, label_of: Callable[[Collection], dict] = mode_of_group) -> list:
    """The used (run, seed) units of the groups `label_of` (group -> label: their reward mode, or
    the fidelity report's cell) labels `label`."""
    labels = label_of(col)
    return [u for u in col.units if u.used and labels.get(u.group) == label]


def seed_values(col: Collection, label, metric: str, label_of: Callable[[Collection], dict] = mode_of_group) -> list[float]:
    """One value per used (run, seed) of `label` (a mode, by default) for the evaluation metric `metric`."""
    return [u.values.get(f"eval/{metric}", math.nan) for u in seed_units(col, label, label_of)]


def mode_table(col: Collection, metrics: Sequence[str], confidence: float = 0.95) -> list[dict]:
    """Rows (mode, metric, n_seeds, mean, ci_low, ci_high, ci_method) for every mode and metric:
    the interval `estimators.mean_summary` gives (Anderson's for shares and efficiencies, which
    lie in [0, 1]; Student t otherwise)."""
    return [{"mode": mode, "metric": metric, **interval_row(seed_values(col, mode, metric), metric, confidence)}
            for mode in modes_in(col) for metric in metrics]


def interval_row(values: Sequence[float], metric: str, confidence: float = 0.95) -> dict:
    """n_seeds, mean, ci_low, ci_high and ci_method of the evaluation metric `metric` over `values`."""
    s = mean_summary(values, f"eval/{metric}", confidence=confidence)
    return {k: s[k] for k in ("n_seeds", "mean", "ci_low", "ci_high", "ci_method")}


def format_cell(mean: float, low: float, high: float) -> str:
    """`mean [low, high]` with 3 significant digits; `-` without a value."""
    if mean is None or math.isnan(mean):
        return "-"
    return interval(mean, low, high, spec=".3g")


def pairwise_tests(col: Collection, metrics: Sequence[str]) -> list[dict]:
    """Every pair of modes (a, b) on every metric: Welch's t (> 0 when a's mean is larger),
    its p, Cohen's d, and p Bonferroni-corrected over the pairs of that metric."""
    return tests_between(list(itertools.combinations(modes_in(col), 2)), lambda mode, m: seed_values(col, mode, m), metrics)


def tests_between(pairs: Sequence[tuple], values: Callable[[object, str], list[float]], metrics: Sequence[str],
                  label: Callable[[object, object], dict] = lambda a, b: {"a": a, "b": b}) -> list[dict]:
    """Per metric, each pair (a, b) of sides (`values(side, metric)`: its seeds' values), named by
    `label(a, b)`: Welch's t (> 0 when a's mean is larger), its p, Cohen's d, and p
    Bonferroni-corrected over the pairs of that metric (the family: which sides differ on it)."""
    rows = []
    for metric in metrics:
        block = []
        for a, b in pairs:
            xa, xb = values(a, metric), values(b, metric)
            t, p = welch_t_test(xa, xb)
            block.append({"metric": metric, **label(a, b), "mean_a": nanmean(xa), "mean_b": nanmean(xb),
                          "t": t, "p": p, "cohens_d": cohens_d(xa, xb)})
        for row, adjusted in zip(block, bonferroni([r["p"] for r in block])):
            row["p_bonferroni"] = float(adjusted)
        rows += block
    return rows


def intervals_separate(col: Collection, better: str, worse: str, metric: str, confidence: float = 0.95) -> bool:
    """True when `better`'s interval lies wholly above `worse`'s on `metric` (no overlap)."""
    a, b = (interval_row(seed_values(col, mode, metric), metric, confidence) for mode in (better, worse))
    return bool(a["ci_low"] > b["ci_high"])


def nanmean(values) -> float:
    """The mean of the values that are not NaN (None counts as NaN); NaN without one."""
    x, _ = finite(values)
    return float(x.mean()) if x.size else math.nan


# ----------------------------------------------------------------------------- the curves by mode
def goodhart_series(col: Collection) -> dict[str, tuple[list, list]]:
    """mode -> (paid series, true series), one (timesteps, values) pair per used seed."""
    paid, true = read_metric_curves(col, PAID), read_metric_curves(col, TRUE)
    out: dict[str, tuple[list, list]] = {}
    for group, mode in mode_of_group(col).items():
        p, t = out.setdefault(mode, ([], []))
        p += paid.get(group, [])
        t += true.get(group, [])
    return out


def plot_goodhart_curves(col: Collection, confidence: float = 0.95, path: Path | None = None):
    """One panel per mode: paid vs the true objective per 1k steps over training."""
    series = goodhart_series(col)
    modes = [m for m in modes_in(col) if m in series]
    fig, axes = plt.subplots(1, max(len(modes), 1), figsize=(4.2 * max(len(modes), 1), 3.4),
                             squeeze=False, sharey=True)
    for ax, mode in zip(axes[0], modes):
        if not draw_goodhart(ax, *series[mode], confidence=confidence, title=mode):
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center")
    fig.suptitle(f"What the agent is paid vs the true objective (mean, {int(confidence * 100)}% interval over seeds)",
                 fontsize=11)
    return finish(fig, path)
