"""Generalised advantage estimation by a reverse scan."""

from __future__ import annotations

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
