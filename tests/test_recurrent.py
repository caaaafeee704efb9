"""Recurrent policies (network.recurrent=gru|lstm): the config key, the cell's reset at
episode ends, the rollout's memory, and sequence minibatches that re-run the network from the
state each env started the rollout in (reproducing the rollout's log-probs and values)."""

from __future__ import annotations

import dataclasses

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_lab.errors import ConfigError
from ppo_lab.networks import ActorCritic
from ppo_lab.ppo import grad_clip
from ppo_lab.ppo.distributions import categorical_log_prob
from ppo_lab.ppo.rollout import initial_memory
from ppo_lab.ppo.hypers import Hypers
from ppo_lab.ppo.train import make_trainer
from ppo_lab.run.build import build
from ppo_lab.envs.gymnax_envs import GymnaxEnv

from conftest import TINY, network_config, ppo_config, run_config


# --- config ------------------------------------------------------------------------------------

def test_recurrent_is_off_by_default_and_takes_gru_or_lstm_on_any_torso():
    assert run_config(TINY).network.recurrent is None
    for kind in ("mlp", "cnn"):
        for cell in ("gru", "lstm"):
            net = run_config([*TINY, f"network={kind}", f"network.recurrent={cell}"]).network
            assert net.recurrent == cell and net.is_recurrent and net.recurrent_size == 128
            assert "recurrent" not in net.torso_kwargs() and "recurrent_size" not in net.torso_kwargs()


@pytest.mark.parametrize("override,key", [("network.recurrent=transformer", "network.recurrent"),
                                          ("network.recurrent_size=0", "network.recurrent_size")])
def test_a_bad_recurrent_value_is_named_with_what_is_valid(override, key):
    with pytest.raises(ConfigError) as err:
        run_config([*TINY, "network.recurrent=gru", override])
    assert err.value.key == key
    if key == "network.recurrent":
        assert "gru" in str(err.value) and "lstm" in str(err.value) and "transformer" in str(err.value)


def test_sequence_minibatches_must_split_the_envs_before_anything_compiles():
    # 4 envs x 16 steps split into 8 minibatches of steps is fine; into 8 of whole envs it is not.
    cfg = run_config([*TINY, "ppo.num_minibatches=8", "network.recurrent=gru"])
    with pytest.raises(ConfigError) as err:
        build(cfg, 1)
    assert err.value.key == "ppo.num_minibatches" and "whole env sequences" in str(err.value)
    build(run_config([*TINY, "ppo.num_minibatches=8"]), 1)  # feed-forward: fine


# --- the network ---------------------------------------------------------------------------------

def _jitted(net):
    """`net.apply`, compiled (op-by-op dispatch of a scanned cell is slow on 2 cores)."""
    return jax.jit(net.apply, static_argnames="method")


def _network(cell="gru", shared=True, kind="mlp", channels=None, action_dim=3):
    cfg = network_config(kind=kind, activation="tanh", shared_torso=shared, hidden_sizes=(8,), conv_channels=(4,), dense_size=8)
    cfg = dataclasses.replace(cfg, recurrent=cell, recurrent_size=5)
    return ActorCritic(action_dim, cfg, actor_obs_channels=channels)


