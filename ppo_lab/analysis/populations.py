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
median and selected member. Per group, each statistic's mean over its populations with the
interval every table gives a mean (`estimators.mean_summary`: Student t, or Anderson's for a
metric with known bounds); between every two groups, P(A > B) on each statistic over populations
(Mann-Whitney, rliable's independent bootstrap interval, none below `BOOTSTRAP_MIN_RUNS`
populations a side) and Welch's p-value over populations. With four populations a side these
intervals are wide, which the report says (`estimators.SMALL_SAMPLE`).
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np

from ppo_lab import estimators as es
from ppo_lab.analysis.criteria import PREFIX as CRITERIA
from ppo_lab.analysis.sweep import Collection
from ppo_lab.estimators import BOOTSTRAP_MIN_RUNS, SMALL_SAMPLE, mean_summary, welch_t_test
from ppo_lab.judging.tables import interval

POPULATIONS_JSON = "populations.json"
DEFAULT_METRIC = "criteria/final_return"  # mean training return over the last tenth of the updates
STATISTICS = {"median": np.median, "best": np.max, "worst": np.min}
SELECTED = "selected"  # the member the run's summary names best
ALSO_STATISTICS = ("median", SELECTED)  # of each further metric


def is_population_sweep(col: Collection) -> bool:
    return any(run.summary is not None and run.summary.pbt for run in col.runs)


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
        if unit.used and unit.run.summary is not None and unit.run.summary.pbt:
            runs.setdefault(unit.run.name, {"group": unit.group, "seed": min(unit.run.seeds), "units": []})["units"].append(unit)
    out: dict[str, list[dict]] = {}
    for name, entry in runs.items():
        members = np.asarray([u.values.get(metric, math.nan) for u in entry["units"]], dtype=np.float64)
        record = {"run": name, "seed": entry["seed"], "members": members.tolist()}
        record.update({stat: float(f(members)) for stat, f in STATISTICS.items()})
        pbt = entry["units"][0].run.summary.pbt
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


def _interval(values: list[float], metric: str, confidence: float, bounds: dict | None = None) -> dict:
    """The mean over populations of a statistic of `metric` with its interval (`mean_summary`;
    non-finite values left out): {point, ci_low, ci_high, ci_method, n}."""
    s = mean_summary([v for v in values if np.isfinite(v)], metric, confidence, bounds or {})
    return {"point": s["mean"], "ci_low": s["ci_low"], "ci_high": s["ci_high"], "ci_method": s["ci_method"],
            "n": s["n_seeds"]}


def population_report(col: Collection, metric: str = DEFAULT_METRIC, reps: int = es.DEFAULT_REPS,
                      seed: int = es.DEFAULT_SEED, confidence: float = 0.95, also: tuple[str, ...] = ()) -> dict:
    """populations.json: per group each statistic (and criterion, and further metric) across
    populations, and P(A > B) with Welch's p-value per statistic between every two groups."""
    per_group = population_values(col, metric, tuple(also))
    groups = {}
    for group, records in per_group.items():
        criteria = sorted({m for r in records for m in r["criteria"]})
        feasible = [r["feasible"] for r in records if r["feasible"] is not None]
        size = max(len(r["members"]) for r in records)  # at most every member meets the bounds
        groups[group] = {
            "populations": records,
            **{stat: _interval([r[stat] for r in records], metric, confidence) for stat in (*STATISTICS, SELECTED)},
            "feasible": _interval(feasible, "feasible", confidence, {"feasible": (0, size)}) if feasible else None,
            "criteria_median_member": {m: _interval([r["criteria"].get(m, math.nan) for r in records], m, confidence)
                                       for m in criteria},
            "also": {m: {stat: _interval([r["also"][m][stat] for r in records], m, confidence)
                         for stat in ALSO_STATISTICS} for m in also},
        }
    improvement = {}
    for a, b in combinations(per_group, 2):  # P(B > A) is 1 - P(A > B)
        improvement[f"{a} > {b}"] = {
            stat: {**es.probability_of_improvement_interval([r[stat] for r in per_group[a]], [r[stat] for r in per_group[b]],
                                                            reps=reps, seed=seed, confidence=confidence),
                   "welch_p": welch_t_test([r[stat] for r in per_group[a]], [r[stat] for r in per_group[b]])[1]}
            for stat in (*STATISTICS, SELECTED)}
    n = min((len(r) for r in per_group.values()), default=0)
    warning = (f"{n} population(s) in a group (< {SMALL_SAMPLE}): wide intervals; P(A > B) has no bootstrap "
               f"interval below {BOOTSTRAP_MIN_RUNS} a side" if 0 < n < SMALL_SAMPLE else None)
    return {"metric": metric, "also": list(also), "unit": "population", "confidence": confidence, "bootstrap": {"reps": reps, "seed": seed},
            "groups": groups, "improvement": improvement, "warning": warning}


def _ci(e: dict) -> str:
    return interval(e["point"], e["ci_low"], e["ci_high"], spec=".4g", missing=" [no interval]")


def format_population_report(report: dict) -> str:
    pct = int(report["confidence"] * 100)
    lines = [f"populations: {report['metric']} per population's median / best / worst member, mean over populations "
             f"[{pct}% interval, docs/statistics.md]; P(A > B) [{pct}% stratified bootstrap, "
             f"{report['bootstrap']['reps']} reps]"]
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
