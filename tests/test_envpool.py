"""env=envpool: EnvPool's C++ envs stepped through its XLA interface inside the jitted loop.
Reset steps map onto the lab's episodes without double counting, vmapped seeds own their slice
of one pool, runs train, evaluate and resume end to end, bad ids are refused before compiling.
Needs the extra: pip install -e '.[envpool]' (CI installs it)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import launch, network_config, ppo_config, read_rows, read_summary, train_run
from ppo_lab.errors import ConfigError
from ppo_lab.networks import ActorCritic
from ppo_lab.ppo.rollout import batched_reset, batched_step
from ppo_lab.ppo.hypers import Hypers
from ppo_lab.ppo.train import make_trainer

pytest.importorskip("envpool", reason="needs the envpool extra: pip install -e '.[envpool]'")

from ppo_lab.envs.envpool_env.adapter import build  # noqa: E402

CFG = {"name": "envpool", "id": "CartPole-v1", "num_threads": 1, "seed": 3, "make_kwargs": {}, "image_scale": True}

TINY = ["env=envpool", "env.id=CartPole-v1", "env.num_threads=1", "ppo.num_envs=4", "ppo.num_steps=16",
        "ppo.num_minibatches=2", "ppo.update_epochs=2", "train.chunk_updates=2", "eval.episodes=4",
        "eval.max_steps=64", "hardware.host_devices=1"]


def _env(**cfg):
    return build({**CFG, **cfg}, {"name": "default"})


def _steps(env, params, n, actions):
    """Step `n` envs with the given per-step actions ([T, n]) in one jitted scan."""
    step = batched_step(env, params, n)

    def run(state):
        def body(state, action):
            obs, state, reward, terminated, truncated, info = step(jax.random.PRNGKey(0), state, action)
            return state, (obs, reward, terminated, truncated, info["resetting"], info["final_observation"])
        return jax.lax.scan(body, state, actions)[1]

    _, state = batched_reset(env, params, jax.random.PRNGKey(0), n)
    return jax.device_get(jax.jit(run)(state))


def test_reset_steps_follow_episode_ends():
    env, params = _env()
    assert env.action_space(params).n == 2 and env.observation_space(params).shape == (4,)
    obs, reward, terminated, truncated, resetting, final = _steps(env, params, 3, jnp.ones((40, 3), jnp.int32))
    assert resetting[0].all() and (reward[0] == 0).all()  # a new pool's first step resets every env
    done = terminated | truncated
    assert done.any() and not (done & resetting).any()
    # EnvPool resets on the step after an episode ends: exactly those steps are flagged.
    np.testing.assert_array_equal(resetting[1:], done[:-1])
    assert (reward[resetting] == 0).all()
    np.testing.assert_array_equal(final, obs)  # the step's own observation, the last one where it ended


def test_vmapped_seeds_own_their_slice_of_one_pool():
    """Under vmap over 2 replicas, replica 0's envs are the first n of one pool of 2n, seeded as
    a pool of n with the same seed: acting alike, it sees exactly what the unbatched pool sees."""
    n, steps = 3, 30
    env, params = _env()
    alone = _steps(env, params, n, jnp.zeros((steps, n), jnp.int32))[0]
    env2, _ = _env()
    step = batched_step(env2, params, n)

    def run(state, actions):
        def body(state, action):
            obs, state, *_ = step(jax.random.PRNGKey(0), state, action)
            return state, obs
        return jax.lax.scan(body, state, actions)[1]

    _, state = batched_reset(env2, params, jax.random.PRNGKey(0), n)
    states = jax.tree.map(lambda x: jnp.stack([x, x]), state)
    actions = jnp.stack([jnp.zeros((steps, n), jnp.int32), jnp.ones((steps, n), jnp.int32)])
    both = jax.device_get(jax.jit(jax.vmap(run))(states, actions))
    assert (0, 2 * n) in env2._pools  # one pool of seeds x envs
    np.testing.assert_array_equal(both[0], alone)
    assert not np.array_equal(both[1], alone)


def test_trainer_counts_no_reset_step_in_episodes():
    env, params = _env()
    ppo = ppo_config(num_envs=4, num_steps=64, num_minibatches=2, update_epochs=1, total_timesteps=256)
    network = ActorCritic(2, network_config("mlp"))
    trainer = make_trainer(ppo, env, params, network, num_envs=4, chunk_updates=1)
    state = jax.jit(trainer.init)(*jax.random.split(jax.random.PRNGKey(0)), Hypers.of(ppo), trainer.num_updates)
    traj = jax.device_get(jax.jit(trainer.collect)(state, Hypers.of(ppo)).records)
    weight = traj.weight
    assert (weight[0] == 0).all()  # the pool's first step: resetting
    np.testing.assert_array_equal(weight[1:] == 0, traj.done[:-1])
    # An episode's length counts its own steps only: from its reset step's successor to its end.
    for env_index in range(4):
        ends = np.flatnonzero(traj.done[:, env_index])
        starts = np.concatenate([[0], ends[:-1] + 1])
        np.testing.assert_array_equal(traj.finished_length[ends, env_index], ends - starts)
        np.testing.assert_allclose(traj.finished_return[ends, env_index], ends - starts)  # CartPole: 1 per step


def test_box_actions_step_the_pool():
    env, params = _env(id="Pendulum-v1")
    assert env.action_space(params).shape == (1,) and env.action_names is None
    obs, reward, _, _, resetting, _ = _steps(env, params, 2, jnp.full((5, 2, 1), 2.0))
    assert obs.shape == (5, 2, 3) and resetting[0].all() and (reward[1:] < 0).all()


def test_bad_ids_are_refused_with_near_matches():
    with pytest.raises(ConfigError, match="CartPole-v1"):
        _env(id="CartPole-v2")
    # EnvPool's MuJoCo passes float64 through XLA: refused, naming the way that works.
    with pytest.raises(ConfigError, match="experiment=halfcheetah"):
        _env(id="HalfCheetah-v5")
    with pytest.raises(ConfigError, match="env.num_threads"):
        _env(num_threads=0)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_trains_evaluates_and_resumes_with_new_envs(tmp_path):
    run_dir = tmp_path / "run"
    summary = train_run(TINY + ["num_seeds=2", "ppo.total_timesteps=128"], run_dir)
    assert summary.status == "completed" and summary.updates == 2
    assert len(summary.eval["episode_return"]) == 2 and all(r > 0 for r in summary.eval["episode_return"])
    # Resumed with a longer budget: the envs are new (episodes start afresh), rows continue exactly.
    summary = train_run(TINY + ["num_seeds=2", "ppo.total_timesteps=256", "allow_config_change=true"], run_dir)
    assert summary.resumed_from == 2 and summary.updates == 4
    rows = read_rows(run_dir)
    assert sorted((int(r["update"]), int(r["seed"])) for r in rows) == [(u, s) for u in range(1, 5) for s in (0, 1)]
    assert read_summary(run_dir)["status"] == "completed"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_coinrun_trains_end_to_end_with_a_small_impala(tmp_path):
    """experiment=coinrun (Procgen through EnvPool, IMPALA CNN), shrunk to seconds: rows, a
    checkpoint and an evaluation."""
    pytest.importorskip("envpool.procgen.procgen_envpool", reason="EnvPool's Procgen needs the system Qt5 GUI library")
    run_dir = tmp_path / "coin"
    summary = train_run(["experiment=coinrun", "ppo.num_envs=4", "ppo.num_steps=8", "ppo.total_timesteps=64",
                         "ppo.num_minibatches=2", "network.stack_channels=[4]", "network.dense_size=16",
                         "env.num_threads=1", "eval.episodes=2", "eval.max_steps=16", "hardware.host_devices=1"], run_dir)
    assert summary.status == "completed" and summary.updates == 2
    assert len(read_rows(run_dir)) == 2 and list((run_dir / "checkpoints").glob("ckpt_*.json"))
    assert set(summary.eval) >= {"episode_return", "episode_length"}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_seeds_on_two_devices_step_a_pool_each(tmp_path):
    """hardware.host_devices=2, 2 seeds: one seed per device, each device stepping its own pool
    (picked in the one compiled program by the device's index); a seed's envs are seeded as on
    one device, so its first update's episodes match a one-device run's."""
    common = TINY[:-1] + ["num_seeds=2", "ppo.total_timesteps=64", "train.chunk_updates=1"]
    launch(common + ["hardware.host_devices=2"], tmp_path / "two")
    launch(common + ["hardware.host_devices=1"], tmp_path / "one")
    summary = read_summary(tmp_path / "two")
    assert summary["status"] == "completed" and summary["layout"]["num_devices"] == 2, summary.get("layout")
    first = {d: {r["seed"]: r for r in read_rows(tmp_path / d) if r["update"] == "1"} for d in ("one", "two")}
    for seed in ("0", "1"):  # the reset step and the policy's first actions: same episodes ended
        assert first["two"][seed]["train/num_episodes"] == first["one"][seed]["train/num_episodes"]