@pytest.mark.slow
@pytest.mark.parametrize("cell,shared", [("gru", False), ("lstm", True)])
def test_the_state_is_zeroed_where_an_episode_ended_and_carried_elsewhere(cell, shared):
    net = _network(cell, shared)
    T, B = 6, 3
    obs = jax.random.normal(jax.random.PRNGKey(0), (T, B, 4))
    apply = _jitted(net)
    params = net.init_params(jax.random.PRNGKey(1), obs[0])
    carry = jax.tree.map(lambda c: c + 0.7, net.initial_carry(B))  # a state mid-episode
    reset = jnp.zeros((T, B), bool).at[3, 0].set(True)  # env 0's episode ended at step 2
    _, logits, values = apply(params, obs, carry, reset)

    # Env 0 from step 3 on is exactly a fresh episode started on obs[3:].
    _, fresh_logits, fresh_values = apply(params, obs[3:, :1], net.initial_carry(1), jnp.zeros((T - 3, 1), bool))
    np.testing.assert_allclose(logits[3:, 0], fresh_logits[:, 0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(values[3:, 0], fresh_values[:, 0], rtol=1e-5, atol=1e-6)
    # Before the reset, and in the other envs, the state carried in matters: memory is real.
    _, zero_logits, _ = apply(params, obs, net.initial_carry(B), reset)
    assert np.abs(np.asarray(logits[:3, 0] - zero_logits[:3, 0])).max() > 1e-4
    assert np.abs(np.asarray(logits[:, 1:] - zero_logits[:, 1:])).max() > 1e-4

    # One step at a time (the rollout's way) equals the whole sequence (the update's way).
    state, step_logits = carry, []
    for t in range(T):
        state, lg, _ = apply(params, obs[t], state, reset[t], method="step")
        step_logits.append(lg)
    np.testing.assert_allclose(np.stack(step_logits), logits, rtol=1e-5, atol=1e-6)


def test_the_extra_values_continue_the_episode_that_the_reset_ends():
    """The truncation bootstrap's value of a final observation uses the state NOT reset."""
    for shared in (True, False):
        net = _network("gru", shared)
        obs, final_obs = jax.random.normal(jax.random.PRNGKey(0), (2, 3, 4))
        apply = _jitted(net)
        params = net.init_params(jax.random.PRNGKey(1), obs)
        carry = jax.tree.map(lambda c: c + 0.5, net.initial_carry(3))
        reset = jnp.array([True, False, True])
        new_carry, logits, values, extra = apply(params, obs, carry, reset, final_obs, method="step_with_extra_values")
        ref_carry, ref_logits, ref_values = apply(params, obs, carry, reset, method="step")
        no_reset = jnp.zeros(3, bool)
        np.testing.assert_allclose(extra, apply(params, final_obs, carry, no_reset, method="step_value"), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(values, ref_values, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(logits, ref_logits, rtol=1e-5, atol=1e-6)
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6), new_carry, ref_carry)
        # and it is not the value from a reset state (which the next step's value uses)
        assert np.abs(np.asarray(extra - apply(params, final_obs, carry, reset, method="step_value")))[reset].max() > 1e-4


@pytest.mark.slow
def test_a_cnn_torso_and_a_privileged_critic_take_a_cell_too():
    net = _network("lstm", shared=False, kind="cnn", channels=2)
    obs = jax.random.normal(jax.random.PRNGKey(0), (3, 2, 5, 5, 4))
    apply = _jitted(net)
    params = net.init_params(jax.random.PRNGKey(1), obs[0])
    assert {"actor_cell", "critic_cell"} <= set(params["params"])  # privileged: two towers, two cells
    carry, logits, values = apply(params, obs, net.initial_carry(2), jnp.zeros((3, 2), bool))
    assert logits.shape == (3, 2, 3) and values.shape == (3, 2) and set(carry) == {"actor", "critic"}
    changed = obs.at[..., 2:].add(1.0)  # only the critic's channels
    _, logits2, values2 = apply(params, changed, net.initial_carry(2), jnp.zeros((3, 2), bool))
    np.testing.assert_allclose(logits, logits2, rtol=1e-6)
    assert np.abs(np.asarray(values - values2)).max() > 1e-4


# --- the trainer ---------------------------------------------------------------------------------

def _trainer(num_minibatches=2, lr=1e-3, cell="gru", shared=False, bootstrap=True):
    env, env_params = gymnax.make("CartPole-v1")
    env = GymnaxEnv(env)  # under the lab's env contract (envs/base.py)
    env_params = env_params.replace(max_steps_in_episode=7)  # episodes end (truncated) inside a rollout
    ppo = ppo_config(num_envs=6, num_steps=20, total_timesteps=6 * 20 * 4, update_epochs=1, num_minibatches=num_minibatches,
                     lr=lr, lr_final=0.0, anneal_lr=False, auto_scale=False, bootstrap_truncation=bootstrap)
    net = _network(cell, shared, action_dim=2)
    return make_trainer(ppo, env, env_params, net, num_envs=6, chunk_updates=1), net, Hypers.of(ppo)


@pytest.mark.slow
@pytest.mark.parametrize("cell,shared", [("gru", False), ("lstm", True)])
def test_sequence_minibatches_reproduce_the_rollouts_log_probs_and_values(cell, shared):
    trainer, net, hypers = _trainer(cell=cell, shared=shared)
    state = jax.jit(trainer.init)(jax.random.PRNGKey(0), jax.random.PRNGKey(1), hypers, trainer.num_updates)
    assert jax.tree.all(jax.tree.map(lambda c: not np.asarray(c).any(), state.memory[0]))  # zeros at the start
    state, _ = jax.jit(trainer.chunk)(state, 0, hypers, trainer.num_updates)  # a state mid-run: memory not zero
    assert jax.tree.reduce(lambda acc, c: acc or bool(np.asarray(c).any()), state.memory[0], False)
    out = jax.jit(trainer.collect)(state, hypers)
    traj = out.records
    # Each step records whether the state was zeroed before it: the previous step's done.
    assert traj.done.sum() >= 6  # episodes of at most 7 steps in 20
    np.testing.assert_array_equal(traj.reset[0], state.memory[1])  # the previous rollout's last done
    np.testing.assert_array_equal(traj.reset[1:], traj.done[:-1])
    np.testing.assert_array_equal(out.memory[1], traj.done[-1])

    envs = np.array([4, 1, 3])  # a minibatch: whole sequences of some envs, time in order
    start = jax.tree.map(lambda c: c[envs], state.memory[0])
    _, logits, values = net.apply(state.params, traj.obs[:, envs], start, traj.reset[:, envs])
    log_prob = categorical_log_prob(logits, traj.action[:, envs])
    np.testing.assert_allclose(log_prob, traj.log_prob[:, envs], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(values, traj.value[:, envs], rtol=1e-5, atol=1e-5)
    # The recorded start state is what makes it match: from zeros the first episode differs.
    _, zero_logits, _ = net.apply(state.params, traj.obs[:, envs], jax.tree.map(jnp.zeros_like, start), traj.reset[:, envs])
    first = ~np.cumsum(np.asarray(traj.reset[:, envs]), 0).astype(bool)  # steps before each env's first reset
    assert first.any() and np.abs(np.asarray(zero_logits - logits))[first].max() > 1e-4


@pytest.mark.slow
def test_the_first_minibatch_of_an_update_has_ratio_one():
    """Through the trainer: with a learning rate too small to move anything, every sequence
    minibatch re-runs the rollout's own policy (approx_kl and clip_frac are 0)."""
    trainer, _, hypers = _trainer(num_minibatches=3, lr=1e-12)
    state = jax.jit(trainer.init)(jax.random.PRNGKey(0), jax.random.PRNGKey(1), hypers, trainer.num_updates)
    chunk = jax.jit(trainer.chunk)
    state, _ = chunk(state, 0, hypers, trainer.num_updates)
    state, metrics = chunk(state, 1, hypers, trainer.num_updates)
    assert abs(float(metrics["train/approx_kl"][0])) < 1e-6 and float(metrics["train/clip_frac"][0]) == 0.0
    assert np.isfinite(float(metrics["train/mean_episode_return"][0]))


@pytest.mark.slow
def test_a_feed_forward_network_has_no_memory():
    assert initial_memory(ActorCritic(2, network_config()), 3) is None
    env, env_params = gymnax.make("CartPole-v1")
    env = GymnaxEnv(env)  # under the lab's env contract (envs/base.py)
    ppo = ppo_config(num_envs=2, num_steps=4, total_timesteps=16, auto_scale=False, num_minibatches=2)
    ff = make_trainer(ppo, env, env_params, ActorCritic(2, network_config()), num_envs=2, chunk_updates=1)
    state = jax.jit(ff.init)(jax.random.PRNGKey(0), jax.random.PRNGKey(1), Hypers.of(ppo), ff.num_updates)
    assert state.memory is None and jax.jit(ff.collect)(state, Hypers.of(ppo)).records.reset is None


def test_bf16_compute_keeps_the_carried_state_in_float32():
    cfg = dataclasses.replace(network_config(kind="mlp", hidden_sizes=(8,)), recurrent="gru", recurrent_size=5)
    net = ActorCritic(3, cfg, precision="bf16")
    obs = jax.random.normal(jax.random.PRNGKey(0), (4, 2, 4))
    params = net.init_params(jax.random.PRNGKey(1), obs[0])
    carry, logits, values = jax.jit(net.apply)(params, obs, net.initial_carry(2), jnp.zeros((4, 2), bool))
    assert all(c.dtype == jnp.float32 for c in jax.tree.leaves(carry))
    assert logits.dtype == values.dtype == jnp.float32 and np.isfinite(np.asarray(logits)).all()


def test_a_recurrent_privileged_critic_on_the_actor_torso_is_refused():
    """The reference's value head on the actor's torso (shared_torso with a privileged critic)
    has no recurrent form here: refused before compiling, naming what is valid."""
    with pytest.raises(ConfigError, match="network.recurrent='gru'.*shared_torso=false"):
        network_config("cnn", recurrent="gru", privileged_critic=True, shared_torso=True)


# --- the heads' hidden layer (network.head_hidden: PureJaxRL ppo_rnn.py's heads) ---------------

def test_heads_are_linear_by_default_and_take_a_hidden_layer_of_head_hidden_units():
    assert run_config(TINY).network.head_hidden == 0
    assert {"policy_hidden", "value_hidden"}.isdisjoint(_network().init_params(jax.random.PRNGKey(0), jnp.zeros((2, 4)))["params"])
    cfg = dataclasses.replace(network_config(hidden_sizes=(8,), shared_torso=True), recurrent="gru", recurrent_size=5,
                              head_hidden=6, head_hidden_gain=2.0)
    params = ActorCritic(3, cfg).init_params(jax.random.PRNGKey(0), jnp.zeros((2, 4)))["params"]
    shapes = {name: params[name]["kernel"].shape for name in ("policy_hidden", "policy_head", "value_hidden", "value_head")}
    assert shapes == {"policy_hidden": (5, 6), "policy_head": (6, 3), "value_hidden": (5, 6), "value_head": (6, 1)}
    assert grad_clip.param_group("value_hidden") == "value" and grad_clip.param_group("policy_hidden") == "policy"


@pytest.mark.parametrize("override,key", [("network.head_hidden=-1", "network.head_hidden"),
                                          ("network.head_hidden_gain=0", "network.head_hidden_gain")])
def test_a_bad_head_hidden_value_is_named_with_what_is_valid(override, key):
    with pytest.raises(ConfigError) as err:
        run_config([*TINY, override])
    assert err.value.key == key
