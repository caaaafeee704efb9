"""Populations across a sweep (`ppo-lab aggregate`): PBT against random search, with intervals.

A population run (`pbt.population=P`, docs/pbt.md) has P members, each a (run, seed) unit of
`sweep.Collection`. Its members are not independent samples (they copy one another), so here
the unit is the population: a sweep `-m pbt.exploit=true,false seed=0,8,16,24` gives four
populations in each of two groups. Per population, of `metric` over its members:

    median, best, worst    the median, highest and lowest member (docs/pbt.md compares
                           PBT's median with random search's best, its worst with their median)
    selected               the member the run itself names best (summary.json `pbt.best_member`:
                           by its fitness, under `pbt.constraints` the best that met them), what
                           a tuner would hand on
    feasible               under `pbt.constraints`: how many members met every bound over the
                           last interval (random search records it too)

and the median member of every `criteria/*` (analysis/criteria.py: PPO's and the env's own);
and of each further metric asked for (`also`: `--population-metric` after the first), its
median and selected member. Per group, each statistic's mean over its populations with
rliable's stratified bootstrap interval (`rliable_stats.interval_estimates`, the populations as
runs of one task); between every two groups, P(A > B) on each statistic over populations
(Mann-Whitney, rliable's independent bootstrap interval) and Welch's p-value over populations.
With four populations a side these intervals are wide: a bootstrap of 4 values can only mix
those 4, which the report says (`intervals.SMALL_SAMPLE`).
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np

from ppo_lab.analysis import rliable_stats as rs
from ppo_lab.analysis.criteria import PREFIX as CRITERIA
from ppo_lab.analysis.intervals import SMALL_SAMPLE
from ppo_lab.analysis.stats import welch_t_test
from ppo_lab.analysis.sweep import Collection

POPULATIONS_JSON = "populations.json"
DEFAULT_METRIC = "criteria/final_return"  # mean training return over the last tenth of the updates
STATISTICS = {"median": np.median, "best": np.max, "worst": np.min}
SELECTED = "selected"  # the member the run's summary names best
ALSO_STATISTICS = ("median", SELECTED)  # of each further metric


def is_population_sweep(col: Collection) -> bool:
    return any(run.summary.get("pbt") for run in col.runs)


def _selected(units: list, first_seed: int, pbt: dict, metric: str) -> float:
    """`metric` of the member the run's summary names best (member m is seed first_seed + m)."""
    seed = first_seed + int(pbt.get("best_member", 0))
    return next((float(u.values.get(metric, math.nan)) for u in units if u.seed == seed), math.nan)


def population_values(col: Collection, metric: str, also: tuple[str, ...] = ()) -> dict[str, list[dict]]:
    """group -> one record per used population run: {run, seed, members: [metric per member],
    each of STATISTICS, `selected`, `feasible` (members that met every bound, or None with
    none)}; `criteria` (the median member of each criteria/* metric); `also` (per further
    metric, its median and selected member)."""
    runs: dict[str, dict] = {}
    for unit in col.units:
        if unit.used and unit.run.summary.get("pbt"):
            runs.setdefault(unit.run.name, {"group": unit.group, "seed": min(unit.run.seeds), "units": []})["units"].append(unit)
    out: dict[str, list[dict]] = {}
    for name, entry in runs.items():
        members = np.asarray([u.values.get(metric, math.nan) for u in entry["units"]], dtype=np.float64)
        record = {"run": name, "seed": entry["seed"], "members": members.tolist()}
        record.update({stat: float(f(members)) for stat, f in STATISTICS.items()})
        pbt = entry["units"][0].run.summary["pbt"]
        record[SELECTED] = _selected(entry["units"], entry["seed"], pbt, metric)
        record["feasible"] = sum(pbt["feasible"]) if "feasible" in pbt else None
        record["also"] = {m: {"median": float(np.nanmedian([u.values.get(m, math.nan) for u in entry["units"]])),
                              SELECTED: _selected(entry["units"], entry["seed"], pbt, m)} for m in also}
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
                      seed: int = rs.DEFAULT_SEED, confidence: float = 0.95, also: tuple[str, ...] = ()) -> dict:
    """populations.json: per group each statistic (and criterion, and further metric) across
    populations, and P(A > B) with Welch's p-value per statistic between every two groups."""
    per_group = population_values(col, metric, tuple(also))
    groups = {}
    for group, records in per_group.items():
        criteria = sorted({m for r in records for m in r["criteria"]})
        feasible = [r["feasible"] for r in records if r["feasible"] is not None]
        groups[group] = {
            "populations": records,
            **{stat: _interval([r[stat] for r in records], reps, seed, confidence) for stat in (*STATISTICS, SELECTED)},
            "feasible": _interval(feasible, reps, seed, confidence) if feasible else None,
            "criteria_median_member": {m: _interval([r["criteria"].get(m, math.nan) for r in records], reps, seed, confidence)
                                       for m in criteria},
            "also": {m: {stat: _interval([r["also"][m][stat] for r in records], reps, seed, confidence)
                         for stat in ALSO_STATISTICS} for m in also},
        }
    improvement = {}
    for a, b in combinations(per_group, 2):  # P(B > A) is 1 - P(A > B)
        improvement[f"{a} > {b}"] = {
            stat: {**rs.probability_of_improvement_interval([r[stat] for r in per_group[a]], [r[stat] for r in per_group[b]],
                                                            reps=reps, seed=seed, confidence=confidence),
                   "welch_p": welch_t_test([r[stat] for r in per_group[a]], [r[stat] for r in per_group[b]])[1]}
            for stat in (*STATISTICS, SELECTED)}
    n = min((len(r) for r in per_group.values()), default=0)
    warning = (f"{n} population(s) in a group (< {SMALL_SAMPLE}): these intervals cannot be trusted"
               if 0 < n < SMALL_SAMPLE else None)
    return {"metric": metric, "also": list(also), "unit": "population", "confidence": confidence, "bootstrap": {"reps": reps, "seed": seed},
            "groups": groups, "improvement": improvement, "warning": warning}


def _ci(e: dict) -> str:
    return f"{e['point']:.4g} [{e['ci_low']:.4g}, {e['ci_high']:.4g}]"


def format_population_report(report: dict) -> str:
    pct = int(report["confidence"] * 100)
    lines = [f"populations: {report['metric']} per population's median / best / worst member, mean over populations "
             f"[{pct}% stratified bootstrap, {report['bootstrap']['reps']} reps]"]
    for group, g in report["groups"].items():
        lines.append(f"  {group} (n={len(g['populations'])} populations): "
                     + "  ".join(f"{stat} {_ci(g[stat])}" for stat in (*STATISTICS, SELECTED))
                     + (f"  feasible members {_ci(g['feasible'])}" if g.get("feasible") else ""))
        for metric, stats in (g.get("also") or {}).items():
            lines.append(f"    {metric}: " + "  ".join(f"{stat} {_ci(e)}" for stat, e in stats.items()))
    for pair, probs in report["improvement"].items():
        lines.append(f"  P({pair}): " + "  ".join(f"{stat} {_ci(p)} (Welch p {p['welch_p']:.3g})" for stat, p in probs.items()))
    if report["warning"]:
        lines.append(f"WARNING: {report['warning']}")
    return "\n".join(lines)
