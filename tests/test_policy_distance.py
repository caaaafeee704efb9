"""The policy's distance from where it started (ppo/policy_distance.py): each distribution's KL
against hand-computed cases, the squashed Gaussian's against a Monte Carlo estimate, and the
held-out states and distances of real networks (feed-forward, recurrent, masked, continuous)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import run_config
from ppo_lab.ppo.policies import categorical, diagonal_gaussian
from ppo_lab.ppo.policy_distance import PolicyAnchors, distance_program, held_out_key, held_out_program, held_out_shape
from ppo_lab.ppo.train import env_params_argument
from ppo_lab.run.build import build


def test_categorical_kl_by_hand():
    p, q = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.2, 0.6])
    kl = categorical(3).kl(jnp.log(p), jnp.log(q), None)
    assert float(kl) == pytest.approx(0.5 * math.log(0.5 / 0.2) + 0.3 * math.log(0.3 / 0.2) + 0.2 * math.log(0.2 / 0.6), rel=1e-5)
    assert float(categorical(3).kl(jnp.log(p), jnp.log(p), None)) == pytest.approx(0.0, abs=1e-7)


def test_masked_categorical_kl_is_over_the_valid_actions_renormalised():
    p, q = jnp.log(jnp.array([0.5, 0.3, 0.2])), jnp.log(jnp.array([0.2, 0.2, 0.6]))
    mask = jnp.array([True, True, False])
    # Renormalised over the first two actions: p = (5/8, 3/8), q = (1/2, 1/2); the third counts nothing.
    expected = 0.625 * math.log(0.625 / 0.5) + 0.375 * math.log(0.375 / 0.5)
    assert float(categorical(3).kl(p, q, mask)) == pytest.approx(expected, rel=1e-5)
    batch = categorical(3).kl(jnp.stack([p, q]), jnp.stack([q, q]), jnp.stack([mask, jnp.ones(3, bool)]))
    assert batch.shape == (2,) and float(batch[1]) == pytest.approx(0.0, abs=1e-7)


def test_diagonal_gaussian_kl_by_hand():
    # N(1, 2^2) from N(0, 1): log(1/2) + (4 + 1) / 2 - 1/2, plus an identical second dimension's 0.
    out_p = (jnp.array([1.0, 0.3]), jnp.log(jnp.array([2.0, 0.5])))
    out_q = (jnp.array([0.0, 0.3]), jnp.log(jnp.array([1.0, 0.5])))
    dist = diagonal_gaussian(np.array([-1.0, -1.0]), np.array([1.0, 1.0]), None)
    assert float(dist.kl(out_p, out_q)) == pytest.approx(math.log(0.5) + 2.5 - 0.5, rel=1e-5)


def test_squashed_gaussian_kl_matches_a_monte_carlo_estimate_of_its_own_log_probs():
    """KL of the tanh-squashed policies, E_p[log p(a) - log q(a)] with the squash's log-det in
    both log-probs, is the Gaussians' KL: a bijection changes no KL divergence."""
    dist = diagonal_gaussian(np.array([-2.0]), np.array([2.0]), "tanh")
    out_p, out_q = (jnp.array([0.4]), jnp.log(jnp.array([0.7]))), (jnp.array([-0.2]), jnp.log(jnp.array([1.1])))
    u = dist.sample(jax.random.PRNGKey(0), (jnp.broadcast_to(out_p[0], (200_000, 1)), jnp.broadcast_to(out_p[1], (200_000, 1))))
    batch = lambda out: (jnp.broadcast_to(out[0], u.shape), jnp.broadcast_to(out[1], u.shape))  # noqa: E731
    estimate = float(jnp.mean(dist.log_prob(batch(out_p), u) - dist.log_prob(batch(out_q), u)))
    assert float(dist.kl(out_p, out_q)) == pytest.approx(estimate, abs=0.01)


def test_held_out_shape_covers_the_count():
    assert held_out_shape(1024) == (16, 64) and held_out_shape(100) == (2, 64) and held_out_shape(8) == (1, 8)


CARTPOLE = ["env=cartpole", "hardware.host_devices=1", "network.hidden_sizes=[16]", "eval.kl_states=96"]


def _components(overrides):
    cfg = run_config([*CARTPOLE, "eval.every_updates=4", *overrides])
    comp = build(cfg, 1)
    params = comp.network.init_params(jax.random.PRNGKey(0), jnp.zeros((1, *comp.env.observation_space(comp.env_params).shape)))
    held = held_out_program(comp.env, comp.env_params, comp.network, comp.trainer.dist, cfg.eval.kl_states,
                            env_params_argument(comp.env, comp.env_params))
    return cfg, comp, params, held


