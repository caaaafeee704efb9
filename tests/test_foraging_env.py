"""The foraging world: dynamics on hand-built states, every mode, config checks, gymnax API."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import run_config

from ppo_lab import parts
from ppo_lab.envs.foraging.config import MODES, check_config
from ppo_lab.envs.foraging.world import ACTION_NAMES, EnvState, build
from ppo_lab.errors import ConfigError

pytestmark = pytest.mark.timeout(120)

A = {name: i for i, name in enumerate(ACTION_NAMES)}
TINY = dict(name="foraging", grid_size=7, view_range=2, food_min=2, food_max=4, poison_min=2,
            poison_max=4, max_steps=50)


def make(mode="ground_truth", privileged=False, **env_over):
    return build({**TINY, **env_over}, {"name": mode}, privileged_critic=privileged)


def hand_state(env, agent, food=(), poison=(), energy=1.0, time=0):
    """A state with items at the given (row, col) cells; unused slots get distinct free cells."""
    g = env.grid_size
    flat = lambda rc: rc[0] * g + rc[1]  # noqa: E731
    used = {flat(agent)} | {flat(c) for c in food} | {flat(c) for c in poison}
    spare = iter(c for c in range(g * g) if c not in used)
    fpos = [flat(c) for c in food] + [next(spare) for _ in range(env.food_slots - len(food))]
    ppos = [flat(c) for c in poison] + [next(spare) for _ in range(env.poison_slots - len(poison))]
    return EnvState(time=jnp.int32(time), item_pos=jnp.asarray(fpos + ppos, jnp.int32),
                    n_food=jnp.int32(len(food)), n_poison=jnp.int32(len(poison)),
                    agent=jnp.int32(flat(agent)), energy=jnp.float32(energy))


def step(env, params, state, action, seed=0):
    return env.step(jax.random.PRNGKey(seed), state, jnp.int32(action), params)


def rc(env, flat):
    return divmod(int(flat), env.grid_size)


def check_invariants(env, state):
    """All slot cells distinct; no active item on the agent."""
    pos = np.asarray(state.item_pos)
    assert len(set(pos.tolist())) == len(pos)
    active = np.asarray(env.active_mask(state))
    assert int(state.agent) not in set(pos[active].tolist())


# ---- dynamics --------------------------------------------------------------------------------
def test_eat_food_energy_reward_and_counts():
    env, p = make()
    s = hand_state(env, (3, 3), food=[(3, 4), (0, 0)], poison=[(5, 5), (1, 6)])
    obs, s2, r, term, trunc, info = step(env, p, s, A["E"])
    assert rc(env, s2.agent) == (3, 4)
    assert float(s2.energy) == pytest.approx(1.0 - 0.01 + 1.0)
    assert float(r) == pytest.approx(1.0 - 0.01)
    assert not bool(term) and not bool(trunc)
    assert int(s2.n_food) == 2 and int(s2.n_poison) == 2  # counts constant
    active = np.asarray(env.active_mask(s2))
    assert active.sum() == 4
    check_invariants(env, s2)
    m = {k: float(v) for k, v in info["metrics"].items()}
    assert m["reward/food"] == 1.0 and m["true/food_eaten"] == 1.0
    assert m["reward/poison"] == 0.0 and m["true/deaths"] == 0.0
    assert m["reward/step_cost"] == pytest.approx(-0.01)
    assert m["true/energy"] == pytest.approx(1.99)


def test_one_poison_at_start_is_fatal():
    env, p = make()
    s = hand_state(env, (3, 3), food=[(0, 0), (1, 1)], poison=[(2, 3), (6, 6)])
    obs, s2, r, term, trunc, info = step(env, p, s, A["N"])
    assert bool(term) and not bool(trunc)
    assert float(r) == pytest.approx(-2.0 - 0.01 - 4.0)
    m = info["metrics"]
    assert float(m["reward/poison"]) == -2.0 and float(m["reward/death"]) == -4.0
    assert float(m["true/deaths"]) == 1.0 and float(m["true/energy"]) == pytest.approx(-1.01)
    # Auto-reset: the returned state is a new life, the final observation is the old one.
    assert int(s2.time) == 0 and float(s2.energy) == 1.0
    check_invariants(env, s2)
    assert info["final_observation"].shape == obs.shape


@pytest.mark.slow
def test_respawn_is_uniform_over_free_cells_never_agent_or_occupied():
    env, p = make(grid_size=5, view_range=1, food_min=1, food_max=3, poison_min=1, poison_max=3)
    s = hand_state(env, (2, 2), food=[(2, 3), (0, 0)], poison=[(4, 4), (1, 1)])
    keys = jax.random.split(jax.random.PRNGKey(7), 4000)
    new, ev = jax.vmap(env.transition, in_axes=(0, None, None, None))(keys, s, jnp.int32(A["E"]), p)
    assert bool(jnp.all(ev["ate_food"]))
    cells = np.asarray(new.item_pos[:, 0])  # the eaten food is slot 0
    agent, occupied = 2 * 5 + 3, {0, 24, 6}
    free = sorted(set(range(25)) - occupied - {agent})
    assert set(cells.tolist()) == set(free)  # every free cell reachable, nothing else
    counts = np.bincount(cells, minlength=25)[free]
    expected = len(cells) / len(free)
    assert np.all(np.abs(counts - expected) < 5 * np.sqrt(expected))  # loose uniformity
    # Reserved slots hop out of the way: all slot cells stay distinct in every sample.
    pos = np.asarray(new.item_pos)
    assert all(len(set(row)) == len(row) for row in pos.tolist())


def test_move_cost_and_wraparound_moves():
    env, p = make()
    s = hand_state(env, (0, 0), food=[(3, 3), (4, 4)], poison=[(5, 5), (5, 1)])
    _, s2, r, *_ = step(env, p, s, A["NW"])
    assert rc(env, s2.agent) == (6, 6)
    assert float(s2.energy) == pytest.approx(0.99)
    assert float(r) == pytest.approx(-0.01)
    for name, (dr, dc) in zip(ACTION_NAMES, [(-1, 0), (-1, 1), (0, 1), (1, 1), (1, 0), (1, -1),
                                             (0, -1), (-1, -1)]):
        _, s3, *_ = step(env, p, s, A[name])
        assert rc(env, s3.agent) == (dr % 7, dc % 7)


def test_starvation_takes_exactly_100_moves():
    env, p = make(food_min=0, food_max=0, poison_min=0, poison_max=0, max_steps=1000)
    s = hand_state(env, (3, 3))

    def body(s, k):
        s, ev = env.transition(k, s, jnp.int32(A["E"]), p)
        return s, ev["died"]

    _, died = jax.lax.scan(body, s, jax.random.split(jax.random.PRNGKey(0), 101))
    assert np.flatnonzero(np.asarray(died)).tolist() == [99, 100]  # dies at move 100 (and on)


def test_truncation_and_auto_reset_redraws_counts():
    env, p = make(max_steps=3)
    s = hand_state(env, (3, 3), food=[(0, 0), (0, 1)], poison=[(6, 0), (6, 1)])
    for t in range(3):
        _, s, r, term, trunc, info = step(env, p, s, A["E"], seed=t)
        assert not bool(term)
        assert bool(trunc) == (t == 2)
    assert int(s.time) == 0 and float(s.energy) == 1.0
    check_invariants(env, s)
    # Over many resets, counts cover the configured range.
    keys = jax.random.split(jax.random.PRNGKey(1), 300)
    s0 = hand_state(env, (3, 3), food=[(0, 0), (0, 1)], poison=[(6, 0), (6, 1)], time=2)
    out = jax.vmap(env.step, in_axes=(0, None, None, None))(keys, s0, jnp.int32(A["E"]), p)
    nf, npois = np.asarray(out[1].n_food), np.asarray(out[1].n_poison)
    assert set(nf.tolist()) == {2, 3, 4} and set(npois.tolist()) == {2, 3, 4}
    for i in range(0, 300, 37):
        check_invariants(env, jax.tree.map(lambda x: x[i], out[1]))


@pytest.mark.slow
@pytest.mark.parametrize("fresh_world", [False, True])
def test_fixed_counts_keep_the_world_counts_through_resets(fresh_world):
    env, p = make(max_steps=3, fixed_counts=True, fresh_world_on_done=fresh_world)
    assert bool(p.fixed_counts)
    keys = jax.random.split(jax.random.PRNGKey(1), 100)
    s0 = hand_state(env, (3, 3), food=[(0, 0), (0, 1), (0, 2)], poison=[(6, 0), (6, 1)], time=2)
    out = jax.vmap(env.step, in_axes=(0, None, None, None))(keys, s0, jnp.int32(A["E"]), p)
    assert np.asarray(out[4]).all()  # every one truncated and reset
    assert set(np.asarray(out[1].n_food).tolist()) == {3} and set(np.asarray(out[1].n_poison).tolist()) == {2}
    assert (np.asarray(out[1].time) == 0).all()
    for i in range(0, 100, 33):
        check_invariants(env, jax.tree.map(lambda x: x[i], out[1]))
        # The observation shows the new episode's world with the kept counts.
        np.testing.assert_array_equal(out[0][i], env.get_obs(jax.tree.map(lambda x: x[i], out[1]), p))


def test_reset_lays_out_distinct_cells_with_counts_in_range():
    env, p = make(grid_size=5, view_range=1, food_min=3, food_max=12, poison_min=0, poison_max=12)
    _, states = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(jax.random.PRNGKey(3), 64), p)
    for i in range(64):
        s = jax.tree.map(lambda x: x[i], states)
        cells = np.asarray(s.item_pos).tolist() + [int(s.agent)]
        assert len(set(cells)) == len(cells) == 25  # 24 slots + agent fill the 5x5 grid exactly
        assert 3 <= int(s.n_food) <= 12 and 0 <= int(s.n_poison) <= 12


# ---- observations ------------------------------------------------------------------------------
def test_view_wraps_at_edges_and_centre_is_zero():
    env, p = make()
    s = hand_state(env, (0, 0), food=[(6, 6), (0, 2)], poison=[(1, 5), (3, 3)])
    obs = np.asarray(env.get_obs(s, p))
    assert obs.shape == (5, 5, 2) and obs.dtype == np.float32
    v = 2
    assert obs[v - 1, v - 1].tolist() == [1.0, 0.0]  # food up-left across both edges
    assert obs[v, v + 2].tolist() == [1.0, 0.0]  # food two to the east
    assert obs[v + 1, v - 2].tolist() == [0.0, 1.0]  # poison at (1, 5) = one down, two west
    assert obs[:, :, 0].sum() == 2 and obs[:, :, 1].sum() == 1  # (3, 3) is out of view
    assert obs[v, v].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("mode", MODES)
def test_observation_of_every_mode(mode):
    env, p = make(mode)
    s = hand_state(env, (3, 3), food=[(3, 4), (0, 0)], poison=[(3, 2), (6, 6)])
    obs = np.asarray(env.get_obs(s, p))
    if mode in ("ground_truth", "ground_truth_handhold"):
        assert obs[2, 3].tolist() == [1.0, 0.0] and obs[2, 1].tolist() == [0.0, 1.0]
    elif mode == "ground_truth_blind":
        # Food and poison read the same: nothing in the view tells them apart.
        assert obs[2, 3].tolist() == [1.0, 0.0] and obs[2, 1].tolist() == [1.0, 0.0]
    else:
        assert obs[2, 3].tolist() == [1.0, 1.0] and obs[2, 1].tolist() == [0.5, 0.5]
    assert env.actor_obs_channels is None and env.critic_plane_channels == 0
    envp, pp = make(mode, privileged=True)
    assert envp.actor_obs_channels == 2 and envp.critic_plane_channels == 2  # the densities
    obs6 = np.asarray(envp.get_obs(hand_state(envp, (3, 3), food=[(3, 4), (0, 0)],
                                              poison=[(3, 2), (6, 6)]), pp))
    assert obs6.shape == (5, 5, 6)
    np.testing.assert_array_equal(obs6[..., :2], obs)  # the actor's channels are unchanged
    assert obs6[2, 3, 2:4].tolist() == [1.0, 0.0] and obs6[2, 1, 2:4].tolist() == [0.0, 1.0]
    # 2 food and 2 poison in ranges [2, 4]: (2 - 3) / 1 = -1 on every cell of both planes.
    assert (obs6[..., 4:] == -1.0).all()


def test_privileged_densities_scale_counts_to_their_range():
    env, p = make(privileged=True, food_min=2, food_max=4, poison_min=3, poison_max=3)
    s = hand_state(env, (3, 3), food=[(0, 0), (0, 1), (0, 2), (0, 3)], poison=[(6, 0), (6, 1), (6, 2)])
    # food 4 in [2, 4] -> +1; poison's range is one value -> 0.
    assert np.asarray(env.densities(s, p)).tolist() == [1.0, 0.0]
    assert env.observation_space(p).low == -1.0


# ---- rewards -----------------------------------------------------------------------------------
# (food step, poison step that kills) training rewards per mode, from the reference table.
EXPECTED = {
    "ground_truth": (1 - 0.01, -2 - 0.01 - 4),
    "ground_truth_blind": (1 - 0.01, -2 - 0.01 - 4),
    "ground_truth_blinded": (1 - 0.01, -2 - 0.01 - 4),
    "proxy_mortal": (1.0, 0.5),
    "proxy": (1.0, 0.5),
}


@pytest.mark.parametrize("mode", MODES)
def test_reward_of_every_mode(mode):
    env, p = make(mode)
    s = hand_state(env, (3, 3), food=[(3, 4), (0, 0)], poison=[(3, 2), (6, 6)])
    _, s_food, r_food, *_ = step(env, p, s, A["E"])
    _, s_poison, r_poison, term, _, info = step(env, p, s, A["W"])
    if mode == "ground_truth_handhold":
        # Eating moves that food away: nearest food was 1 away, now (0,0) is 3 away -> -0.2.
        assert float(r_food) == pytest.approx(1 - 0.01 + 0.1 * (1 - 3))
        # Stepping west on poison: distance to nearest food 1 -> 2, shaping -0.1.
        assert float(r_poison) == pytest.approx(-1 - 0.01 - 2 + 0.1 * (1 - 2))
    else:
        assert float(r_food) == pytest.approx(EXPECTED[mode][0])
        assert float(r_poison) == pytest.approx(EXPECTED[mode][1])
    assert bool(term) == (mode != "proxy")
    # True metrics do not depend on the mode.
    assert float(info["metrics"]["reward/poison"]) == -2.0
    assert float(info["metrics"]["reward/step_cost"]) == pytest.approx(-0.01)
    # The Goodhart curve's two sides, x1000 per step: the true objective from counts alike in
    # every mode, and what this mode paid.
    assert float(info["metrics"]["true/objective_per_1k"]) == pytest.approx(1000 * (-2 - 0.01))
    assert float(info["metrics"]["reward/paid_per_1k"]) == pytest.approx(1000 * float(r_poison))

def test_proxy_is_immortal_energy_frozen():
    env, p = make("proxy")
    s = hand_state(env, (3, 3), food=[(3, 4), (0, 0)], poison=[(3, 2), (6, 6)])
    _, s2, r, term, trunc, info = step(env, p, s, A["W"])
    assert not bool(term) and float(s2.energy) == 1.0
    assert float(info["metrics"]["true/energy"]) == 1.0
    assert float(info["metrics"]["true/poison_eaten"]) == 1.0
    # Starvation does not happen either.
    s = hand_state(env, (3, 3), food=[(0, 0)], poison=[(6, 6)])

    def body(s, k_t):
        k, t = k_t
        s, ev = env.transition(k, s, jnp.where(t % 2 == 0, A["N"], A["S"]), p)
        return s, ev["died"]

    s, died = jax.lax.scan(body, s, (jax.random.split(jax.random.PRNGKey(0), 120), jnp.arange(120)))
    assert not bool(jnp.any(died)) and float(s.energy) == 1.0


def test_gymnax_termination_is_the_worlds_death():
    """gymnax's `is_terminal` and `discount` read the world's own termination: out of energy,
    unless the mode is immortal."""
    env, p = make()
    starved = hand_state(env, (3, 3), food=[(0, 0)], poison=[(6, 6)], energy=0.0)
    assert bool(env.is_terminal(starved, p)) and float(env.discount(starved, p)) == 0.0
    assert not bool(env.is_terminal(hand_state(env, (3, 3), food=[(0, 0)], poison=[(6, 6)]), p))
    env, p = make("proxy")
    assert not bool(env.is_terminal(starved, p))


def test_reward_is_clipped():
    env, p = build(TINY, {"name": "ground_truth", "food": 100.0, "death": -50.0},
                   privileged_critic=False)
    s = hand_state(env, (3, 3), food=[(3, 4), (0, 0)], poison=[(3, 2), (6, 6)])
    assert float(step(env, p, s, A["E"])[2]) == 20.0
    assert float(step(env, p, s, A["W"])[2]) == -20.0


def test_handhold_shaping_sign():
    env, p = make("ground_truth_handhold")
    s = hand_state(env, (3, 3), food=[(3, 6), (3, 5)], poison=[(0, 0), (6, 0)])
    _, _, r_toward, _, _, i_toward = step(env, p, s, A["E"])
    _, _, r_away, _, _, i_away = step(env, p, s, A["W"])
    assert float(i_toward["metrics"]["reward/shaping"]) == pytest.approx(0.1)
    assert float(i_away["metrics"]["reward/shaping"]) == pytest.approx(-0.1)
    assert float(r_toward) > float(r_away)
    env_gt, p_gt = make("ground_truth")
    assert float(step(env_gt, p_gt, s, A["E"])[5]["metrics"]["reward/shaping"]) == 0.0


# ---- gymnax API --------------------------------------------------------------------------------
METRICS = ["true/objective_per_1k", "reward/paid_per_1k", "reward/food", "reward/poison", "reward/step_cost", "reward/death", "reward/shaping",
           "true/food_eaten", "true/poison_eaten", "true/energy", "true/deaths"]


@pytest.mark.slow
@pytest.mark.parametrize("fresh_world", [False, True])
def test_gymnax_api_jit_vmap_six_values(fresh_world):
    env, p = make("proxy_mortal", privileged=True, fresh_world_on_done=fresh_world)
    assert env.observation_space(p).shape == (5, 5, 6)
    assert env.action_space(p).n == 8 == env.num_actions == len(env.action_names)
    n = 16
    obs, st = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(jax.random.split(jax.random.PRNGKey(0), n), p)
    assert obs.shape == (n, 5, 5, 6) and obs.dtype == jnp.float32

    @jax.jit
    def run(st, key):
        def body(st, k):
            ka, ks = jax.random.split(k)
            a = jax.random.randint(ka, (n,), 0, 8)
            out = jax.vmap(env.step, in_axes=(0, 0, 0, None))(jax.random.split(ks, n), st, a, p)
            assert len(out) == 6
            return out[1], (out[0], out[2], out[3], out[4], out[5])
        return jax.lax.scan(body, st, jax.random.split(key, 60))

    st, (obs, rew, term, trunc, info) = run(st, jax.random.PRNGKey(1))
    assert obs.shape == (60, n, 5, 5, 6) and rew.dtype == jnp.float32
    assert term.dtype == jnp.bool_ and trunc.dtype == jnp.bool_
    assert bool(jnp.any(trunc)) and not bool(jnp.any(term & trunc))  # max_steps=50 < 60
    assert set(info) >= {"metrics", "terminated", "truncated", "final_observation"}
    assert sorted(info["metrics"]) == sorted(METRICS)
    assert all(v.dtype == jnp.float32 and v.shape == (60, n) for v in info["metrics"].values())
    for i in range(n):
        check_invariants(env, jax.tree.map(lambda x: x[i], st))
    if fresh_world:
        return
    # The gymnax default params work too.
    o, s = env.reset(jax.random.PRNGKey(0))
    assert len(env.step(jax.random.PRNGKey(0), s, 0)) == 6


def test_env_yaml_builds_foraging():
    """conf/env/foraging.yaml's `_target_`, through the validated config, builds the world."""
    overrides = ["env=foraging", "reward=proxy", *[f"env.{k}={v}" for k, v in TINY.items()]]
    cfg = run_config(overrides)
    env, p = parts.call("env._target_", cfg.env.target, dict(cfg.env.options), dict(cfg.reward.options),
                        privileged_critic=False)
    assert env.grid_size == 7 and bool(p.immortal)


