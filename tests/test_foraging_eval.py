"""Continuous-survival evaluation on scripted policies whose numbers can be worked out by hand."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import pytest

from ppo_lab.envs.foraging.world import build
from ppo_lab.envs.foraging.survival import survival_evaluation

pytestmark = pytest.mark.timeout(120)

KEYS = {"efficiency", "energy_per_1k", "food_per_1k", "poison_per_1k", "deaths_per_1k",
        "survival_mean", "survival_std"}


def world(food, poison, mode="ground_truth", grid=3):
    env_cfg = dict(name="foraging", grid_size=grid, view_range=1, food_min=food, food_max=food,
                   poison_min=poison, poison_max=poison, max_steps=50)
    return build(env_cfg, {"name": mode}, privileged_critic=False)


def always(action):
    return lambda obs, key: jnp.full(obs.shape[0], action, jnp.int32)


def test_no_food_every_agent_starves_at_step_100():
    env, p = world(0, 0, grid=5)
    m = survival_evaluation(env, p, always(2), jax.random.PRNGKey(0), num_envs=4, num_steps=1000)
    assert KEYS <= set(m)
    assert m["deaths_per_1k"] == pytest.approx(10.0)
    assert m["survival_mean"] == pytest.approx(100.0) and m["survival_std"] == pytest.approx(0.0)
    assert m["num_deaths"] == 40 and m["num_censored"] == 0  # last death on the last step
    assert m["food_per_1k"] == 0 and m["poison_per_1k"] == 0
    assert m["energy_per_1k"] == pytest.approx(-10.0)
    assert math.isnan(m["efficiency"]) and m["efficiency_agents_excluded"] == 4


def test_censored_lives_count_at_their_length():
    env, p = world(0, 0, grid=5)
    m = survival_evaluation(env, p, always(0), jax.random.PRNGKey(1), num_envs=3, num_steps=150)
    # Each agent: one death at 100, then alive for 50 steps (censored).
    assert m["num_deaths"] == 3 and m["num_censored"] == 3
    assert m["survival_mean"] == pytest.approx(75.0) and m["survival_std"] == pytest.approx(25.0)
    assert m["survival_mean_completed"] == pytest.approx(100.0)
    assert m["survival_min"] == 50 and m["survival_max"] == 100
    assert m["deaths_per_1k"] == pytest.approx(1000 / 150)


def test_packed_food_world_always_east_eats_every_step():
    # 3x3 torus, 8 food: every cell but the agent's holds food, and the eaten food can only
    # reappear on the cell just left. Moving east eats one food per step, forever.
    env, p = world(8, 0)
    m = survival_evaluation(env, p, always(2), jax.random.PRNGKey(2), num_envs=5, num_steps=200)
    assert m["food_per_1k"] == pytest.approx(1000.0) and m["poison_per_1k"] == 0
    assert m["efficiency"] == pytest.approx(1.0)
    assert m["energy_per_1k"] == pytest.approx(1000.0 - 10.0)
    assert m["deaths_per_1k"] == 0 and m["num_censored"] == 5
    assert m["survival_mean"] == pytest.approx(200.0)
    assert m["mean_final_energy"] == pytest.approx(1.0 + 200 * 0.99, rel=1e-4)


def test_packed_poison_world_dies_every_step_even_for_proxy():
    # Energy is always on in evaluation, also for the immortal-in-training proxy mode.
    env, p = world(0, 8, mode="proxy")
    assert bool(p.immortal)
    m = survival_evaluation(env, p, always(4), jax.random.PRNGKey(3), num_envs=2, num_steps=100)
    assert m["deaths_per_1k"] == pytest.approx(1000.0)
    assert m["poison_per_1k"] == pytest.approx(1000.0) and m["efficiency"] == 0.0
    assert m["energy_per_1k"] == pytest.approx(-2000.0 - 10.0)
    assert m["survival_mean"] == pytest.approx(1.0) and m["survival_std"] == 0.0


def test_random_policy_metrics_are_consistent():
    env, p = world(3, 3, grid=7)

    def policy(obs, key):
        return jax.random.randint(key, (obs.shape[0],), 0, 8)

    m = survival_evaluation(env, p, policy, jax.random.PRNGKey(4), num_envs=8, num_steps=300)
    steps = 8 * 300
    assert m["agent_steps"] == steps
    assert m["food_per_1k"] == pytest.approx(m["total_food"] / steps * 1000)
    expected = (m["total_food"] - 2 * m["total_poison"] - 0.01 * steps) / steps * 1000
    assert m["energy_per_1k"] == pytest.approx(expected)
    assert 0.0 <= m["efficiency"] <= 1.0
    assert m["num_deaths"] > 0 and m["survival_min"] >= 1
