"""Overoptimisation along training (analysis/overoptimisation.py) on known curves: Gao et al.'s
fit recovers its alpha and beta, the drop height of curves whose drop is known, the plateau rule
on the paid return; the permutation test by hand; and the Goodhart report on a real sweep."""

from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import launch, run_cli
from ppo_lab import rundir
from ppo_lab.analysis.overoptimisation import drop_height, gao_fit, gao_gain, plateau_stop
from ppo_lab.estimators import permutation_test
from ppo_lab.experiments.goodhart import overoptimisation as ov
from test_foraging_report import MODES, goodhart_sweep


def test_gao_fit_recovers_alpha_and_beta_and_its_peak():
    d = np.linspace(0.0, 3.0, 40)
    fit = gao_fit(d, gao_gain(2.0, 1.5, d))
    assert (fit.alpha, fit.beta) == (pytest.approx(2.0, abs=1e-9), pytest.approx(1.5, abs=1e-9))
    assert fit.rmse == pytest.approx(0.0, abs=1e-9) and fit.r2 == pytest.approx(1.0) and fit.n == 40
    # The peak: d* = exp(alpha / beta - 1), where the gain is beta d*; checked against the curve itself.
    grid = np.linspace(1e-6, 3.0, 300001)
    assert fit.d_peak == pytest.approx(math.exp(2.0 / 1.5 - 1.0)) == pytest.approx(grid[np.argmax(gao_gain(2.0, 1.5, grid))], abs=1e-4)
    assert fit.gain_peak == pytest.approx(1.5 * fit.d_peak) and fit.peaks_within


def test_gao_fit_under_noise_and_where_the_form_never_peaks():
    rng = np.random.default_rng(0)
    d = np.linspace(0.05, 2.5, 60)
    noisy = gao_fit(d, gao_gain(3.0, 2.0, d) + rng.normal(0, 0.05, d.size))
    assert noisy.alpha == pytest.approx(3.0, abs=0.1) and noisy.beta == pytest.approx(2.0, abs=0.1)
    assert noisy.rmse == pytest.approx(0.05, rel=0.3)
    rising = gao_fit(d, 5.0 * d + d * np.log(d))  # beta = -1: it only rises faster
    assert rising.beta == pytest.approx(-1.0) and math.isnan(rising.d_peak) and not rising.peaks_within
    beyond = gao_fit(d, gao_gain(10.0, 1.0, d))  # peaks at e^9, far past the distances measured
    assert beyond.d_peak > d.max() and not beyond.peaks_within
    assert math.isnan(gao_fit([0.0, 0.0, 1.0], [0.0, 0.0, 1.0]).alpha), "too few distances to fit"


def test_drop_height_of_known_curves():
    rising = drop_height([0.0, 1.0, 2.0, 3.0, 4.0], scale=10.0)
    assert (rising.drop, rising.ndh, rising.falls) == (0.0, 0.0, False)
    hump = drop_height([0.0, 5.0, 10.0, 6.0, 4.0], scale=20.0)
    assert (hump.peak_index, hump.peak, hump.final, hump.drop, hump.ndh) == (2, 10.0, 4.0, 6.0, 0.3)
    assert drop_height([0.0, 5.0, 10.0, 6.0, 4.0]).ndh == 0.6, "by default over the path's own range"
    # A rise, a fall of 5, then a flat noisy tail: the fall is far beyond the evaluations' noise ...
    rng = np.random.default_rng(1)
    curve = np.concatenate([[0.0, 5.0, 10.0], 5.0 + rng.normal(0, 0.1, 120)])
    fell = drop_height(curve)
    assert fell.falls and fell.noise == pytest.approx(0.1, rel=0.25)
    # ... and a flat noisy curve's largest-to-last gap is not a fall.
    flat = drop_height(rng.normal(0, 0.1, 40))
    assert flat.drop > 0 and not flat.falls


