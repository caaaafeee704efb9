"""The masked categorical against hand-computed cases, and masked rollouts that never take an
invalid action."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import network_config

from ppo_lab.ppo.distributions import (
    MASKED_LOGIT,
    categorical_entropy,
    categorical_log_prob,
    greedy_action,
    invalid_fraction,
    sample_action,
)

# Probabilities 1:2:3:4; the third action (weight 3) is invalid.
LOGITS = jnp.log(jnp.array([[1.0, 2.0, 3.0, 4.0]]))
MASK = jnp.array([[True, True, False, True]])
VALID_P = np.array([1.0, 2.0, 4.0]) / 7.0


def test_masked_log_prob_is_renormalised_over_valid_actions():
    for action, p in zip([0, 1, 3], VALID_P):
        got = float(categorical_log_prob(LOGITS, jnp.array([action]), MASK)[0])
        assert got == pytest.approx(np.log(p), rel=1e-6)
    # The invalid action has (finite) log-probability about MASKED_LOGIT: never NaN or -inf.
    invalid = float(categorical_log_prob(LOGITS, jnp.array([2]), MASK)[0])
    assert np.isfinite(invalid) and invalid < MASKED_LOGIT / 2


def test_masked_entropy_counts_valid_actions_only():
    expected = -np.sum(VALID_P * np.log(VALID_P))
    assert float(categorical_entropy(LOGITS, MASK)[0]) == pytest.approx(expected, rel=1e-6)
    # Uniform over 2 valid actions out of 5: log 2, whatever the invalid logits are.
    logits = jnp.array([[0.0, 50.0, 0.0, -3.0, 7.0]])
    mask = jnp.array([[True, False, True, False, False]])
    assert float(categorical_entropy(logits, mask)[0]) == pytest.approx(np.log(2.0), rel=1e-6)
    # A single valid action: entropy exactly 0, not NaN.
    one = jnp.array([[False, False, True, False, False]])
    assert float(categorical_entropy(logits, one)[0]) == 0.0


def test_masked_gradients_are_finite_and_zero_on_invalid_logits():
    def loss(logits):
        return jnp.sum(categorical_entropy(logits, MASK)) + jnp.sum(categorical_log_prob(logits, jnp.array([3]), MASK))

    grad = np.asarray(jax.grad(loss)(LOGITS))
    assert np.all(np.isfinite(grad))
    assert grad[0, 2] == 0.0
    assert np.any(grad[0, [0, 1, 3]] != 0.0)


def test_no_mask_is_the_plain_categorical():
    logits = jnp.array([[0.3, -1.2, 2.0], [1.0, 1.0, 1.0]])
    log_p = jax.nn.log_softmax(logits)
    np.testing.assert_array_equal(categorical_log_prob(logits, jnp.array([2, 0])), [log_p[0, 2], log_p[1, 0]])
    np.testing.assert_array_equal(categorical_entropy(logits), -jnp.sum(jnp.exp(log_p) * log_p, -1))
    key = jax.random.PRNGKey(3)
    np.testing.assert_array_equal(sample_action(key, logits), jax.random.categorical(key, logits))
    all_valid = jnp.ones_like(logits, bool)
    np.testing.assert_allclose(categorical_entropy(logits, all_valid), categorical_entropy(logits), rtol=1e-7)


def test_greedy_and_sampled_actions_are_always_valid():
    # The invalid action has by far the highest logit.
    logits = jnp.array([[0.0, 1.0, 9.0, 0.5]])
    assert int(greedy_action(logits, MASK)[0]) == 1
    assert int(greedy_action(logits)[0]) == 2
    samples = sample_action(jax.random.PRNGKey(0), jnp.repeat(LOGITS, 20000, 0), jnp.repeat(MASK, 20000, 0))
    counts = np.bincount(np.asarray(samples), minlength=4) / 20000
    assert counts[2] == 0.0
    np.testing.assert_allclose(counts[[0, 1, 3]], VALID_P, atol=0.015)


def test_invalid_fraction_by_hand():
    mask = jnp.array([[True, False], [False, True], [True, True], [False, True]])
    assert float(invalid_fraction(jnp.array([0, 0, 1, 0]), mask)) == pytest.approx(0.5)
    assert float(invalid_fraction(jnp.array([0, 1, 1, 1]), mask)) == 0.0


def test_a_state_with_no_valid_action_allows_every_action():
    from ppo_lab.ppo.distributions import allow_all_if_none_valid

    mask = jnp.array([[False, False, False], [False, True, False]])
    usable = allow_all_if_none_valid(mask)
    np.testing.assert_array_equal(usable, [[True, True, True], [False, True, False]])
    logits = jnp.zeros((2, 3))
    np.testing.assert_allclose(categorical_entropy(logits, usable), [np.log(3.0), 0.0], atol=1e-6)


def _rare_actions():
    from ppo_lab.envs.rare_actions.game import build

    return build({"name": "rare_actions"}, {"name": "default"})


def _random_rollout(masked: bool, num_envs=32, steps=1000):
    """A long rollout of a policy with random logits through ppo.rollout: the share of actions
    the env's own mask (read back from each state) forbids."""
    from ppo_lab.ppo.rollout import batched_mask, batched_reset, batched_step, rollout

    env, params = _rare_actions()
    env_mask = batched_mask(env, params)

    def policy(obs, key, mask):
        k_logits, k_action = jax.random.split(key)
        logits = 3.0 * jax.random.normal(k_logits, (num_envs, env.num_actions))
        return sample_action(k_action, logits, mask), None

    def record(_, step):
        return (), jnp.logical_not(jnp.take_along_axis(step.mask, step.action[:, None], -1)[:, 0])

    @jax.jit
    def run(key):
        obs, state = batched_reset(env, params, key, num_envs)
        # Unmasked: the policy gets no mask, `record` still sees the env's (passed by hand).
        policy_ = policy if masked else (lambda obs, key, mask: policy(obs, key, None))
        out = rollout(batched_step(env, params, num_envs), policy_, state, obs, key, steps, record=record,
                      action_mask=env_mask)
        return out.records

    return np.asarray(run(jax.random.PRNGKey(0)))


