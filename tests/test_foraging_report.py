"""The Goodhart report's numbers (ppo_lab.experiments.goodhart.report) on a sweep written by hand."""

from __future__ import annotations

import csv
import itertools
import math

import numpy as np

import pytest

from ppo_lab.experiments.goodhart import report as gh
from ppo_lab.analysis import run_plots, sweep as sw
from ppo_lab.estimators import anderson_interval, bonferroni, welch_t_test
from test_aggregate import make_sweep, value

MODES = ["ground_truth", "ground_truth_blind", "ground_truth_blinded", "proxy_mortal", "proxy"]
SURVIVAL = [*gh.METRICS, *(m + "_greedy" for m in gh.METRICS)]
EVAL = ("episode_return", "episode_length", *SURVIVAL)


def add_goodhart_columns(run_dir, mode_index: int) -> None:
    """Give a hand-written metrics.csv the two Goodhart-curve columns: paid rises with the
    update in every mode; the truth rises for ground_truth (0) and falls for the others."""
    path = run_dir / "metrics.csv"
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        u, s = int(r["update"]), int(r["seed"])
        r[gh.PAID] = 10.0 * u + s
        r[gh.TRUE] = (10.0 if mode_index == 0 else -10.0) * u + s
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def goodhart_sweep(path, seeds: int = 3):
    """A Goodhart sweep of the five modes x `seeds` seeds in the run directory contract."""
    jobs = [[f"reward={m}", "seed=0", f"num_seeds={seeds}"] for m in MODES]
    sweep = make_sweep(path, jobs, sweeper_params={"reward": ",".join(MODES)}, seeds_per_job=seeds,
                       eval_metrics=EVAL, group_of=lambda ov: MODES.index(ov[0].split("=")[1]))
    for job in range(len(MODES)):
        add_goodhart_columns(sweep / str(job), job)
    return sweep


def test_reference_is_stated_under_our_definitions():
    shares = [round(100 * gh.REFERENCE[m]["food_share"], 1) for m in ("ground_truth", "ground_truth_blinded", "proxy_mortal", "proxy")]
    assert shares == [99.9, 65.6, 56.6, 55.3]
    assert [gh.REFERENCE[m]["efficiency_per_life"] for m in ("ground_truth", "ground_truth_blinded", "proxy_mortal", "proxy")] == [0.999, 0.299, 0.247, 0.238]
    assert "efficiency_per_world" not in gh.REFERENCE["proxy"]  # the reference never reported it


def test_modes_table_and_pairwise_tests(tmp_path):
    col = sw.collect([goodhart_sweep(tmp_path / "sw")])
    assert gh.modes_in(col) == MODES
    rows = gh.mode_table(col, ["food_share"])
    for i, mode in enumerate(MODES):
        row = next(r for r in rows if r["mode"] == mode)
        # a share (in [0, 1]; these made-up ones pass 1, which widens the bound): Anderson's interval
        seeds = [value(i, s, "eval/food_share") for s in range(3)]
        assert row["ci_method"] == "anderson" and row["ci_low"] <= row["mean"] <= row["ci_high"]
        assert row["n_seeds"] == 3 and row["mean"] == pytest.approx(np.mean(seeds))
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(tuple(map(float, anderson_interval(np.array(seeds), 0, 1))))
    tests = gh.pairwise_tests(col, ["food_share", "energy_per_1k"])
    assert len(tests) == 2 * math.comb(5, 2)
    block = [r for r in tests if r["metric"] == "energy_per_1k"]
    assert [(r["a"], r["b"]) for r in block] == list(itertools.combinations(MODES, 2))
    first = block[0]
    t, p = welch_t_test([value(0, s, "eval/energy_per_1k") for s in range(3)], [value(1, s, "eval/energy_per_1k") for s in range(3)])
    assert first["t"] == pytest.approx(t) and first["p"] == pytest.approx(p)
    assert [r["p_bonferroni"] for r in block] == pytest.approx(list(bonferroni([r["p"] for r in block])))
    # Made-up values grow with the mode's index: the later mode's interval lies above.
    assert gh.intervals_separate(col, "proxy", "ground_truth", "energy_per_1k")
    assert not gh.intervals_separate(col, "ground_truth", "proxy", "energy_per_1k")
    # three seeds of a share: Anderson's intervals, honest about three seeds, overlap
    assert not gh.intervals_separate(col, "proxy", "ground_truth", "food_share")


def test_goodhart_curves_per_mode_and_in_ppo_lab_plots(tmp_path):
    sweep = goodhart_sweep(tmp_path / "sw")
    col = sw.collect([sweep])
    series = gh.goodhart_series(col)
    assert set(series) == set(MODES)
    paid, true = series["proxy"]
    assert len(paid) == len(true) == 3
    assert true[0][1][-1] < 0 < paid[0][1][-1]  # proxy: paid more, truly worse
    assert gh.plot_goodhart_curves(col, path=tmp_path / "curves.png") is not None
    assert (tmp_path / "curves.png").stat().st_size > 1000
    out = run_plots.plot_run(sweep / "4")
    assert out.stat().st_size > 1000
