"""The Jumanji adapter: shapes, masks from the env's own state, multi-discrete actions,
truncation and auto-reset, config errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_lab.envs.jumanji_env.adapter import build
from ppo_lab.envs.jumanji_env.config import check_config
from ppo_lab.errors import ConfigError


def _make(env_id, **cfg):
    return build({"name": "jumanji", "id": env_id, **cfg}, {"name": "default"})


@pytest.mark.parametrize(
    "env_id, cfg, obs_shape, num_actions",
    [("Game2048-v1", {}, (16,), 4), ("Knapsack-v1", {}, (150,), 50),
     ("Minesweeper-v0", {}, (102,), 100), ("Minesweeper-v0", {"observation": "image"}, (10, 10, 3), 100)],
)
def test_reset_step_and_mask_shapes(env_id, cfg, obs_shape, num_actions):
    env, params = _make(env_id, **cfg)
    assert env.action_space(params).n == num_actions
    obs, state = env.reset(jax.random.PRNGKey(0), params)
    assert obs.shape == obs_shape == env.observation_space(params).shape and obs.dtype == jnp.float32
    mask = env.action_mask(state, params)
    assert mask.shape == (num_actions,) and mask.dtype == bool
    np.testing.assert_array_equal(mask, np.asarray(env.inner_observation(state).action_mask).reshape(-1))
    action = jnp.argmax(mask)
    obs2, state2, reward, terminated, truncated, info = jax.jit(env.step)(jax.random.PRNGKey(1), state, action, params)
    assert obs2.shape == obs_shape and reward.dtype == jnp.float32
    assert terminated.shape == truncated.shape == () and info["final_observation"].shape == obs_shape


def test_knapsack_mask_follows_the_env_state():
    env, params = _make("Knapsack-v1")
    _, state = env.reset(jax.random.PRNGKey(0), params)
    _, state, reward, *_ = env.step(jax.random.PRNGKey(1), state, jnp.int32(7), params)
    assert float(reward) > 0
    assert not bool(env.action_mask(state, params)[7])  # a packed item cannot be packed again


def test_multi_discrete_actions_are_row_major():
    env, params = _make("Minesweeper-v0")
    _, state = env.reset(jax.random.PRNGKey(0), params)
    mines = set(np.asarray(env.inner_state(state).flat_mine_locations).tolist())
    flat = next(i for i in range(37, 100) if i not in mines and i % 10 != i // 10)  # row != col
    row, col = divmod(flat, 10)
    _, state, _, terminated, *_ = env.step(jax.random.PRNGKey(1), state, jnp.int32(flat), params)
    assert not bool(terminated)
    board = np.asarray(env.inner_observation(state).board)
    assert board[row, col] >= 0 and board[col, row] == -1  # that cell revealed, not its transpose
    assert not bool(env.action_mask(state, params)[flat])


def test_truncation_at_max_steps_then_auto_reset():
    env, params = _make("Game2048-v1", max_steps=3, obs_transform="symlog", reward_scale=0.5)
    obs, state = env.reset(jax.random.PRNGKey(0), params)
    assert float(obs.max()) == pytest.approx(np.log1p(2.0), rel=1e-5) or float(obs.max()) == pytest.approx(np.log1p(4.0), rel=1e-5)
    step = jax.jit(env.step)
    flags = []
    for t in range(3):
        action = jnp.argmax(env.action_mask(state, params))
        obs, state, reward, terminated, truncated, info = step(jax.random.PRNGKey(t + 1), state, action, params)
        flags.append((bool(terminated), bool(truncated)))
        assert "env/highest_tile" in info["metrics"]
    assert flags == [(False, False), (False, False), (False, True)]
    assert int(state.time) == 0  # a fresh episode


@pytest.mark.parametrize(
    "cfg, key",
    [({"id": None}, "env.id"), ({"id": "X", "max_steps": 0}, "env.max_steps"), ({"id": "X", "observation": "grid"}, "env.observation"),
     ({"id": "X", "reward_scale": -1}, "env.reward_scale"), ({"id": "X", "colour": 1}, "env.colour")],
)
def test_bad_config_names_the_key(cfg, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        check_config({"name": "jumanji", **cfg}, {"name": "default"})


def test_unknown_id_and_image_without_a_grid_are_refused():
    with pytest.raises(ConfigError, match="Game2048-v1"):
        _make("Game2049-v1")
    with pytest.raises(ConfigError, match="env.observation"):
        _make("Knapsack-v1", observation="image")


def test_state_survives_a_checkpoint_round_trip():
    import flax.serialization as ser

    env, params = _make("Knapsack-v1")
    _, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(jax.random.PRNGKey(0), 2), params)
    blob = ser.msgpack_serialize(ser.to_state_dict(jax.device_get(state)))
    restored = ser.from_state_dict(state, ser.msgpack_restore(blob))
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(restored)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(jax.vmap(env.action_mask, in_axes=(0, None))(restored, params).shape, (2, 50))


@pytest.mark.slow
def test_game2048_trains_through_launch(tmp_path):
    from conftest import launch, read_rows, read_summary

    run_dir = tmp_path / "run"
    launch(["env=jumanji", "env.id=Game2048-v1", "env.obs_transform=symlog", "ppo.num_envs=8", "ppo.num_steps=32",
            "ppo.total_timesteps=1024", "train.chunk_updates=2", "eval.episodes=2", "eval.max_steps=64",
            "hardware.host_devices=1"], run_dir)
    rows = read_rows(run_dir)
    assert len(rows) == 4 and all(float(r["actions/invalid_frac"]) == 0.0 for r in rows)
    assert "env/highest_tile" in rows[0]
    summary = read_summary(run_dir)
    assert summary["status"] == "completed" and summary["eval"]["episode_length"][0] > 0
