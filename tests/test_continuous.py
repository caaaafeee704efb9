"""Continuous control: the diagonal Gaussian and its tanh squash checked by hand, the
normalisers' statistics, and bad input refused before compiling."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_lab.errors import ConfigError
from ppo_lab.ppo import gaussian, normalize
from ppo_lab.ppo.policies import diagonal_gaussian

from conftest import launch, run_config


def test_gaussian_log_prob_and_entropy_by_hand():
    mean, log_std = jnp.array([0.5, -1.0]), jnp.log(jnp.array([2.0, 0.5]))
    u = jnp.array([1.5, -1.25])
    # N(1.5; 0.5, 2): z = 0.5; N(-1.25; -1, 0.5): z = -0.5
    expected = (-0.5 * 0.25 - math.log(2.0) - 0.5 * math.log(2 * math.pi)) + (-0.5 * 0.25 - math.log(0.5) - 0.5 * math.log(2 * math.pi))
    assert float(gaussian.log_prob((mean, log_std), u)) == pytest.approx(expected, abs=1e-6)
    # entropy of N(m, s^2) = 0.5 log(2 pi e s^2), summed over dimensions
    h = 0.5 * math.log(2 * math.pi * math.e * 4.0) + 0.5 * math.log(2 * math.pi * math.e * 0.25)
    assert float(gaussian.entropy((mean, log_std))) == pytest.approx(h, abs=1e-6)


def test_gaussian_sample_moments_and_greedy_is_the_mean():
    dist = diagonal_gaussian(np.array([-2.0]), np.array([2.0]), None)
    out = (jnp.full((20000, 1), 0.3), jnp.full((20000, 1), math.log(0.7)))
    u = dist.sample(jax.random.PRNGKey(0), out)
    assert float(u.mean()) == pytest.approx(0.3, abs=0.02) and float(u.std()) == pytest.approx(0.7, abs=0.02)
    assert np.array_equal(np.asarray(dist.greedy(out)), np.asarray(out[0]))


def test_clip_keeps_the_unclipped_log_prob():
    dist = diagonal_gaussian(np.array([-1.0]), np.array([1.0]), None)
    out = (jnp.array([[0.0]]), jnp.array([[0.0]]))
    u = jnp.array([[3.0]])
    assert float(dist.env_action(u)[0, 0]) == 1.0
    assert float(dist.log_prob(out, u)[0]) == pytest.approx(-4.5 - 0.5 * math.log(2 * math.pi), abs=1e-6)


def test_tanh_squash_log_det_by_hand_and_by_autodiff():
    low, high = np.array([-2.0, 0.0]), np.array([2.0, 1.0])
    dist = diagonal_gaussian(low, high, "tanh")
    u = jnp.array([0.3, -1.7])
    out = (jnp.zeros(2), jnp.zeros(2))
    # d a / d u = (1 - tanh(u)^2) (high - low) / 2 per dimension
    by_hand = sum(math.log((1 - math.tanh(x) ** 2) * (h - lo) / 2) for x, lo, h in zip([0.3, -1.7], low, high))
    jac = jax.jacobian(dist.env_action)(u)
    assert float(gaussian.tanh_log_det(u, low, high)) == pytest.approx(by_hand, abs=1e-5)
    assert float(jnp.log(jnp.abs(jnp.linalg.det(jac)))) == pytest.approx(by_hand, abs=1e-5)
    assert float(dist.log_prob(out, u)) == pytest.approx(float(gaussian.log_prob(out, u)) - by_hand, abs=1e-5)
    # finite far in the tails, where log(1 - tanh^2) computed naively is log(0)
    assert np.isfinite(float(gaussian.tanh_log_det(jnp.array([30.0, -30.0]), low, high)))
    a = dist.env_action(jnp.array([[30.0, -30.0], [0.0, 0.0]]))
    assert np.allclose(np.asarray(a), [[2.0, 0.0], [0.0, 0.5]], atol=1e-6)


def test_tanh_density_integrates_to_one():
    """The squashed density (with its log-det) is a density on the bounds: it integrates to 1."""
    dist = diagonal_gaussian(np.array([-2.0]), np.array([2.0]), "tanh")
    a = np.linspace(-2 + 1e-4, 2 - 1e-4, 200001)
    u = np.arctanh(a / 2.0)
    out = (jnp.full((a.size, 1), 0.4), jnp.full((a.size, 1), math.log(0.8)))
    density = np.exp(np.asarray(dist.log_prob(out, jnp.asarray(u[:, None], jnp.float32))))
    assert float(np.trapezoid(density, a)) == pytest.approx(1.0, abs=2e-3)


def test_action_metrics_per_dimension():
    dist = diagonal_gaussian(np.array([-1.0, -1.0]), np.array([1.0, 1.0]), None)
    actions = jnp.array([[[0.5, 5.0], [-0.5, 1.0]]])  # [T=1, N=2, D=2]; 5.0 is clipped to 1
    m = dist.action_metrics(actions, None)
    assert set(m) == {"actions/mean_0", "actions/mean_1", "actions/std_0", "actions/std_1"}
    assert float(m["actions/mean_0"]) == 0.0 and float(m["actions/std_0"]) == pytest.approx(0.5)
    assert float(m["actions/mean_1"]) == 1.0 and float(m["actions/std_1"]) == 0.0


def test_running_statistics_match_numpy_over_several_batches():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, (5, 4, 3)).astype(np.float32) for _ in range(3)]
    params = {"params": {"obs_norm": {"mean": jnp.zeros(3), "var": jnp.ones(3), "count": jnp.asarray(1e-4)}}}
    for b in batches:
        params = normalize.update_obs_norm(params, jnp.asarray(b))
    everything = np.concatenate([b.reshape(-1, 3) for b in batches])
    stats = params["params"]["obs_norm"]
    assert np.allclose(np.asarray(stats["mean"]), everything.mean(0), atol=1e-3)
    assert np.allclose(np.asarray(stats["var"]), everything.var(0), rtol=1e-3)
    assert float(stats["count"]) == pytest.approx(60, abs=1e-3)


def test_reward_scaling_by_the_discounted_return_std():
    rewards = jnp.array([[1.0, 2.0], [1.0, 2.0], [1.0, 2.0]])
    dones = jnp.array([[False, False], [True, False], [False, False]])
    norm = normalize.init_reward_norm(2)
    scaled, new = normalize.scale_rewards(norm, rewards, dones, 0.5)
    # env 0: R = 1, 1.5 (episode ends), 1; env 1: R = 2, 3, 3.5
    returns = np.array([1.0, 1.5, 1.0, 2.0, 3.0, 3.5])
    assert np.allclose(np.asarray(new.discounted_return), [1.0, 3.5])
    # the prior (count 1e-4) barely weighs
    assert float(new.var) == pytest.approx(returns.var(), rel=1e-3)
    assert np.allclose(np.asarray(scaled), np.asarray(rewards) / np.sqrt(returns.var()), rtol=1e-3)


@pytest.mark.parametrize("override, key", [
    ("network.squash=sigmoid", "network.squash"),
    ("ppo.normalize_obs=maybe", "ppo.normalize_obs"),
    ("ppo.normalize_reward=sometimes", "ppo.normalize_reward"),  # (1 and 0 read as true and false)
])
def test_bad_continuous_values_are_refused_at_validation(override, key):
    with pytest.raises(ConfigError) as err:
        run_config(["experiment=pendulum", override])
    assert err.value.key == key


def test_brax_keys_are_checked_without_jax():
    with pytest.raises(ConfigError) as err:
        run_config(["env=brax", "env.backend=warp"])
    assert err.value.key == "env.backend" and "spring" in str(err.value)


@pytest.mark.slow
def test_cnn_on_flat_continuous_observations_is_refused_before_compiling(tmp_path):
    proc = launch(["experiment=pendulum", "network=cnn", "hardware.host_devices=1"], tmp_path / "run", check=False, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "network" in proc.stderr and "flat" in proc.stderr
    assert "compiled" not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_unknown_brax_env_lists_the_valid_names(tmp_path):
    proc = launch(["env=brax", "env.id=antt", "hardware.host_devices=1"], tmp_path / "run", check=False, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "env.id" in proc.stderr and "inverted_pendulum" in proc.stderr and "'ant'" in proc.stderr