@pytest.mark.parametrize("overrides", [[], ["network.recurrent=gru", "network.recurrent_size=8"]], ids=["mlp", "gru"])
def test_distances_of_real_networks(overrides):
    """The held-out states are a function of the seed and the initial parameters; a policy is at
    distance 0 from itself; the KL from another policy is the mean of its per-state KL."""
    cfg, comp, params, held_program = _components(overrides)
    held = held_program(params, held_out_key(0))
    again, other = held_program(params, held_out_key(0)), held_program(params, held_out_key(1))
    assert jax.tree.all(jax.tree.map(lambda a, b: bool(jnp.array_equal(a, b)), held, again))
    assert not np.array_equal(np.asarray(held.obs), np.asarray(other.obs))
    assert held.obs.shape[:2] == held_out_shape(96) == held.reset.shape and not bool(held.reset[0].any())
    distances = distance_program(comp.network, comp.trainer.dist, 96)
    assert [float(x) for x in distances(params, PolicyAnchors(params, params), held)] == [0.0, 0.0]
    moved = jax.tree.map(lambda x: x + 0.05 * jax.random.normal(jax.random.PRNGKey(3), x.shape), params)
    initial, previous = (float(x) for x in distances(moved, PolicyAnchors(params, moved), held))
    assert initial > 0 and previous == 0.0
    if not comp.network.recurrent:  # by hand: the categorical's KL in each state, averaged
        flat = held.obs.reshape((-1, *held.obs.shape[2:]))
        p = jax.nn.softmax(comp.network.apply(moved, flat)[0])
        q = jax.nn.softmax(comp.network.apply(params, flat)[0])
        assert initial == pytest.approx(float(jnp.mean(jnp.sum(p * jnp.log(p / q), -1)[:96])), rel=1e-4)


def test_distances_of_a_continuous_policy():
    cfg = run_config(["experiment=pendulum", "hardware.host_devices=1", "eval.every_updates=4", "eval.kl_states=64"])
    comp = build(cfg, 1)
    params = comp.network.init_params(jax.random.PRNGKey(0), jnp.zeros((1, *comp.env.observation_space(comp.env_params).shape)))
    held = held_out_program(comp.env, comp.env_params, comp.network, comp.trainer.dist, 64)(params, held_out_key(0))
    wider = jax.tree.map(lambda x: x, params)
    wider["params"]["log_std"] = params["params"]["log_std"] + math.log(2.0)  # std doubled, means alike
    initial, _ = distance_program(comp.network, comp.trainer.dist, 64)(wider, PolicyAnchors(params, params), held)
    # Per dimension log(1/2) + 4/2 - 1/2 (std 2s from s, same mean), whatever the state.
    assert float(initial) == pytest.approx(comp.trainer.dist.action_dim * (math.log(0.5) + 1.5), rel=1e-5)


def test_distances_of_a_masked_policy_count_valid_actions_only():
    cfg = run_config(["experiment=rare_actions", "hardware.host_devices=1", "eval.every_updates=4", "eval.kl_states=64"])
    comp = build(cfg, 1)
    obs = jnp.zeros((1, *comp.env.observation_space(comp.env_params).shape))
    params, other = (comp.network.init_params(jax.random.PRNGKey(k), obs) for k in (0, 1))
    held = held_out_program(comp.env, comp.env_params, comp.network, comp.trainer.dist, 64,
                            env_params_argument(comp.env, comp.env_params))(params, held_out_key(0))
    assert held.mask is not None and not bool(held.mask.all()), "some actions masked in the held-out states"
    initial, _ = distance_program(comp.network, comp.trainer.dist, 64)(other, PolicyAnchors(params, params), held)
    flat = lambda x: x.reshape((-1, *x.shape[2:]))  # noqa: E731
    mask = flat(held.mask)
    p, q = (jax.nn.log_softmax(jnp.where(mask, comp.network.apply(w, flat(held.obs))[0], -jnp.inf)) for w in (other, params))
    by_hand = jnp.sum(jnp.where(mask, jnp.exp(p) * (p - q), 0.0), -1)
    assert float(initial) == pytest.approx(float(jnp.mean(by_hand[:64])), rel=1e-4)
