"""env=gymnasium: any Gymnasium env through jax.pure_callback around a vector env. Same-step
auto-reset maps onto the lab's episodes, seeds own their slice of one vector env, an env class
by import path works, unsupported spaces and unknown ids are refused before compiling."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import read_rows, train_run
from ppo_lab.errors import ConfigError
from ppo_lab.ppo.rollout import batched_reset, batched_step

pytest.importorskip("gymnasium", reason="needs gymnasium: pip install -e '.[gymnasium]'")

from ppo_lab.envs.gymnasium_env.adapter import build  # noqa: E402

CFG = {"name": "gymnasium", "id": "CartPole-v1", "seed": 5, "make_kwargs": {}, "max_steps": None}


def _env(**cfg):
    return build({**CFG, **cfg}, {"name": "default"})


def _run(env, params, n, actions, vmapped=False):
    step = batched_step(env, params, n)

    def run(state, actions):
        def body(state, action):
            obs, state, reward, terminated, truncated, info = step(jax.random.PRNGKey(0), state, action)
            return state, (obs, reward, terminated, truncated, info["resetting"], info["final_observation"])
        return jax.lax.scan(body, state, actions)[1]

    _, state = batched_reset(env, params, jax.random.PRNGKey(0), n)
    if vmapped:
        state = jax.tree.map(lambda x: jnp.stack([x] * actions.shape[0]), state)
        return jax.device_get(jax.jit(jax.vmap(run))(state, actions))
    return jax.device_get(jax.jit(run)(state, actions))


def test_same_step_auto_reset_and_final_observation():
    env, params = _env()
    assert env.action_space(params).n == 2 and params.max_steps_in_episode == 500
    obs, reward, terminated, truncated, resetting, final = _run(env, params, 3, jnp.ones((30, 3), jnp.int32))
    assert resetting[0].all() and not resetting[1:].any()  # only the run's first step resets
    done = terminated | truncated
    assert done.any()
    # Where an episode ended, the next observation starts a new episode; final_observation is the
    # ended one's last (far off to the right, pushed right every step), elsewhere the observation.
    np.testing.assert_array_equal(final[~done], obs[~done])
    assert (np.abs(final[done][:, 2]) > 0.2).all() and (np.abs(obs[done][:, 2]) < 0.05).all()


def test_vmapped_seeds_own_their_slice():
    env, params = _env()
    alone = _run(env, params, 2, jnp.zeros((20, 2), jnp.int32))[0]
    env2, _ = _env()
    actions = jnp.stack([jnp.zeros((20, 2), jnp.int32), jnp.ones((20, 2), jnp.int32)])
    both = _run(env2, params, 2, actions, vmapped=True)[0]
    assert (0, 4) in env2._vectors
    np.testing.assert_array_equal(both[0], alone)
    assert not np.array_equal(both[1], alone)


def test_env_class_by_import_path_needs_a_time_limit():
    path = "gymnasium.envs.classic_control.cartpole.CartPoleEnv"
    with pytest.raises(ConfigError, match="env.max_steps"):
        _env(id=path)
    env, params = _env(id=path, max_steps=10)
    assert params.max_steps_in_episode == 10
    _, _, terminated, truncated, _, _ = _run(env, params, 1, jnp.asarray(np.tile([[0], [1]], (20, 1)), jnp.int32))
    # Balanced by alternating pushes, cut at 10 steps (after the run's first, resetting, step).
    assert not terminated.any() and np.flatnonzero(truncated[:, 0]).tolist() == [10, 20, 30]


def test_box_actions_reach_the_env_as_floats():
    env, params = _env(id="Pendulum-v1")
    space = env.action_space(params)
    assert space.shape == (1,) and float(space.low[0]) == -2.0 and float(space.high[0]) == 2.0
    obs, reward, *_ = _run(env, params, 2, jnp.stack([jnp.full((5, 2, 1), 2.0), jnp.full((5, 2, 1), -2.0)]).reshape(10, 2, 1))
    assert obs.shape == (10, 2, 3) and (reward[1:] < 0).all()  # Pendulum's cost, every real step


@pytest.mark.parametrize("env_id, match", [("CliffWalking-v1", "Box observation"), ("Blackjack-v1", "Box observation"),
                                           ("CartPole-v7", "CartPole-v1"), ("no_such_pkg.Env", "no_such_pkg")])
def test_unsupported_envs_are_refused(env_id, match):
    with pytest.raises(ConfigError, match=match):
        _env(id=env_id)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_trains_two_seeds_end_to_end(tmp_path):
    summary = train_run(["env=gymnasium", "env.id=CartPole-v1", "num_seeds=2", "ppo.num_envs=4", "ppo.num_steps=16",
                         "ppo.total_timesteps=128", "ppo.num_minibatches=2", "ppo.update_epochs=1",
                         "train.chunk_updates=2", "eval.episodes=2", "eval.max_steps=32", "hardware.host_devices=1"],
                        tmp_path / "run")
    assert summary.status == "completed" and summary.updates == 2
    assert len(read_rows(tmp_path / "run")) == 4 and len(summary.eval["episode_return"]) == 2
