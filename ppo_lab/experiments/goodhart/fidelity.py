"""The Goodhart fidelity report: cells of `sweeps/goodhart_fidelity.yaml`, their table,
the tests between them, and the bar.

A cell is (reward mode, fidelity recipe): the recipe is a run's `+fidelity=` choice (conf/fidelity/:
`lab`, `lab_uint8`, `reference`, `reference_<one key turned back>`); a run launched without one
is `lab`, or `lab_uint8` with `ppo.rollout_obs_dtype=uint8`. Runs of several sweep dirs (e.g.
seeds 0-3 and 4-7) with the same cell pool, the unit being the (run, seed), as in the report.

Tests, as `report.pairwise_tests` does them (Welch's t, Cohen's d, Bonferroni within a metric):
per mode, `lab` against `lab_uint8`, `reference` against `reference_float32`, and `reference`
against each other `reference_*` cell (leave one out).
"""

from __future__ import annotations

from typing import Sequence

from ppo_lab.analysis.sweep import Collection
from ppo_lab.experiments.goodhart.report import interval_row, mode_of_group, nanmean, seed_units, seed_values, tests_between

#: the survival metrics the fidelity table leads with (sampled play), and the rest.
METRICS = ("poison_per_1k", "energy_per_1k", "food_share", "efficiency_per_life", "food_per_1k",
           "deaths_per_1k", "survival_mean")
MODES = ("ground_truth", "ground_truth_blinded", "proxy_mortal")


def cell_of_group(col: Collection) -> dict[str, tuple[str, str]]:
    """group label -> (mode, recipe)."""
    modes = mode_of_group(col)
    out = {}
    for group, mode in modes.items():
        keys = col.group_keys.get(group, {})
        recipe = keys.get("fidelity")
        if recipe in (None, "", "default", "null"):
            recipe = "lab_uint8" if keys.get("ppo.rollout_obs_dtype") == "uint8" else "lab"
        out[group] = (mode, recipe)
    return out


def cells_in(col: Collection) -> list[tuple[str, str]]:
    """(mode, recipe) cells of the sweep, modes in report order, recipes lab first."""
    found = list(dict.fromkeys(cell_of_group(col).values()))
    order = lambda c: (MODES.index(c[0]) if c[0] in MODES else len(MODES), c[1] != "lab", c[1] != "lab_uint8",  # noqa: E731
                       c[1] != "reference", c[1])
    return sorted(found, key=order)


def is_fidelity_sweep(col: Collection) -> bool:
    return any(recipe != "lab" for _, recipe in cell_of_group(col).values())


def cell_table(col: Collection, metrics: Sequence[str] = METRICS, confidence: float = 0.95) -> list[dict]:
    """Rows (mode, recipe, metric, n_seeds, mean, ci_low, ci_high, ci_method): the interval
    `estimators.mean_summary` gives (Anderson's for shares and efficiencies, Student t otherwise)."""
    return [{"mode": cell[0], "recipe": cell[1], "metric": metric,
             **interval_row(seed_values(col, cell, metric, cell_of_group), metric, confidence)}
            for cell in cells_in(col) for metric in metrics]


def comparisons(col: Collection) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """The pairs the report tests (module docstring), where both cells ran."""
    cells = set(cells_in(col))
    pairs = []
    for mode in dict.fromkeys(m for m, _ in cells_in(col)):
        if (mode, "lab") in cells and (mode, "lab_uint8") in cells:
            pairs.append(((mode, "lab"), (mode, "lab_uint8")))
        if (mode, "reference") in cells:
            pairs += [((mode, "reference"), c) for c in cells_in(col)
                      if c[0] == mode and c[1].startswith("reference_")]
    return pairs


def pairwise_tests(col: Collection, metrics: Sequence[str] = METRICS) -> list[dict]:
    """Welch's t (> 0 when a's mean is larger), p, Cohen's d, p Bonferroni-corrected over the
    pairs of each metric."""
    return tests_between(comparisons(col), lambda cell, metric: seed_values(col, cell, metric, cell_of_group), metrics,
                         label=lambda a, b: {"mode": a[0], "a": a[1], "b": b[1]})


def same_seed_for_seed(col: Collection, mode: str, a: str, b: str, metric: str) -> bool | None:
    """Whether cells (mode, a) and (mode, b) give the same value on every seed both ran; None
    when they share no seed."""
    va = {u.seed: u.values.get(f"eval/{metric}") for u in seed_units(col, (mode, a), cell_of_group)}
    vb = {u.seed: u.values.get(f"eval/{metric}") for u in seed_units(col, (mode, b), cell_of_group)}
    shared = sorted(set(va) & set(vb))
    return None if not shared else all(va[s] == vb[s] for s in shared)


def bar(col: Collection) -> list[dict]:
    """The uint8-storage checks on lab vs lab_uint8 (sampled play): one row per check, with `holds`."""
    m = lambda mode, recipe, metric: nanmean(seed_values(col, (mode, recipe), metric, cell_of_group))  # noqa: E731
    rows = []
    b = "ground_truth_blinded"
    p32, p8 = m(b, "lab", "poison_per_1k"), m(b, "lab_uint8", "poison_per_1k")
    need = 1.0 if p32 == 0 else 10 * p32
    rows.append({"check": f"{b}: uint8 poison/1k >= 10x float32 (and >= 1.0 if float32 eats none)",
                 "value": f"{p8:.3g} vs {p32:.3g} ({p8 / p32:.1f}x)" if p32 else f"{p8:.3g} vs 0", "holds": p8 >= need})
    e8 = m(b, "lab_uint8", "energy_per_1k")
    rows.append({"check": f"{b}: uint8 energy/1k < 0", "value": f"{e8:.3g}", "holds": e8 < 0})
    p = "proxy_mortal"
    f32, f8 = m(p, "lab", "energy_per_1k"), m(p, "lab_uint8", "energy_per_1k")
    rows.append({"check": f"{p}: uint8 energy/1k >= 20 below float32, and < 0",
                 "value": f"{f8:.3g} vs {f32:.3g} ({f8 - f32:+.3g})", "holds": (f32 - f8 >= 20) and f8 < 0})
    same = [same_seed_for_seed(col, "ground_truth", "lab", "lab_uint8", metric) for metric in METRICS]
    rows.append({"check": "ground_truth: evaluation identical seed for seed (float32 vs uint8)",
                 "value": f"{sum(bool(s) for s in same)}/{len(same)} metrics identical",
                 "holds": all(s is True for s in same)})
    return rows
