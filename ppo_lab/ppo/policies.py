"""The policy's distribution, chosen by the env's action space: one interface for the trainer,
evaluation, replay and the MLflow model.

- Discrete (`space.n`): the (optionally masked) categorical of `distributions.py`; the network's
  policy output is the logits.
- Box (`space.shape`, `low`, `high`): the diagonal Gaussian of `gaussian.py`; the network's
  policy output is `(mean, log_std)`. A mask of valid actions is a discrete notion: a
  continuous env with one is refused.

`sample` and `greedy` return what the trainer stores and scores (the categorical's index, the
Gaussian's unclipped sample or its mean); `env_action` turns that into what the env is given
(the identity, a clip to the bounds, or the tanh squash).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ppo_lab.errors import ConfigError
from ppo_lab.ppo import gaussian
from ppo_lab.ppo.distributions import (categorical_entropy, categorical_kl, categorical_log_prob, greedy_action,
                                       invalid_fraction, sample_action)


class ActionDistribution(NamedTuple):
    continuous: bool
    action_dim: int  # the categorical's number of actions, or the Box's dimensions
    log_prob: Callable  # (out, action, mask) -> [...]
    entropy: Callable  # (out, action, mask) -> [...]; `action`: the stored sample (tanh's estimate)
    sample: Callable  # (key, out, mask) -> action
    greedy: Callable  # (out, mask) -> action
    env_action: Callable  # action -> what the env takes
    action_metrics: Callable  # (actions [T, N, ...], mask or None) -> {"actions/...": scalar}
    kl: Callable  # (out_p, out_q, mask) -> KL(p || q) [...]: how far policy p is from policy q in a state


def categorical(num_actions: int) -> ActionDistribution:
    def metrics(actions, mask):
        fractions = jnp.mean(jax.nn.one_hot(actions, num_actions), axis=tuple(range(actions.ndim)))
        out = {"actions": fractions}  # named per action by the host (env.action_names)
        if mask is not None:
            out["actions/invalid_frac"] = invalid_fraction(actions, mask)
        return out

    return ActionDistribution(
        continuous=False,
        action_dim=num_actions,
        log_prob=categorical_log_prob,
        entropy=lambda out, action, mask: categorical_entropy(out, mask),
        sample=sample_action,
        greedy=greedy_action,
        env_action=lambda action: action,
        action_metrics=metrics,
        kl=categorical_kl,
    )


def diagonal_gaussian(low, high, squash: str | None) -> ActionDistribution:
    """Over a Box with bounds `low`, `high` (arrays shaped like an action); `squash` as the
    config validated it (`config.SQUASHES`)."""
    low, high = jnp.asarray(low, jnp.float32), jnp.asarray(high, jnp.float32)
    if squash == "tanh":
        if not (np.all(np.isfinite(np.asarray(low))) and np.all(np.isfinite(np.asarray(high)))):
            raise ConfigError("network.squash", squash, "null: tanh squashing needs finite action bounds")
        log_prob = lambda out, u, mask=None: gaussian.log_prob(out, u) - gaussian.tanh_log_det(u, low, high)  # noqa: E731
        entropy = lambda out, u, mask=None: gaussian.entropy(out) + gaussian.tanh_log_det(u, low, high)  # noqa: E731
        env_action = lambda u: gaussian.squash_tanh(u, low, high)  # noqa: E731
    else:
        log_prob = lambda out, u, mask=None: gaussian.log_prob(out, u)  # noqa: E731
        entropy = lambda out, u, mask=None: gaussian.entropy(out)  # noqa: E731
        env_action = lambda u: jnp.clip(u, low, high)  # noqa: E731

    def metrics(actions, mask):
        taken = env_action(actions).reshape((-1, actions.shape[-1]))  # what the envs were given
        mean, std = jnp.mean(taken, axis=0), jnp.std(taken, axis=0)
        out = {f"actions/mean_{i}": mean[i] for i in range(taken.shape[-1])}
        out.update({f"actions/std_{i}": std[i] for i in range(taken.shape[-1])})
        return out

    return ActionDistribution(
        continuous=True,
        action_dim=int(np.prod(low.shape)),
        log_prob=log_prob,
        entropy=entropy,
        sample=lambda key, out, mask=None: gaussian.sample(key, out),
        greedy=lambda out, mask=None: out[0],  # the mean
        env_action=env_action,
        action_metrics=metrics,
        kl=lambda out_p, out_q, mask=None: gaussian.kl(out_p, out_q),  # squashed or not (gaussian.kl)
    )


def is_continuous(space) -> bool:
    return not hasattr(space, "n")


def for_env(env, env_params, squash: str | None = None) -> ActionDistribution:
    """The distribution for `env`'s action space (`network.squash` applies to Box spaces)."""
    space = env.action_space(env_params)
    if not is_continuous(space):
        return categorical(int(space.n))
    if env.has_action_mask:
        raise ConfigError("env", type(env).__name__, "an env without an action mask: masks are a discrete notion, "
                          "and this env's actions are continuous")
    shape = tuple(space.shape)
    if len(shape) != 1:
        raise ConfigError("env", type(env).__name__, f"a Box action space of one axis (this one is shaped {shape})")
    low = np.broadcast_to(np.asarray(space.low, np.float32), shape)
    high = np.broadcast_to(np.asarray(space.high, np.float32), shape)
    return diagonal_gaussian(low, high, squash)
