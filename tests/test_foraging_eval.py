"""Continuous-survival evaluation on scripted policies whose numbers can be worked out by hand."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import pytest

from ppo_lab.envs.foraging.world import build
from ppo_lab.experiments.goodhart.survival import survival_evaluation

pytestmark = pytest.mark.timeout(120)

KEYS = {"efficiency_per_life", "food_share", "efficiency_per_world", "energy_per_1k", "food_per_1k", "poison_per_1k", "deaths_per_1k",
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
    assert math.isnan(m["efficiency_per_world"]) and m["efficiency_worlds_excluded"] == 4
    assert math.isnan(m["food_share"])  # nothing eaten: no share
    assert m["efficiency_per_life"] == 1.0  # every life ate nothing: 1.0 each (the reference's)


@pytest.mark.slow
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
    assert m["efficiency_per_world"] == m["food_share"] == m["efficiency_per_life"] == 1.0
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
    assert m["poison_per_1k"] == pytest.approx(1000.0)
    assert m["efficiency_per_world"] == m["food_share"] == m["efficiency_per_life"] == 0.0
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
    for name in ("efficiency_per_world", "food_share", "efficiency_per_life"):
        assert 0.0 <= m[name] <= 1.0
    assert m["food_share"] == pytest.approx(m["total_food"] / (m["total_food"] + m["total_poison"]))
    assert m["num_deaths"] > 0 and m["survival_min"] >= 1


def test_three_efficiencies_on_a_scripted_lineage():
    """One world, a 1x5 strip worked out by hand (grid 5, view 1, 1 food and 1 poison that can
    only respawn on free cells). The agent walks east; cells in a row are 0..4, agent at 0.

    The script below is replayed through `lives.record`, the ledger the evaluation uses, so
    the per-life arithmetic is checked on its own: lives (food, poison) =
      life 1: (2, 1) died -> 2/3;  life 2: (0, 0) starved -> 1.0;  life 3: (0, 1) died -> 0;
      life 4 (alive at the end): (3, 0) -> 1.0; life 5 never starts.
    efficiency_per_life = (2/3 + 1 + 0 + 1) / 4; food_share = 5 / 7; per world: the same 5/7.
    """
    from ppo_lab.envs.foraging import lives

    script = []  # (ate_food, ate_poison, died) per step
    script += [(1, 0, 0), (0, 0, 0), (1, 0, 0), (0, 1, 1)]        # life 1, 4 steps
    script += [(0, 0, 0)] * 9 + [(0, 0, 1)]                       # life 2, 10 steps
    script += [(0, 1, 1)]                                         # life 3, 1 step
    script += [(1, 0, 0), (1, 0, 0), (0, 0, 0), (1, 0, 0)]        # life 4, alive, 4 steps
    ledger = lives.init(1)
    step = jax.jit(lives.record)
    for f, p_, d in script:
        ledger = step(ledger, jnp.array([f], jnp.int32), jnp.array([p_], jnp.int32), jnp.array([bool(d)]))
    m = lives.summarize(ledger, jnp.array([1.0]), num_envs=1, num_steps=len(script), food_energy=1.0,
                        poison_energy=-2.0, move_cost=0.01)
    assert m["efficiency_per_life"] == pytest.approx((2 / 3 + 1.0 + 0.0 + 1.0) / 4)
    assert m["food_share"] == pytest.approx(5 / 7) and m["efficiency_per_world"] == pytest.approx(5 / 7)
    assert m["num_deaths"] == 3 and m["num_censored"] == 1
    assert m["survival_mean"] == pytest.approx((4 + 10 + 1 + 4) / 4)
    assert m["survival_min"] == 1 and m["survival_max"] == 10
    assert m["energy_per_1k"] == pytest.approx((5 - 2 * 2 - 0.01 * 19) / 19 * 1000)


def test_a_life_born_on_the_last_step_is_no_life():
    from ppo_lab.envs.foraging import lives

    ledger = lives.init(2)
    # World 0 dies of poison on the last step; world 1 eats food and lives on.
    ledger = lives.record(ledger, jnp.array([0, 1]), jnp.array([1, 0]), jnp.array([True, False]))
    m = lives.summarize(ledger, jnp.zeros(2), num_envs=2, num_steps=1, food_energy=1.0,
                        poison_energy=-2.0, move_cost=0.01)
    assert m["num_deaths"] == 1 and m["num_censored"] == 1
    assert m["efficiency_per_life"] == pytest.approx(0.5)  # (0 + 1) / 2 lives, not 3


@pytest.mark.slow
def test_per_life_efficiency_through_the_real_evaluation():
    # A packed food world: one life that eats every step; a packed poison world: a life per step.
    env, p = world(8, 0)
    m_food = survival_evaluation(env, p, always(2), jax.random.PRNGKey(5), num_envs=1, num_steps=300)
    assert m_food["efficiency_per_life"] == 1.0 and m_food["num_censored"] == 1
    env, p = world(0, 8)
    m_poison = survival_evaluation(env, p, always(2), jax.random.PRNGKey(5), num_envs=1, num_steps=300)
    # Every step eats poison and dies: 300 lives of (0, 1), each 0.0.
    assert m_poison["efficiency_per_life"] == 0.0 and m_poison["num_deaths"] == 300
