"""`env=rare_actions`: API, masks, the rules that make programs rare and delayed, metrics,
determinism and the config check."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml

from conftest import ROOT
from ppo_lab.config import ENV_WIRING_KEYS
from ppo_lab.envs.rare_actions.config import PARAM_DEFAULTS, check_config
from ppo_lab.envs.rare_actions.game import CACHE, OVERCLOCK, SHIELD, SIPHON, EnvParams, build
from ppo_lab.errors import ConfigError

# The env's own keys as its YAML gives them (less the wiring: builder, check).
ENV_CFG = {k: v for k, v in yaml.safe_load((ROOT / "conf/env/rare_actions.yaml").read_text()).items()
           if k not in ENV_WIRING_KEYS}


@pytest.fixture(scope="module")
def game():
    env, params = build(ENV_CFG, {"name": "default"})
    return env, params


def _state(env, params, **fields):
    """A reset state with some fields set by hand (positions as (row, col))."""
    _, state = env.reset(jax.random.PRNGKey(0), params)
    arrays = {k: jnp.asarray(v, jnp.int32) if k != "prev_mask" else jnp.asarray(v, bool) for k, v in fields.items()}
    return state.replace(**arrays)


def _step(env, params, state, action, seed=0):
    return env.step(jax.random.PRNGKey(seed), state, jnp.int32(action), params)


def test_config_file_gives_the_default_params(game):
    env, params = game
    assert params == env.default_params
    # EnvParams' own field defaults agree with the config defaults (one set of numbers).
    fields = {f.name: f.default for f in dataclasses.fields(EnvParams)}
    assert {k: fields[k] for k in PARAM_DEFAULTS if k != "max_steps"} == {k: v for k, v in PARAM_DEFAULTS.items() if k != "max_steps"}


def test_reset_and_step_shapes_and_the_mask_at_reset(game):
    env, params = game
    obs, state = env.reset(jax.random.PRNGKey(1), params)
    assert obs.shape == env.observation_space(params).shape == (3 * 25 + 8,)
    assert obs.dtype == jnp.float32 and float(obs.min()) >= 0 and float(obs.max()) <= 1
    # No siphon, no credit: only the four moves are valid.
    np.testing.assert_array_equal(env.action_mask(state, params), [True] * 4 + [False] * 4)
    out = _step(env, params, state, 0)
    assert len(out) == 6
    assert out[0].shape == obs.shape and out[2].dtype == jnp.float32
    assert set(out[5]) >= {"metrics", "terminated", "truncated", "final_observation"}


def test_siphon_collects_adjacent_data_and_earns_credits(game):
    env, params = game
    state = _state(env, params, agent=[2, 2], data=[[2, 3], [1, 2], [0, 0]], siphon_cell=[4, 4], siphons=1, threat=10)
    assert bool(env.action_mask(state, params)[SIPHON])
    _, new, reward, *_, info = _step(env, params, state, SIPHON)
    assert int(new.credits) == 2 and int(new.siphons) == 0
    assert float(reward) == pytest.approx(2.0) == float(info["metrics"]["reward/data"])
    assert float(info["metrics"]["actions/resource_frac"]) == 1.0
    # Without an adjacent item (or without a siphon), siphon is invalid.
    far = state.replace(data=jnp.array([[0, 0], [0, 1], [4, 0]], jnp.int32))
    assert not bool(env.action_mask(far, params)[SIPHON])
    assert not bool(env.action_mask(state.replace(siphons=jnp.int32(0)), params)[SIPHON])


def test_a_shield_raised_on_the_first_valid_step_is_wasted_and_one_raised_later_blocks(game):
    env, params = game
    base = _state(env, params, agent=[0, 0], data=[[4, 4], [4, 3], [3, 4]], siphon_cell=[2, 2], credits=1, threat=5)
    assert not bool(env.action_mask(base, params)[SHIELD])  # hit 5 steps away: not yet

    def run(shield_at_threat):
        state, blocked, trace = base, 0.0, 0.0
        for t in range(5):
            action = SHIELD if int(state.threat) == shield_at_threat else 1 - (t % 2) * 2 + 1  # E, W, ...
            _, state, _, _, _, info = _step(env, params, state, action, seed=t)
            blocked += float(info["metrics"]["true/traces_blocked"])
            trace += float(info["metrics"]["reward/trace"])
        return blocked, trace, int(state.integrity)

    assert run(4) == (0.0, -1.0, 2)  # reflex: the shield is down when the trace hits
    assert run(2) == (1.0, 0.0, 3)  # judgement: blocked


def test_cache_pays_later_and_overclock_doubles_data(game):
    env, params = game
    state = _state(env, params, agent=[0, 0], data=[[4, 4], [4, 3], [1, 1]], siphon_cell=[2, 2], credits=3, threat=14)
    mask = env.action_mask(state, params)
    assert bool(mask[CACHE]) and bool(mask[OVERCLOCK])  # an item within 2 steps
    _, state, reward, *_, info = _step(env, params, state, CACHE)
    assert float(reward) == 0.0 and int(state.credits) == 2 and int(state.cache) == params.cache_delay
    paid = []
    for t in range(params.cache_delay):
        _, state, _, _, _, info = _step(env, params, state, [1, 3][t % 2], seed=t + 1)
        paid.append(float(info["metrics"]["reward/cache"]))
    assert paid == [0.0] * (params.cache_delay - 1) + [params.cache_payout]

    state = _state(env, params, agent=[0, 0], data=[[4, 4], [4, 3], [1, 1]], siphon_cell=[2, 2], credits=2, threat=14)
    _, state, *_ = _step(env, params, state, OVERCLOCK)
    _, state, *_ = _step(env, params, state, 2)  # S to (1, 0)
    _, state, reward, *_ = _step(env, params, state, 1)  # E onto the item at (1, 1)
    assert float(reward) == pytest.approx(params.overclock_multiplier * params.data_reward)


def test_rare_first_step_statistic(game):
    env, params = game
    state = _state(env, params, agent=[0, 0], data=[[4, 4], [4, 3], [3, 4]], siphon_cell=[2, 2], credits=1, threat=14)
    _, after_move, _, _, _, info = _step(env, params, state, 1)
    assert np.isnan(float(info["metrics"]["actions/rare_first_step_frac"]))  # no program taken
    # Cache became valid at reset (prev_mask all False): taking it now is a reflex...
    _, _, _, _, _, info = _step(env, params, state, CACHE)
    assert float(info["metrics"]["actions/rare_first_step_frac"]) == 1.0
    # ...taking it one step later, after it was already valid, is not.
    _, _, _, _, _, info = _step(env, params, after_move, CACHE)
    assert float(info["metrics"]["actions/rare_first_step_frac"]) == 0.0
    assert float(info["metrics"]["actions/program_frac"]) == 1.0


def test_an_invalid_action_is_a_no_op(game):
    env, params = game
    state = _state(env, params, agent=[2, 2], data=[[4, 4], [4, 3], [3, 4]], siphon_cell=[0, 0], threat=10)
    _, new, reward, *_ = _step(env, params, state, SHIELD)
    assert float(reward) == 0.0
    np.testing.assert_array_equal(new.agent, state.agent)
    assert int(new.credits) == 0 and int(new.shield) == 0


def test_episodes_terminate_on_integrity_and_truncate_at_max_steps(game):
    env, params = game
    dying = _state(env, params, agent=[0, 0], data=[[4, 4], [4, 3], [3, 4]], siphon_cell=[2, 2], integrity=1, threat=1)
    obs, state, _, terminated, truncated, info = _step(env, params, dying, 1)
    assert bool(terminated) and not bool(truncated)
    assert int(state.time) == 0 and int(state.integrity) == params.integrity  # auto-reset
    np.testing.assert_array_equal(info["final_observation"][:25].reshape(5, 5)[0, 1], 1.0)
    last = _state(env, params, agent=[0, 0], data=[[4, 4], [4, 3], [3, 4]], siphon_cell=[2, 2], threat=10, time=63)
    _, state, _, terminated, truncated, _ = _step(env, params, last, 1)
    assert bool(truncated) and not bool(terminated) and int(state.time) == 0


def test_rollouts_are_deterministic_in_the_key(game):
    env, params = game

    def rollout(key):
        obs, state = env.reset(key, params)

        def body(state, k):
            k_act, k_step = jax.random.split(k)
            mask = env.action_mask(state, params)
            action = jax.random.categorical(k_act, jnp.where(mask, 0.0, -1e9))
            obs, state, reward, *_ = env.step(k_step, state, action, params)
            return state, (obs, reward, mask)

        return jax.lax.scan(body, state, jax.random.split(key, 200))[1]

    a, b, c = (jax.jit(rollout)(jax.random.PRNGKey(s)) for s in (7, 7, 8))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[0], c[0])


@pytest.mark.parametrize(
    "cfg, key",
    [({"grid_size": 1}, "env.grid_size"), ({"threat_max": 2}, "env.threat_max"), ({"data_reward": "x"}, "env.data_reward"),
     ({"colour": 3}, "env.colour"), ({"shield_steps": 0}, "env.shield_steps")],
)
def test_bad_config_names_the_key(cfg, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        check_config({"name": "rare_actions", **cfg}, {"name": "default"})
    with pytest.raises(ConfigError, match="reward"):
        check_config({"name": "rare_actions"}, {"name": "proxy"})


@pytest.mark.slow
def test_trains_through_launch_with_no_invalid_action(tmp_path):
    from conftest import launch, read_rows, read_summary

    run_dir = tmp_path / "run"
    # The shapes of the recorded rare-action run that test_reproduce re-runs: one compile in the suite.
    launch(["env=rare_actions", "ppo.num_envs=4", "ppo.num_steps=16", "ppo.num_minibatches=2", "ppo.update_epochs=1",
            "ppo.total_timesteps=512", "train.chunk_updates=2", "eval.episodes=4", "hardware.host_devices=1"], run_dir)
    rows = read_rows(run_dir)
    assert len(rows) == 8
    for column in ("actions/move_frac", "actions/resource_frac", "actions/program_frac", "actions/rare_first_step_frac",
                   "reward/data", "reward/trace", "reward/cache", "actions/shield"):
        assert column in rows[0]
    assert all(float(r["actions/invalid_frac"]) == 0.0 for r in rows)
    assert read_summary(run_dir)["status"] == "completed"