def test_the_plateau_rule_stops_where_the_paid_return_stops_improving():
    paid = [0.0, 1.0, 2.0, 3.0, 3.0, 3.01, 2.9, 3.0, 3.0, 5.0]
    stop = plateau_stop(paid, patience=5, tolerance=0.01)  # 3.01 beats 3.0 by less than 1% of the gain of 3
    assert (stop.kept, stop.index, stop.triggered) == (3, 8, True)
    assert plateau_stop([0.0, 1.0, 2.0, 3.0], patience=5) == plateau_stop([0.0, 1.0, 2.0, 3.0], patience=5)
    never = plateau_stop([0.0, 1.0, 2.0, 3.0], patience=5)
    assert (never.kept, never.index, never.triggered) == (3, 3, False)


def test_permutation_test_by_hand():
    # Pooled 1, 2, 3, 4 split in 2 + 2: 6 splits, |mean difference| 2, 1, 0, 0, 1, 2; observed 2.
    assert permutation_test([1.0, 2.0], [3.0, 4.0]) == pytest.approx(2 / 6)
    # No spread in either group (Welch's t has nothing to work with): the 2 extreme splits of 70.
    assert permutation_test([0.0] * 4, [0.5] * 4) == pytest.approx(2 / 70)
    assert permutation_test([0.0] * 4, [0.0] * 4) == 1.0
    sampled = permutation_test(np.arange(12.0), np.arange(12.0) + 6, reps=2000)  # C(24, 12) splits: sampled
    assert 0.0 < sampled < 0.05


