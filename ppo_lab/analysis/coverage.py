"""How often the lab's 95% intervals hold the true value, measured: seeds simulated from
distributions whose truth is known, many samples each, the share of intervals that contain it.

    python -m ppo_lab.analysis.coverage --measure   # simulate (a few minutes), write the record

The record (`docs/statistics_coverage.json`) holds one row per estimate, method, distribution
and number of seeds n: the trials, the coverage and the mean width. `ppo-lab docs` writes its
tables (`render`) between the markers of `docs/statistics.md` (tests/test_docs.py checks that the
page holds what the record renders). The estimates are the ones the lab prints, each measured through the
function that prints it (`ppo_lab.estimators`):

- the mean across seeds (`mean_interval`, as `mean_summary` gives it), beside Student t and
  the percentile bootstrap of the mean;
- the difference of two groups' means (`difference_interval`, `ppo-lab compare`);
- the IQM across seeds (`interval_estimates`, `mean_summary`'s IQM interval);
- rliable's mean, median and IQM across four tasks, one of each family (`interval_estimates`),
  and P(A > B) on one task (`probability_of_improvement_interval`), read at the lab's expanded
  percentiles and at rliable's own.

The families (FAMILIES): normal returns; skewed ones (lognormal, sigma 0.8); returns bounded with
mass at the bound, like CartPole's (500 with probability 0.7, else uniform on 20-300; bounds
[0, 500]); a 0/1 success (probability 0.7; bounds [0, 1]). A second member of each (B) gives the
differences and P(A > B).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from scipy import special

from ppo_lab import estimators as es
from ppo_lab import rundir
from ppo_lab.config_keys import PROJECT_ROOT
from ppo_lab.judging.tables import table

RECORD = PROJECT_ROOT / "docs" / "statistics_coverage.json"
NS = (3, 4, 5, 8, 16)
CONFIDENCE = 0.95
SEED = 0
_GRID = (np.arange(200_000) + 0.5) / 200_000  # quantile levels: a distribution's truths by its quantile function


@dataclass(frozen=True)
class Family:
    """Seeds of one kind: `quantile(u, b)` is the quantile function of member A (b False) or B
    (b True); draws are `quantile(uniform)`, so every truth is computed from it exactly."""
    name: str
    quantile: Callable[[np.ndarray, bool], np.ndarray]
    bounds: tuple[float | None, float | None] = (None, None)

    def draw(self, rng: np.random.Generator, shape: tuple, b: bool = False) -> np.ndarray:
        return self.quantile(rng.random(shape), b)

    def mean(self, b: bool = False) -> float:
        return float(np.mean(self.quantile(_GRID, b)))

    def iqm(self) -> float:
        return float(es.trim_mean(self.quantile(_GRID, False), 0.25))


def _bounded_at_top(top: float, low: float, high: float):
    """`top` with probability 0.7 (A) or 0.4 (B), else uniform on [low, high]."""
    def quantile(u, b):
        p = 0.4 if b else 0.7
        below = 1.0 - p
        return np.where(u < below, low + (high - low) * u / below, top)
    return quantile


FAMILIES = (
    Family("normal", lambda u, b: special.ndtri(u) * (2.0 if b else 1.0) + (0.5 if b else 0.0)),
    Family("lognormal (sigma 0.8)", lambda u, b: np.exp((0.5 if b else 0.8) * special.ndtri(u))),
    Family("CartPole-like", _bounded_at_top(500.0, 20.0, 300.0), (0.0, 500.0)),
    Family("0/1 success", lambda u, b: (u >= (0.6 if b else 0.3)).astype(np.float64), (0.0, 1.0)),
)


FAMILY_ORDER = {f.name: i for i, f in enumerate(FAMILIES)}


def _row(estimate: str, method: str, family: str, n: int, hits: np.ndarray, widths: np.ndarray) -> dict:
    return {"estimate": estimate, "method": method, "family": family, "n": n, "trials": int(hits.size),
            "coverage": round(float(np.mean(hits)), 4), "mean_width": float(np.nanmean(widths))}


def _hits(low, high, truth) -> np.ndarray:
    return (np.asarray(low) <= truth) & (truth <= np.asarray(high))


def percentile_bootstrap_of_the_mean(x: np.ndarray, reps: int) -> tuple[np.ndarray, np.ndarray]:
    """The plain percentile bootstrap of each row's mean (rliable's percentiles), for comparison:
    what the lab gave bounded metrics and groups of fewer than 5 seeds before Anderson's interval.
    The lab's one resampler, each row a task of its own (`estimators.stratified_resamples`)."""
    chunks = [es.percentile_interval(es.stratified_resamples(chunk.T, reps, i).mean(axis=1), CONFIDENCE, None)
              for i, chunk in enumerate(np.array_split(x, max(1, len(x) // 200)))]
    return np.concatenate([c[0] for c in chunks]), np.concatenate([c[1] for c in chunks])


def mean_rows(family: Family, n: int, trials: int, rng: np.random.Generator, reps: int) -> list[dict]:
    """The interval of the mean: the lab's, Student t, the percentile bootstrap."""
    x, truth = family.draw(rng, (trials, n)), family.mean()
    rows = []
    for method, (low, high) in (("the lab's (mean_summary)", es.mean_interval(x, *family.bounds, CONFIDENCE)),
                                ("Student t", es.t_interval(x, CONFIDENCE)),
                                ("percentile bootstrap", percentile_bootstrap_of_the_mean(x[: trials // 4], reps))):
        rows.append(_row("mean", method, family.name, n, _hits(low, high, truth), np.asarray(high) - np.asarray(low)))
    return rows


def difference_rows(family: Family, n: int, trials: int, rng: np.random.Generator) -> list[dict]:
    """The interval of mean(A) - mean(B): the lab's (`ppo-lab compare`), and Welch's for bounded families."""
    a, b = family.draw(rng, (trials, n)), family.draw(rng, (trials, n), True)
    truth = family.mean() - family.mean(True)
    methods = [("the lab's (compare)", family.bounds)] + ([("Welch", (None, None))] if family.bounds[0] is not None else [])
    rows = []
    for method, bounds in methods:
        low, high, _ = es.difference_interval(a, b, *bounds, CONFIDENCE)
        rows.append(_row("difference of means", method, family.name, n, _hits(low, high, truth), high - low))
    return rows


def _bootstrap_methods(n: int) -> list[tuple[str, bool]]:
    """(method, as_rliable) measured at n: rliable's own percentiles at every n, the lab's reading
    where it gives an interval (from BOOTSTRAP_MIN_RUNS)."""
    lab = [("the lab's (expanded percentiles)", False)] if n >= es.BOOTSTRAP_MIN_RUNS else []
    return lab + [("rliable's percentiles", True)]


def iqm_rows(family: Family, n: int, trials: int, rng: np.random.Generator, reps: int) -> list[dict]:
    """The IQM across seeds with its bootstrap interval (the lab's is `mean_summary`'s)."""
    samples = family.draw(rng, (trials, n))
    rows = []
    for method, as_rliable in _bootstrap_methods(n):
        found = [es.interval_estimates(x, reps=reps, seed=i, names=("iqm",), as_rliable=as_rliable)["iqm"]
                 for i, x in enumerate(samples)]
        low, high = np.array([[e["ci_low"], e["ci_high"]] for e in found]).T
        rows.append(_row("IQM", method, family.name, n, _hits(low, high, family.iqm()), high - low))
    return rows


def _tasks(rng: np.random.Generator, n: int) -> np.ndarray:
    """One (n runs, 4 tasks) sample: a task per family, CartPole-like scores over 500."""
    return np.stack([f.draw(rng, (n,)) / (f.bounds[1] if f.bounds[1] else 1.0) for f in FAMILIES], axis=1)


def _task_truths() -> dict[str, float]:
    """rliable's mean, median and IQM of the four tasks' distributions."""
    grids = [f.quantile(_GRID, False) / (f.bounds[1] if f.bounds[1] else 1.0) for f in FAMILIES]
    means = [float(np.mean(g)) for g in grids]
    return {"mean": float(np.mean(means)), "median": float(np.median(means)),
            "iqm": float(es.trim_mean(np.concatenate(grids), 0.25))}


def rliable_rows(n: int, trials: int, rng: np.random.Generator, reps: int) -> list[dict]:
    """rliable's aggregates across the four tasks, read at the lab's percentiles and at rliable's."""
    truths = _task_truths()
    samples = [_tasks(rng, n) for _ in range(trials)]
    rows = []
    for method, as_rliable in _bootstrap_methods(n):
        found = [es.interval_estimates(x, reps=reps, seed=i, names=tuple(truths), as_rliable=as_rliable)
                 for i, x in enumerate(samples)]
        for name, truth in truths.items():
            low, high = np.array([[f[name]["ci_low"], f[name]["ci_high"]] for f in found]).T
            rows.append(_row(f"rliable {name}, 4 tasks", method, "one task per family", n, _hits(low, high, truth), high - low))
    return rows


def improvement_rows(family: Family, n: int, trials: int, rng: np.random.Generator, reps: int) -> list[dict]:
    """P(A > B) on one task, read at the lab's percentiles and at rliable's."""
    truth = es.probability_of_improvement(family.quantile(_GRID[::50], False), family.quantile(_GRID[::50], True))
    pairs = [(family.draw(rng, (n,)), family.draw(rng, (n,), True)) for _ in range(trials)]
    rows = []
    for method, as_rliable in _bootstrap_methods(n):
        found = [es.probability_of_improvement_interval(a, b, reps=reps, seed=i, as_rliable=as_rliable)
                 for i, (a, b) in enumerate(pairs)]
        low, high = np.array([[f["ci_low"], f["ci_high"]] for f in found]).T
        rows.append(_row("P(A > B)", method, family.name, n, _hits(low, high, truth), high - low))
    return rows


def measure(trials: int = 20_000, bootstrap_trials: int = 1_000, reps: int = 1_000, seed: int = SEED) -> dict:
    """Every row of the record, from one seeded generator."""
    rng = np.random.default_rng(seed)
    rows = []
    for family in FAMILIES:
        for n in NS:
            rows += mean_rows(family, n, trials, rng, reps) + difference_rows(family, n, trials, rng)
            rows += iqm_rows(family, n, bootstrap_trials, rng, reps) + improvement_rows(family, n, bootstrap_trials, rng, reps)
    for n in NS:
        rows += rliable_rows(n, bootstrap_trials, rng, reps)
    return {"confidence": CONFIDENCE, "seed": seed, "bootstrap_reps": reps, "bootstrap_min_runs": es.BOOTSTRAP_MIN_RUNS,
            "families": [f.name for f in FAMILIES], "rows": rows}


def render(record: dict) -> str:
    """docs/statistics.md's coverage block (`ppo-lab docs`): per estimate, a table of coverage
    (and the mean width of the interval) by method, family and n; an n the lab gives no interval
    at is `-`."""
    lines = [f"Measured by `python -m ppo_lab.analysis.coverage --measure` (seed {record['seed']}, "
             f"{record['bootstrap_reps']} bootstrap replicates). Each cell: the share of {int(record['confidence'] * 100)}% "
             "intervals that hold the true value, and in brackets their mean width, by number of seeds n; trials per "
             "cell in the last column.", ""]
    by_estimate: dict[str, list[dict]] = {}
    for row in record["rows"]:
        by_estimate.setdefault(row["estimate"], []).append(row)
    ns = sorted({row["n"] for row in record["rows"]})
    for estimate, rows in by_estimate.items():
        pairs = dict.fromkeys((r["method"], r["family"]) for r in rows)  # per family, the lab's method first
        body = []
        for method, family in sorted(pairs, key=lambda p: (FAMILY_ORDER.get(p[1], -1), not p[0].startswith("the lab's"))):
            cells = {r["n"]: r for r in rows if (r["method"], r["family"]) == (method, family)}
            trials = sorted({r["trials"] for r in cells.values()})
            body.append([method, family, *(_cell(cells.get(n)) for n in ns), ", ".join(f"{t:,}" for t in trials)])
        lines += [f"**{estimate}**", "", table(["method", "seeds from", *(f"n={n}" for n in ns), "trials"],
                                               "ll" + "r" * (len(ns) + 1), body), ""]
    return "\n".join(lines)


def _cell(row: dict | None) -> str:
    return "-" if row is None else f"{row['coverage']:.1%} ({row['mean_width']:.3g})"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Measure the coverage of the lab's intervals (`ppo-lab docs` renders "
                                     "the record's tables into docs/statistics.md).")
    parser.add_argument("--measure", action="store_true", help=f"simulate and write the record ({RECORD.name})")
    parser.add_argument("--record", type=Path, default=RECORD)
    parser.add_argument("--trials", type=int, default=20_000, help="samples per cell of the mean and the difference")
    parser.add_argument("--bootstrap-trials", type=int, default=1_000, help="samples per cell of the bootstrap intervals")
    args = parser.parse_args(argv)
    if not args.measure:
        parser.error("give --measure (`ppo-lab docs` renders the record's tables)")
    rundir.write_json_atomic(args.record, measure(args.trials, args.bootstrap_trials))
    print(f"wrote {args.record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
