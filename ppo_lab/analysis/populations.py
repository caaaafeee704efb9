"""Populations across a sweep (`ppo-lab aggregate`): PBT against random search, with intervals.

A population run (`pbt.population=P`, docs/pbt.md) has P members, each a (run, seed) unit of
`sweep.Collection`. Its members are not independent samples (they copy one another), so here
the unit is the population: a sweep `-m pbt.exploit=true,false seed=0,8,16,24` gives four
populations in each of two groups. Per population, of `metric` over its members:

    median, best, worst    the median, highest and lowest member (docs/pbt.md compares
                           PBT's median with random search's best, its worst with their median)

and the median member of every `criteria/*` (analysis/criteria.py: PPO's and the env's own).
Per group, each statistic's mean over its populations with rliable's stratified bootstrap
interval (`rliable_stats.interval_estimates`, the populations as runs of one task); between
every two groups, P(A > B) on each statistic over populations (Mann-Whitney, rliable's
independent bootstrap interval). With four populations a side these intervals are wide: a
bootstrap of 4 values can only mix those 4, which the report says (`intervals.SMALL_SAMPLE`).
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np

from ppo_lab.analysis import rliable_stats as rs
from ppo_lab.analysis.criteria import PREFIX as CRITERIA
from ppo_lab.analysis.intervals import SMALL_SAMPLE
from ppo_lab.analysis.sweep import Collection

POPULATIONS_JSON = "populations.json"
DEFAULT_METRIC = "criteria/final_return"  # mean training return over the last tenth of the updates
STATISTICS = {"median": np.median, "best": np.max, "worst": np.min}


def is_population_sweep(col: Collection) -> bool:
    return any(run.summary.get("pbt") for run in col.runs)


def population_values(col: Collection, metric: str) -> dict[str, list[dict]]:
    """group -> one record per used population run: {run, seed, members: [metric per member],
    and each of STATISTICS}; plus `criteria` (the median member of each criteria/* metric)."""
    runs: dict[str, dict] = {}
    for unit in col.units:
        if unit.used and unit.run.summary.get("pbt"):
            runs.setdefault(unit.run.name, {"group": unit.group, "seed": min(unit.run.seeds), "units": []})["units"].append(unit)
    out: dict[str, list[dict]] = {}
    for name, entry in runs.items():
        members = np.asarray([u.values.get(metric, math.nan) for u in entry["units"]], dtype=np.float64)
        record = {"run": name, "seed": entry["seed"], "members": members.tolist()}
        record.update({stat: float(f(members)) for stat, f in STATISTICS.items()})
        names = sorted({m for u in entry["units"] for m in u.values if m.startswith(CRITERIA)})
        record["criteria"] = {m: float(np.nanmedian([u.values.get(m, math.nan) for u in entry["units"]])) for m in names}
        out.setdefault(entry["group"], []).append(record)
    for records in out.values():
        records.sort(key=lambda r: r["seed"])
    return out


def _interval(values: list[float], reps: int, seed: int, confidence: float) -> dict:
    """The mean over populations with its stratified bootstrap interval (NaN-free values)."""
    x = np.asarray([v for v in values if np.isfinite(v)], dtype=np.float64)
    if not x.size:
        return {"point": math.nan, "ci_low": math.nan, "ci_high": math.nan, "n": 0}
    est = rs.interval_estimates(x, reps=reps, seed=seed, confidence=confidence, names=("mean",))["mean"]
    return {**est, "n": int(x.size)}


def population_report(col: Collection, metric: str = DEFAULT_METRIC, reps: int = rs.DEFAULT_REPS,
                      seed: int = rs.DEFAULT_SEED, confidence: float = 0.95) -> dict:
    """populations.json: per group each statistic (and criterion) across populations, and
    P(A > B) per statistic between every two groups."""
    per_group = population_values(col, metric)
    groups = {}
    for group, records in per_group.items():
        criteria = sorted({m for r in records for m in r["criteria"]})
        groups[group] = {
            "populations": records,
            **{stat: _interval([r[stat] for r in records], reps, seed, confidence) for stat in STATISTICS},
            "criteria_median_member": {m: _interval([r["criteria"].get(m, math.nan) for r in records], reps, seed, confidence)
                                       for m in criteria},
        }
    improvement = {}
    for a, b in combinations(per_group, 2):  # P(B > A) is 1 - P(A > B)
        improvement[f"{a} > {b}"] = {
            stat: rs.probability_of_improvement_interval([r[stat] for r in per_group[a]], [r[stat] for r in per_group[b]],
                                                         reps=reps, seed=seed, confidence=confidence)
            for stat in STATISTICS}
    n = min((len(r) for r in per_group.values()), default=0)
    warning = (f"{n} population(s) in a group (< {SMALL_SAMPLE}): these intervals cannot be trusted"
               if 0 < n < SMALL_SAMPLE else None)
    return {"metric": metric, "unit": "population", "confidence": confidence, "bootstrap": {"reps": reps, "seed": seed},
            "groups": groups, "improvement": improvement, "warning": warning}


def _ci(e: dict) -> str:
    return f"{e['point']:.4g} [{e['ci_low']:.4g}, {e['ci_high']:.4g}]"


def format_population_report(report: dict) -> str:
    pct = int(report["confidence"] * 100)
    lines = [f"populations: {report['metric']} per population's median / best / worst member, mean over populations "
             f"[{pct}% stratified bootstrap, {report['bootstrap']['reps']} reps]"]
    for group, g in report["groups"].items():
        lines.append(f"  {group} (n={len(g['populations'])} populations): "
                     + "  ".join(f"{stat} {_ci(g[stat])}" for stat in STATISTICS))
    for pair, probs in report["improvement"].items():
        lines.append(f"  P({pair}): " + "  ".join(f"{stat} {_ci(p)}" for stat, p in probs.items()))
    if report["warning"]:
        lines.append(f"WARNING: {report['warning']}")
    return "\n".join(lines)
