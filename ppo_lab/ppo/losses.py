"""The PPO objective and its advantages (generalised advantage estimation by a reverse scan),
written on plain arrays so they can be checked by hand."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


def compute_gae(rewards, values, dones, last_value, gamma, gae_lambda):
    """Advantages and returns for a rollout of T steps.

    rewards, values, dones: [T, ...]; last_value: [...] (value of the observation after the
    last step). `dones[t]` is 1 when the transition at t ended an episode: the next
    observation belongs to a new episode, so neither bootstrapping nor the GAE trace crosses it.
    """
    gamma_lambda = gamma * gae_lambda  # the trace's decay, once
    dones = dones.astype(values.dtype)

    def backward(carry, step):
        next_advantage, next_value = carry
        reward, value, done = step
        not_done = 1.0 - done
        delta = reward + gamma * next_value * not_done - value
        advantage = delta + gamma_lambda * not_done * next_advantage
        return (advantage, value), advantage

    init = (jnp.zeros_like(last_value), last_value)
    _, advantages = jax.lax.scan(backward, init, (rewards, values, dones), reverse=True)
    return advantages, advantages + values


class LossTerms(NamedTuple):
    total: jax.Array
    pg_loss: jax.Array
    vf_loss: jax.Array
    entropy: jax.Array
    approx_kl: jax.Array
    clip_frac: jax.Array


def weighted_mean(x, weights=None):
    """The mean of `x`, or its mean over the samples of weight 1 (`weights` of 0 or 1: an env's
    reset step, which acted in no episode, has weight 0; see `ppo_lab.ppo.train`)."""
    if weights is None:
        return jnp.mean(x)
    weights = weights.astype(x.dtype)
    return jnp.sum(x * weights) / jnp.maximum(jnp.sum(weights), 1.0)


def normalize(x, eps: float = 1e-8, weights=None):
    if weights is None:
        return (x - x.mean()) / (x.std() + eps)
    mean = weighted_mean(x, weights)
    return (x - mean) / (jnp.sqrt(weighted_mean(jnp.square(x - mean), weights)) + eps)


def ppo_loss_terms(
    log_prob,
    old_log_prob,
    advantages,
    value,
    old_value,
    returns,
    entropy,
    *,
    clip_eps,
    vf_coef,
    ent_coef,
    clip_vloss: bool = True,
    normalize_advantages: bool = True,
    entropy_floor=None,
    entropy_floor_coef=0.0,
    value_loss: str = "mean_of_max",
    weights=None,
) -> LossTerms:
    """Clipped surrogate + (clipped) value loss - entropy bonus (+ entropy-floor penalty).

    `value_loss`: "mean_of_max", 0.5 x mean over samples of max(e1, e2) (PPO2/CleanRL), or
    "max_of_means", max(mean e1, mean e2) with no 1/2 (the reference's, goodharts_law
    `goodharts/training/ppo/algorithms.py` lines 189-195; with clip_vloss off: mean e1).
    `weights` (None: every sample counts): 0/1 per sample; every mean is over the samples of
    weight 1 (`weighted_mean`), the advantages' normalisation included."""
    mean = lambda x: weighted_mean(x, weights)  # noqa: E731
    if normalize_advantages:
        advantages = normalize(advantages, weights=weights)
    log_ratio = log_prob - old_log_prob
    ratio = jnp.exp(log_ratio)
    surrogate = ratio * advantages
    surrogate_clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
    pg_loss = -mean(jnp.minimum(surrogate, surrogate_clipped))

    value_error = jnp.square(value - returns)
    if value_loss == "max_of_means":
        vf_loss = mean(value_error)
        if clip_vloss:
            value_clipped = old_value + jnp.clip(value - old_value, -clip_eps, clip_eps)
            vf_loss = jnp.maximum(vf_loss, mean(jnp.square(value_clipped - returns)))
    else:
        if clip_vloss:
            value_clipped = old_value + jnp.clip(value - old_value, -clip_eps, clip_eps)
            value_error = jnp.maximum(value_error, jnp.square(value_clipped - returns))
        vf_loss = 0.5 * mean(value_error)

    entropy = mean(entropy)
    total = pg_loss + vf_coef * vf_loss - ent_coef * entropy
    if entropy_floor is not None:
        # Pushes entropy back up only once it falls under the floor (no effect above it).
        total = total + entropy_floor_coef * jnp.maximum(entropy_floor - entropy, 0.0)

    # The low-variance "k3" estimator of KL(old || new), as in CleanRL.
    approx_kl = mean((ratio - 1.0) - log_ratio)
    clip_frac = mean((jnp.abs(ratio - 1.0) > clip_eps).astype(jnp.float32))
    return LossTerms(total, pg_loss, vf_loss, entropy, approx_kl, clip_frac)


def explained_variance(values, returns):
    """1 - Var(returns - values) / Var(returns); NaN when the returns do not vary."""
    var_returns = jnp.var(returns)
    return jnp.where(var_returns > 0, 1.0 - jnp.var(returns - values) / jnp.where(var_returns > 0, var_returns, 1.0), jnp.nan)
