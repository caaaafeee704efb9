"""A tiny end-to-end run of every reward mode through launch.py (one multirun process)."""

from __future__ import annotations

import json

import pytest

from conftest import launch, read_rows, read_summary

pytestmark = pytest.mark.slow

MODES = ["ground_truth", "ground_truth_blind", "ground_truth_blinded", "proxy_mortal", "proxy", "ground_truth_handhold"]
TINY_FORAGING = [
    "env=foraging", "env.grid_size=16", "env.food_min=4", "env.food_max=8", "env.poison_min=4",
    "env.poison_max=8", "env.max_steps=32", "ppo.num_envs=4", "ppo.num_steps=16", "ppo.total_timesteps=512",
    "ppo.num_minibatches=2", "ppo.update_epochs=1", "train.chunk_updates=8", "eval.episodes=2",
    "eval.survival_envs=4", "eval.survival_steps=64", "hardware.host_devices=1", "num_seeds=2",
]
SURVIVAL = ["efficiency_per_life", "food_share", "efficiency_per_world", "energy_per_1k", "food_per_1k", "poison_per_1k",
            "deaths_per_1k", "survival_mean"]


@pytest.mark.timeout(600)
def test_every_mode_trains_logs_the_true_objective_and_is_evaluated(tmp_path):
    sweep = tmp_path / "sweep"
    launch(["-m", f"reward={','.join(MODES)}", *TINY_FORAGING, f"hydra.sweep.dir={sweep}"], timeout=540)
    for job, mode in enumerate(MODES):
        run_dir = sweep / str(job)
        s = read_summary(run_dir)
        assert s["status"] == "completed" and s["reward"] == mode and s["env"] == "foraging"
        assert s["seeds"] == [0, 1] and s["updates"] == 8
        for name in ["episode_return", "episode_length", *SURVIVAL, *(m + "_greedy" for m in SURVIVAL)]:
            assert len(s["eval"][name]) == 2, name
        assert "efficiency" not in s["eval"]  # renamed efficiency_per_world
        row = read_rows(run_dir)[0]
        for name in ["true/objective_per_1k", "reward/paid_per_1k", "reward/food", "reward/poison", "reward/step_cost", "reward/death", "reward/shaping",
                     "true/food_eaten", "true/poison_eaten", "true/energy", "true/deaths", "actions/N", "actions/NW"]:
            assert name in row, name
    _judged_on_the_true_objective(sweep)
    # proxy is immortal in training: its energy is frozen at the start value.
    proxy_rows = read_rows(sweep / str(MODES.index("proxy")))
    assert {float(r["true/energy"]) for r in proxy_rows} == {1.0}
    assert all(float(r["true/deaths"]) == 0.0 for r in proxy_rows)
    # The Goodhart curve's truth is from counts, also for the immortal proxy: the mean over a
    # rollout of 1000 x (food - 2 poison - 0.01) per step.
    for r in proxy_rows:
        expected = 1000 * (float(r["true/food_eaten"]) - 2 * float(r["true/poison_eaten"]) - 0.01)
        assert float(r["true/objective_per_1k"]) == pytest.approx(expected, rel=1e-4, abs=1e-2)
        assert float(r["reward/paid_per_1k"]) == pytest.approx(1000 * (float(r["true/food_eaten"]) + 0.5 * float(r["true/poison_eaten"])), rel=1e-4, abs=1e-2)


@pytest.mark.timeout(600)
def test_the_reference_recipe_trains_with_a_privileged_critic(tmp_path):
    run_dir = tmp_path / "ref"
    tiny = [o for o in TINY_FORAGING if not o.startswith(("num_seeds=", "ppo.num_minibatches="))]
    launch(["experiment=goodhart_reference", "reward=ground_truth_blinded", "network=mlp", *tiny, "num_seeds=1",
            f"hydra.run.dir={run_dir}"], timeout=540)
    s = read_summary(run_dir)
    assert s["status"] == "completed" and s["experiment"] == "goodhart_reference"
    assert len(s["eval"]["efficiency_per_life"]) == 1


def _judged_on_the_true_objective(sweep):
    """The sweep's own aggregate (written at its end) ranks the modes on the world's headline,
    the true objective, not on returns each mode was paid under its own reward function."""
    report = json.loads((sweep / "rliable.json").read_text())
    assert report["metric"] == "true/objective_per_1k"
    per_mode = {}
    for job, mode in enumerate(MODES):
        per_mode[mode] = read_summary(sweep / str(job))["final"]["true/objective_per_1k"]
    a, b = per_mode["ground_truth"], per_mode["proxy"]
    wins = sum((x > y) + 0.5 * (x == y) for x in a for y in b) / (len(a) * len(b))  # Mann-Whitney U / (n_a n_b)
    assert report["improvement"]["reward=ground_truth > reward=proxy"]["point"] == pytest.approx(wins)
