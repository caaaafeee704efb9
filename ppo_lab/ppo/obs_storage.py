"""How the rollout stores observations for the update (`ppo.rollout_obs_dtype`).

The policy always acts on the env's float observation (rollouts and evaluation); what changes is
the copy kept for the gradient update:
- `float32`: as it is (the default);
- `uint8`: a quarter of the memory, for pixel-like observations. Cast as PyTorch's
  `uint8_tensor[i] = float_tensor` casts (the reference's rollout buffer,
  goodharts_law `goodharts/training/ppo/buffers.py` line 97, written in `trainer.py` lines 684
  and 729, read back with `.float()` at line 824): truncation toward zero, so 0.5 -> 0 and
  1.0 -> 1. Values outside [0, 255] saturate here (PyTorch leaves them undefined);
- `bfloat16`: half the memory, 8 bits of mantissa (exact for 0, 0.5, 1).

With a privileged critic (`actor_channels` set: the policy sees the first N channels) only the
policy's channels are cast; the critic's extra channels stay float32, as the reference kept its
critic's view in a separate float32 buffer. With `critic_from` the critic's channels are taken
from another observation (the one after the step: the reference's `get_critic_aux()` is read
after `vec_env.step`, `compilation.py` line 107 and `trainer.py` line 709).

The old policy's log-probs and values stay those the rollout computed on the float view.
`cast_stats` says whether the cast lost anything (the host logs it once, judging/health.py).
"""

from __future__ import annotations

import jax.numpy as jnp

from ppo_lab.config import ROLLOUT_OBS_DTYPES

DTYPES = dict(zip(ROLLOUT_OBS_DTYPES, (jnp.float32, jnp.uint8, jnp.bfloat16)))


def cast(x, dtype_name: str):
    """`x` in the storage dtype `dtype_name` (uint8: truncated toward zero, saturated)."""
    if dtype_name == "uint8":
        return jnp.clip(jnp.trunc(x), 0, 255).astype(jnp.uint8)
    return x.astype(DTYPES[dtype_name])


def store(obs, dtype_name: str, actor_channels: int | None = None, critic_from=None):
    """What the rollout keeps of `obs` (channels last) for the update: an array, or with
    `actor_channels` the pair (policy channels cast, critic channels float32); float32 with the
    critic's channels of this step is `obs` itself."""
    if actor_channels is None or (dtype_name == "float32" and critic_from is None):
        return obs if dtype_name == "float32" else cast(obs, dtype_name)
    critic = obs if critic_from is None else critic_from
    return cast(obs[..., :actor_channels], dtype_name), critic[..., actor_channels:].astype(jnp.float32)


def load(stored):
    """The float32 observation the update's network call sees."""
    if isinstance(stored, tuple):
        policy, critic = stored
        return jnp.concatenate([policy.astype(jnp.float32), critic], axis=-1)
    return stored.astype(jnp.float32)


def cast_stats(obs, stored, actor_channels: int | None = None):
    """(fraction of the cast values that changed, least and largest such value (NaN: none))
    over the policy's channels of one step's observations."""
    original = obs if actor_channels is None else obs[..., :actor_channels]
    kept = stored[0] if isinstance(stored, tuple) else stored
    lossy = original != kept.astype(original.dtype)
    frac = jnp.mean(lossy.astype(jnp.float32))
    any_lossy = jnp.any(lossy)
    lowest = jnp.where(any_lossy, jnp.min(jnp.where(lossy, original, jnp.inf)), jnp.nan)
    highest = jnp.where(any_lossy, jnp.max(jnp.where(lossy, original, -jnp.inf)), jnp.nan)
    return frac, lowest.astype(jnp.float32), highest.astype(jnp.float32)