TINY_FORAGING = [
    "env=foraging", "env.grid_size=16", "env.food_min=4", "env.food_max=8", "env.poison_min=4", "env.poison_max=8",
    "env.max_steps=32", "ppo.num_envs=8", "ppo.num_steps=16", "ppo.total_timesteps=2048", "ppo.num_minibatches=2",
    "ppo.update_epochs=1", "train.chunk_updates=8", "eval.episodes=2", "eval.survival_envs=4", "eval.survival_steps=32",
    "eval.every_updates=2", "eval.along_episodes=2", "eval.along_survival_envs=4", "eval.along_survival_steps=32",
    "eval.kl_states=64", "hardware.host_devices=1", "num_seeds=2",
]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_report_of_a_sweep_of_two_modes(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    launch(["-m", "reward=ground_truth,proxy", *TINY_FORAGING, f"hydra.sweep.dir={sweep}"], timeout=540)
    out = tmp_path / "report"
    done = run_cli(["goodhart-report", sweep, "--out", out], capsys)
    assert done.returncode == 0, done.stderr
    text = (out / "overoptimisation.md").read_text()
    assert text in done.stdout
    for mode in ("ground_truth", "proxy"):
        assert text.count(f"| {mode} | 2 |") == 3, mode  # its row in the fit, drop and stopping tables
    assert "| proxy |" in text.split("| mode | NDH (mean) |")[1], "proxy's drop heights tested against ground_truth's"
    # Every evaluation row holds the true objective, its parts, what the mode pays and the KL from the start.
    for job in ("0", "1"):
        evals = rundir.columns_by_seed(sweep / job / rundir.EVALS)
        assert sorted(evals) == [0, 1]
        for cols in evals.values():
            assert list(cols["update"]) == list(range(0, 17, 2))
            for name in ("eval/energy_per_1k", "eval/food_per_1k", "eval/poison_per_1k", "eval/paid_per_1k",
                         "eval/kl_from_initial", "eval/distance"):
                assert np.all(np.isfinite(cols[name])), name
            assert cols["eval/kl_from_initial"][0] == 0.0 and np.all(cols["eval/kl_from_initial"][1:] > 0)
    rows = (out / "overoptimisation_seeds.csv").read_text().splitlines()
    assert len(rows) == 1 + 4 and all(",9," in r for r in rows[1:]), "16 updates, an evaluation every 2: 9 a seed"
    assert (out / "overoptimisation.png").stat().st_size > 10_000
    refused = run_cli(["goodhart-report", tmp_path / "nowhere"], capsys)
    assert refused.returncode == 2 and "does not exist" in refused.stderr


def write_evals(run_dir, mode_index: int, seeds) -> None:
    """Evaluations along training of known shape, an evaluation every 4 of 40 updates: the true
    objective rises with d for ground_truth (mode 0); for the others it follows Gao's form with
    alpha = 10 + seed, beta = 20 (a peak at d* = exp(alpha / 20 - 1), inside d's 0..1.26)."""
    rows = []
    for seed in seeds:
        for update in range(0, 41, 4):
            d = 0.2 * math.sqrt(update)
            true = -10 + (50 * d if mode_index == 0 else float(gao_gain(10 + seed, 20, d)))
            rows.append({"update": update, "seed": seed, "timesteps": 64 * update, "wall_s": 0.1 * update,
                         ov.DISTANCE: d, ov.TRUE: true, ov.PAID: 100 * d})
    rundir.MetricsCSV(run_dir / rundir.EVALS).append(rows)


def goodhart_sweep_along(path):
    sweep = goodhart_sweep(path)
    for job in range(len(MODES)):
        write_evals(sweep / str(job), job, range(3))
    return sweep


def test_the_report_reads_known_curves(tmp_path):
    paths, skipped = ov.load_paths([goodhart_sweep_along(tmp_path / "sweep")])
    assert not skipped and [p.mode for p in paths] == [m for m in MODES for _ in range(3)]
    scale = (-10 + 50 * 0.2 * math.sqrt(40)) - (-10)  # ground_truth's end is the highest J, every start the lowest
    for p in paths:
        assert len(p.updates) == 11 and p.updates[-1] == 40
        if p.mode == "ground_truth":
            assert p.drop.ndh == 0.0 and p.drop.peak_index == 10 and not p.fit.peaks_within
            continue
        assert (p.fit.alpha, p.fit.beta) == (pytest.approx(10 + p.seed, rel=1e-4), pytest.approx(20, rel=1e-4))
        assert p.fit.d_peak == pytest.approx(math.exp((10 + p.seed) / 20 - 1), rel=1e-4) and p.fit.peaks_within
        expected = max(p.true) - p.true[-1]
        assert p.drop.drop == pytest.approx(expected) and p.drop.ndh == pytest.approx(expected / scale, rel=1e-5)
        assert p.drop.falls and p.stop.kept == 10 and not p.stop.triggered  # paid rises to the end: it never stops
    tests = {r["mode"]: r for r in ov.drop_tests(paths)}
    # ground_truth's drop heights are all 0 (no spread): the permutation test; every other mode's
    # three lie above all of them, the most extreme of the C(6, 3) = 20 splits, both ways: p = 2/20.
    assert tests["proxy"]["test"] == "permutation" and tests["proxy"]["p"] == pytest.approx(0.1) and tests["proxy"]["n"] == "3 + 3"
    text = ov.markdown(paths)
    assert "| proxy | 0.0" in text and "| permutation | 0.100 | 0.400 | 3 + 3 |" in text, "Bonferroni over 4 modes"
    assert "| ground_truth | 3 |" in text and "0 of 3" in text
    # Each mode's shape said before any fit is read: ground_truth rises (its alpha, beta are not a peak).
    shapes = dict(line[2:].split(": ", 1) for line in ov.shape_lines(paths))
    assert list(shapes) == list(MODES)
    assert shapes["ground_truth"].startswith("J never falls after its peak beyond the evaluations' noise (0 of 3 seeds)")
    assert "describe a rise, not a peak" in shapes["ground_truth"]
    assert shapes["proxy"].startswith("J peaks and then falls beyond the evaluations' noise in 3 of 3 seeds")
    assert "peaks within the measured d in 3 of 3; median R^2 1" in shapes["proxy"]
    assert text.startswith("\n".join(ov.shape_lines(paths)))


def test_a_form_that_does_not_fit_is_said_so(tmp_path):
    """A path that rises, falls and rises again is no curve of Gao's form: its poor R^2 is said
    beside the mode, not only left in its column."""
    d = np.linspace(0.0, 2.0, 30)
    true = 10 * np.sin(4 * d)
    path = ov.SeedPath("proxy", tmp_path, 0, np.arange(30) * 4, np.arange(30) * 256, d, true, true)
    path.analyse(scale=20.0)
    (line,) = ov.shape_lines([path])
    assert path.fit.r2 < ov.POOR_FIT and "the form fits poorly (median R^2" in line
