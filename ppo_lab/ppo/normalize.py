"""Running statistics of observations and returns (`ppo.normalize_obs`, `ppo.normalize_reward`).

Both are part of a replica's learner state (one set per seed under `vmap`), so they are
checkpointed and restored with it. With one seed's envs split over devices (`axis_name`), each
device's batch moments are combined (`psum`) before the merge, so every device holds the same
statistics, those of all the seed's envs.

- Observations: the network's `ObsNorm` parameters (`params["params"]["obs_norm"]`: `mean`,
  `var`, `count`), merged with each rollout's observations after the update (the rollout and
  every epoch of its update see the same statistics, so the first epoch's ratio is exactly 1).
- Rewards: PureJaxRL's `NormalizeVecReward`: each env's running discounted return
  `R_t = gamma R_{t-1} + r_t` (restarted after an episode ends) feeds a running variance, and
  rewards are divided by its standard deviation (not centred: centring would change the
  optimal policy's incentives to end or prolong episodes).
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp

EPS = 1e-8
INITIAL_COUNT = 1e-4  # as gym's and PureJaxRL's RunningMeanStd: the first batch all but replaces the prior


def _batch_moments(x, axes, axis_name):
    """(count, mean, var) of `x` over `axes`, across devices when `axis_name` is given."""
    count = jnp.asarray(jnp.prod(jnp.asarray([x.shape[a] for a in axes])), jnp.float32)
    total, total_sq = jnp.sum(x, axis=axes), jnp.sum(jnp.square(x), axis=axes)
    if axis_name is not None:
        count, total, total_sq = jax.lax.psum((count, total, total_sq), axis_name)
    mean = total / count
    return count, mean, jnp.maximum(total_sq / count - jnp.square(mean), 0.0)


def merge(mean, var, count, batch_mean, batch_var, batch_count):
    """Chan et al.'s parallel merge of two (mean, var, count) summaries (gym's RunningMeanStd)."""
    total = count + batch_count
    delta = batch_mean - mean
    new_mean = mean + delta * batch_count / total
    m2 = var * count + batch_var * batch_count + jnp.square(delta) * count * batch_count / total
    return new_mean, m2 / total, total


def update_obs_norm(params, obs, axis_name: str | None = None):
    """`params` with its `obs_norm` statistics merged with `obs` ([steps, envs, *obs_shape])."""
    stats = params["params"]["obs_norm"]
    count, mean, var = _batch_moments(obs.astype(jnp.float32), (0, 1), axis_name)
    new_mean, new_var, new_count = merge(stats["mean"], stats["var"], stats["count"], mean, var, count)
    inner = {**params["params"], "obs_norm": {"mean": new_mean, "var": new_var, "count": new_count}}
    return {**params, "params": inner}


@flax.struct.dataclass
class RewardNorm:
    discounted_return: jax.Array  # [num_envs]: each env's running discounted return
    var: jax.Array  # running variance of the discounted returns (their mean is tracked for the merge)
    mean: jax.Array
    count: jax.Array


def init_reward_norm(num_envs: int) -> RewardNorm:
    zero = jnp.zeros((), jnp.float32)
    return RewardNorm(jnp.zeros((num_envs,), jnp.float32), jnp.ones((), jnp.float32), zero, zero + INITIAL_COUNT)


def scale_rewards(norm: RewardNorm, rewards, dones, gamma: float, axis_name: str | None = None):
    """(rewards / std of the discounted return, updated RewardNorm) for a rollout's
    `rewards` and `dones` ([steps, envs]); the statistics include this rollout's returns."""

    def step(ret, x):
        reward, done = x
        ret = gamma * ret + reward
        return jnp.where(done, 0.0, ret), ret

    carry, returns = jax.lax.scan(step, norm.discounted_return, (rewards, dones))
    count, mean, var = _batch_moments(returns, (0, 1), axis_name)
    new_mean, new_var, new_count = merge(norm.mean, norm.var, norm.count, mean, var, count)
    scaled = rewards / jnp.sqrt(new_var + EPS)
    return scaled, RewardNorm(carry, new_var, new_mean, new_count)
