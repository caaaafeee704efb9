"""PopArt and the separate gradient clipping, on small arrays worked out by hand."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from ppo_lab.ppo import grad_clip, value_norm as vn
from ppo_lab.ppo.hypers import Hypers
from ppo_lab.envs.gymnax_envs import GymnaxEnv

from conftest import network_config, ppo_config


def test_first_update_sets_the_statistics_then_ema_with_beta_floor():
    returns = jnp.array([1.0, 3.0, 5.0])
    s1 = vn.update(vn.init(), returns, beta_min=0.001)  # count 1: beta = 1
    assert float(s1.mean) == pytest.approx(3.0) and float(s1.std) == pytest.approx(2.0)  # unbiased std
    s2 = vn.update(s1, jnp.array([7.0, 7.0]), beta_min=0.001)  # beta = 1/2, batch std floored
    assert float(s2.mean) == pytest.approx(5.0)
    assert float(s2.std) == pytest.approx(np.sqrt(0.5 * 4.0 + 0.5 * 1e-8), rel=1e-5)
    late = vn.PopArtStats(mean=jnp.float32(0.0), std=jnp.float32(1.0), count=jnp.int32(10_000))
    s3 = vn.update(late, jnp.array([10.0, 10.0]), beta_min=0.01)  # 1/10001 < beta_min
    assert float(s3.mean) == pytest.approx(0.1)


def test_rescaling_preserves_denormalised_outputs():
    key = jax.random.PRNGKey(0)
    head = {"kernel": jax.random.normal(key, (5, 1)), "bias": jnp.array([0.3])}
    x = jax.random.normal(jax.random.PRNGKey(1), (7, 5))
    old = vn.PopArtStats(mean=jnp.float32(2.0), std=jnp.float32(3.0), count=jnp.int32(4))
    new = vn.update(old, jnp.array([-10.0, 40.0, 100.0]), beta_min=0.1)
    before = vn.denormalize(old, x @ head["kernel"] + head["bias"])
    fixed = vn.rescale_head(head, old, new)
    after = vn.denormalize(new, x @ fixed["kernel"] + fixed["bias"])
    np.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(vn.normalize(new, vn.denormalize(new, x)), x, rtol=1e-5, atol=1e-5)


def test_adam_moments_of_the_head_are_rescaled():
    params = {"params": {"value_head": {"kernel": jnp.ones((2, 1)), "bias": jnp.ones(1)},
                         "policy_head": {"kernel": jnp.ones((2, 3)), "bias": jnp.ones(3)}}}
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.inject_hyperparams(optax.adam)(learning_rate=0.1))
    state = tx.init(params)
    _, state = tx.update(jax.tree.map(jnp.ones_like, params), state, params)
    fixed = vn.rescale_adam_moments(state, ("params", "value_head"), jnp.float32(0.5))
    adam, fixed_adam = state[1].inner_state[0], fixed[1].inner_state[0]
    np.testing.assert_allclose(fixed_adam.mu["params"]["value_head"]["kernel"], 0.5 * adam.mu["params"]["value_head"]["kernel"])
    np.testing.assert_allclose(fixed_adam.nu["params"]["value_head"]["bias"], 0.25 * adam.nu["params"]["value_head"]["bias"])
    np.testing.assert_array_equal(fixed_adam.mu["params"]["policy_head"]["kernel"], adam.mu["params"]["policy_head"]["kernel"])


def test_policy_and_value_gradients_are_clipped_apart():
    params = {"params": {"actor_torso": {"w": jnp.zeros(2)}, "policy_head": {"w": jnp.zeros(1)},
                         "critic_torso": {"w": jnp.zeros(2)}, "value_head": {"w": jnp.zeros(1)}}}
    grads = {"params": {"actor_torso": {"w": jnp.array([0.3, 0.0])}, "policy_head": {"w": jnp.array([0.4])},
                        "critic_torso": {"w": jnp.array([30.0, 0.0])}, "value_head": {"w": jnp.array([40.0])}}}
    tx = grad_clip.clip_policy_and_value(1.0)
    out, _ = tx.update(grads, tx.init(params), params)
    p = out["params"]
    # Policy norm 0.5 <= 1: untouched. Value norm 50: scaled to 1.
    np.testing.assert_allclose(p["actor_torso"]["w"], [0.3, 0.0], rtol=1e-6)
    np.testing.assert_allclose(p["policy_head"]["w"], [0.4], rtol=1e-6)
    np.testing.assert_allclose(p["critic_torso"]["w"], [0.6, 0.0], rtol=1e-5)
    np.testing.assert_allclose(p["value_head"]["w"], [0.8], rtol=1e-5)
    # One global norm would have shrunk the policy's step 100-fold.
    joint, _ = optax.clip_by_global_norm(1.0).update(grads, None)
    assert float(joint["params"]["policy_head"]["w"][0]) < 0.01


def test_refit_keeps_the_networks_values_and_normalises_the_targets():
    from ppo_lab.config import NetworkConfig
    from ppo_lab.networks import ActorCritic

    net = ActorCritic(4, network_config(kind="mlp", activation="tanh", hidden_sizes=(8,)))
    obs = jax.random.normal(jax.random.PRNGKey(0), (6, 3))
    params = net.init(jax.random.PRNGKey(1), obs)
    tx = optax.chain(grad_clip.clip_policy_and_value(0.5), optax.inject_hyperparams(optax.adam)(learning_rate=1e-3))
    opt_state = tx.init(params)
    stats = vn.PopArtStats(mean=jnp.float32(1.0), std=jnp.float32(2.0), count=jnp.int32(3))
    before = vn.read(stats, net.apply(params, obs, method="value"))
    returns, old_values = jnp.array([5.0, 9.0, -3.0, 12.0]), jnp.array([4.0, 8.0, -2.0, 10.0])
    new, params2, opt2, ret_n, old_n = vn.refit(stats, params, opt_state, returns, old_values, beta_min=0.3)
    after = vn.read(new, net.apply(params2, obs, method="value"))
    np.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(vn.denormalize(new, ret_n), returns, rtol=1e-5)
    np.testing.assert_allclose(vn.denormalize(new, old_n), old_values, rtol=1e-5)
    assert int(new.count) == 4 and float(new.mean) == pytest.approx(0.7 * 1.0 + 0.3 * float(returns.mean()))
    # The policy's parameters are untouched.
    np.testing.assert_array_equal(params2["params"]["policy_head"]["kernel"], params["params"]["policy_head"]["kernel"])
    assert jax.tree.structure(opt2) == jax.tree.structure(opt_state)


def test_trainer_with_popart_and_separate_clipping_runs_and_tracks_returns():
    import gymnax

    from ppo_lab.config import NetworkConfig, PPOConfig
    from ppo_lab.networks import ActorCritic
    from ppo_lab.ppo.train import current_learning_rate, make_trainer

    env, env_params = gymnax.make("CartPole-v1")

    env = GymnaxEnv(env)  # under the lab's env contract (envs/base.py)
    ppo = ppo_config(lr=1e-3, lr_final=1e-3, anneal_lr=False, gamma=0.99, gae_lambda=0.95, clip_eps=0.2,
                    clip_eps_final=0.2, clip_vloss=True, vf_coef=0.5, ent_coef_initial=0.01, ent_coef_final=0.01,
                    entropy_floor=0.5, entropy_floor_coef=0.05, max_grad_norm=0.5, update_epochs=2, num_minibatches=1,
                    normalize_advantages=True, bootstrap_truncation=True, num_envs=4, num_steps=32,
                    total_timesteps=4 * 32 * 3, auto_scale=False, value_norm="popart", popart_beta_min=0.001,
                    separate_grad_clip=True)
    net = ActorCritic(2, network_config(kind="mlp", activation="tanh", hidden_sizes=(16,)))
    trainer = make_trainer(ppo, env, env_params, net, num_envs=4, chunk_updates=3)
    hypers = Hypers.of(ppo)
    state = trainer.init(jax.random.PRNGKey(0), jax.random.PRNGKey(1), hypers, trainer.num_updates)
    assert int(state.value_norm.count) == 0
    state, metrics = jax.jit(trainer.chunk)(state, 0, hypers, trainer.num_updates)
    assert int(state.value_norm.count) == 3
    # CartPole pays +1 a step: the discounted returns of the first rollouts are well above 0 and
    # the statistics followed them (the first batch sets them outright).
    assert float(state.value_norm.mean) > 1.0 and float(state.value_norm.std) > 0.1
    np.testing.assert_allclose(metrics["train/popart_mean"][-1], state.value_norm.mean)
    assert np.isfinite(np.asarray(metrics["train/vf_loss"])).all()
    assert float(current_learning_rate(state.opt_state)) == pytest.approx(1e-3)