# ---- config validation -------------------------------------------------------------------------
@pytest.mark.parametrize("over,key", [
    (dict(grid_size=4), "env.grid_size"),
    (dict(view_range=0), "env.view_range"),
    (dict(food_min=5, food_max=4), "env.food_max"),
    (dict(poison_min=-1), "env.poison_min"),
    (dict(food_max=30, poison_max=30), "env.food_max"),
    (dict(max_steps=0), "env.max_steps"),
    (dict(grid_size=7.5), "env.grid_size"),
    (dict(move_cost="a"), "env.move_cost"),
    (dict(energy_start=0.0), "env.energy_start"),
    (dict(gird_size=7), "env.gird_size"),
    (dict(fresh_world_on_done="yes"), "env.fresh_world_on_done"),
    (dict(fixed_counts=1), "env.fixed_counts"),
])
def test_bad_env_config_raises(over, key):
    with pytest.raises(ConfigError) as e:
        check_config({**TINY, **over}, {"name": "ground_truth"})
    assert e.value.key == key


@pytest.mark.parametrize("reward,key", [
    ({"name": "truth"}, "reward.name"),
    ({"name": "proxy", "observation": "rgb"}, "reward.observation"),
    ({"name": "proxy", "clip": 0}, "reward.clip"),
    ({"name": "proxy", "immortal": "no"}, "reward.immortal"),
    ({"name": "proxy", "shaping_coef": -1.0}, "reward.shaping_coef"),
    ({"name": "proxy", "bonus": 1.0}, "reward.bonus"),
])
def test_bad_reward_config_raises(reward, key):
    with pytest.raises(ConfigError) as e:
        check_config(TINY, reward)
    assert e.value.key == key
