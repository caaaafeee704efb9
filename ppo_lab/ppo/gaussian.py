"""The policy's diagonal Gaussian for continuous (Box) action spaces.

The network outputs a mean per action dimension and a state-independent log-std parameter
(as PureJaxRL's `ppo_continuous_action.py` and CleanRL do). The sample `u ~ N(mean, std)` is
what the trainer stores and scores; the env gets `env_action(u)`:
- `squash=None`: `u` clipped to the space's bounds. The log-prob stays that of the unclipped
  `u`: clipping is part of the env, not of the policy, so PPO's ratio compares two Gaussians
  at the same point (scoring the clipped action would put all the mass beyond a bound on one
  point, which a density cannot express, and bias the gradient at the bounds).
- `squash="tanh"`: `low + (tanh(u) + 1) / 2 * (high - low)`, a bijection onto the open box.
  The log-prob is then that of the squashed action: `log N(u) - sum log |d a / d u|`, with
  `log |d a / d u| = log(1 - tanh(u)^2) + log((high - low) / 2)` per dimension (the
  change of variables, as in SAC). Its entropy has no closed form; by the same change of
  variables `H(a) = H(u) + E[log |d a / d u|]`, estimated with the stored samples (the
  Gaussian's term carries the gradient: the log-det at a fixed `u` does not depend on the
  parameters).

All functions take the policy output `(mean, log_std)` ([..., D] each) and reduce over the
last axis (the action dimensions).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

LOG_2PI = math.log(2.0 * math.pi)


def log_prob(out, u):
    """log N(u; mean, diag(exp(log_std))^2), summed over dimensions."""
    mean, log_std = out
    z = (u - mean) * jnp.exp(-log_std)
    return jnp.sum(-0.5 * jnp.square(z) - log_std - 0.5 * LOG_2PI, axis=-1)


def entropy(out):
    """Entropy of the diagonal Gaussian: sum over dimensions of log_std + (1 + log 2 pi) / 2."""
    mean, log_std = out
    return jnp.sum(jnp.broadcast_to(log_std, mean.shape) + 0.5 * (1.0 + LOG_2PI), axis=-1)


def kl(out_p, out_q):
    """KL(p || q) of two diagonal Gaussians, summed over dimensions: per dimension
    log(s_q / s_p) + (s_p^2 + (m_p - m_q)^2) / (2 s_q^2) - 1/2. The tanh squash is a fixed
    bijection, and a KL divergence does not change under one: the squashed policies' KL is this."""
    (mean_p, log_std_p), (mean_q, log_std_q) = out_p, out_q
    var_ratio = jnp.exp(2.0 * (log_std_p - log_std_q))
    gap = jnp.square((mean_p - mean_q) * jnp.exp(-log_std_q))
    return jnp.sum(log_std_q - log_std_p + 0.5 * (var_ratio + gap - 1.0), axis=-1)


def sample(key, out):
    mean, log_std = out
    return mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape, mean.dtype)


def tanh_log_det(u, low, high):
    """sum over dimensions of log |d a / d u| for a = low + (tanh(u) + 1) / 2 (high - low).
    `log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))`: exact, and finite for large |u|."""
    log_1m_tanh2 = 2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u))
    return jnp.sum(log_1m_tanh2 + jnp.log((high - low) / 2.0), axis=-1)


def squash_tanh(u, low, high):
    return low + (jnp.tanh(u) + 1.0) * 0.5 * (high - low)