@pytest.mark.slow
def test_a_long_masked_rollout_takes_no_invalid_action():
    invalid = _random_rollout(masked=True)
    assert invalid.shape == (1000, 32) and invalid.sum() == 0
    # The same policy without the mask takes invalid actions often: the count can fail.
    assert _random_rollout(masked=False).mean() > 0.2


@pytest.mark.slow
def test_trainer_logs_zero_invalid_actions_and_masked_entropy():
    from ppo_lab.config import NetworkConfig
    from ppo_lab.networks import ActorCritic
    from ppo_lab.ppo.hypers import Hypers
    from ppo_lab.ppo.train import make_trainer
    from test_ppo_math import _ppo

    env, params = _rare_actions()
    network = ActorCritic(env.num_actions, network_config(kind="mlp", activation="tanh"))
    ppo = _ppo(num_envs=16, num_steps=128, total_timesteps=16 * 128 * 3, update_epochs=1, num_minibatches=2)
    trainer = make_trainer(ppo, env, params, network, num_envs=16, chunk_updates=3)
    hypers = Hypers.of(ppo)
    state = trainer.init(jax.random.PRNGKey(0), jax.random.PRNGKey(1), hypers, trainer.num_updates)
    _, metrics = jax.jit(trainer.chunk)(state, 0, hypers, trainer.num_updates)
    np.testing.assert_array_equal(metrics["actions/invalid_frac"], [0.0, 0.0, 0.0])
    # Entropy over valid actions: at most log 8, and below log 8 since programs are mostly masked.
    assert np.all(np.asarray(metrics["train/entropy"]) < np.log(8) - 0.3)
    assert np.all(np.isfinite(np.asarray(metrics["train/approx_kl"])))
