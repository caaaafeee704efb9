"""The rollout's truncation bootstrap, computed in the next step's forward pass, equals the
straightforward one: reward + gamma x V(final observation) on every step cut short by the time
limit, nothing added elsewhere. With and without a shared torso, and with PopArt statistics."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_lab.config import NetworkConfig, PPOConfig
from ppo_lab.networks import ActorCritic
from ppo_lab.ppo import value_norm as vn
from ppo_lab.ppo.distributions import sample_action
from ppo_lab.ppo.rollout import batched_step, rollout
from ppo_lab.ppo.hypers import Hypers
from ppo_lab.ppo.train import make_trainer
from ppo_lab.envs.gymnax_envs import GymnaxEnv

from conftest import network_config, ppo_config

GAMMA = 0.9


def _ppo(**kw):
    base = dict(lr=1e-3, lr_final=1e-3, anneal_lr=False, gamma=GAMMA, gae_lambda=0.95, clip_eps=0.2, clip_eps_final=0.2,
                clip_vloss=True, vf_coef=0.5, ent_coef_initial=0.01, ent_coef_final=0.01, entropy_floor=None,
                entropy_floor_coef=0.1, max_grad_norm=0.5, update_epochs=1, num_minibatches=1, normalize_advantages=True,
                bootstrap_truncation=True, num_envs=6, num_steps=24, total_timesteps=6 * 24 * 2, auto_scale=False)
    base.update(kw)
    return ppo_config(**base)


def _reference_rewards(network, params, env, env_params, state, num_steps, value_norm):
    """The two-call version: the value of each step's final observation in its own pass."""
    def policy(obs, key, mask):
        logits, _ = network.apply(params, obs)
        return sample_action(key, logits, mask), None

    def record(_, step):
        final_value = vn.read(value_norm, network.apply(params, step.info["final_observation"], method="value"))
        cut_short = jnp.logical_and(step.truncated, jnp.logical_not(step.terminated))
        return (), (step.reward + GAMMA * final_value * cut_short, cut_short)

    n = state.obs.shape[0]
    out = rollout(batched_step(env, env_params, n), policy, state.env_state, state.obs, state.key, num_steps, record=record)
    return out.records


@pytest.mark.parametrize("shared_torso,popart", [(True, False), (False, True)])
def test_bootstrap_in_the_next_forward_pass_matches_the_two_call_version(shared_torso, popart):
    import gymnax

    env, env_params = gymnax.make("CartPole-v1")

    env = GymnaxEnv(env)  # under the lab's env contract (envs/base.py)
    env_params = env_params.replace(max_steps_in_episode=5)  # most episodes end by the time limit
    ppo = _ppo(value_norm="popart" if popart else None, popart_beta_min=0.001)
    network = ActorCritic(2, network_config(kind="mlp", activation="tanh", hidden_sizes=(16, 16), shared_torso=shared_torso))
    trainer = make_trainer(ppo, env, env_params, network, num_envs=ppo.num_envs, chunk_updates=1)
    hypers = Hypers.of(ppo)
    state = trainer.init(jax.random.PRNGKey(0), jax.random.PRNGKey(1), hypers, trainer.num_updates)
    if popart:  # statistics away from (0, 1), so a value read in the wrong units would show
        state = state.replace(value_norm=state.value_norm.replace(mean=jnp.float32(3.0), std=jnp.float32(2.0)))

    traj = jax.jit(trainer.collect)(state, hypers).records
    expected, cut_short = jax.jit(lambda params, state: _reference_rewards(
        network, params, env, env_params, state, ppo.num_steps, state.value_norm))(state.params, state)

    assert int(cut_short.sum()) >= ppo.num_envs * 3  # the bootstrap is exercised, at the last step too
    assert bool(cut_short[-1].any()) or bool(cut_short[-5:].any())
    np.testing.assert_allclose(traj.reward, expected, rtol=1e-5, atol=1e-5)
    unbootstrapped = np.asarray(traj.reward)[~np.asarray(cut_short)]
    assert set(np.unique(unbootstrapped)) <= {0.0, 1.0}  # CartPole's own rewards where nothing is added


def test_bootstrap_off_leaves_rewards_as_the_env_pays():
    import gymnax

    env, env_params = gymnax.make("CartPole-v1")

    env = GymnaxEnv(env)  # under the lab's env contract (envs/base.py)
    env_params = env_params.replace(max_steps_in_episode=5)
    ppo = _ppo(bootstrap_truncation=False)
    network = ActorCritic(2, network_config(kind="mlp", activation="tanh", hidden_sizes=(16,)))
    trainer = make_trainer(ppo, env, env_params, network, num_envs=ppo.num_envs, chunk_updates=1)
    hypers = Hypers.of(ppo)
    state = trainer.init(jax.random.PRNGKey(0), jax.random.PRNGKey(1), hypers, trainer.num_updates)
    traj = jax.jit(trainer.collect)(state, hypers).records
    assert set(np.unique(np.asarray(traj.reward))) <= {0.0, 1.0}
    assert traj.obs.shape == (ppo.num_steps, ppo.num_envs, 4)
