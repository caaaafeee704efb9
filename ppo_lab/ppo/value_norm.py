"""PopArt value normalisation (van Hasselt et al., 2016), as the reference trained its critic.

The value head learns returns in normalised units, `v_norm`; the trainer reads values as
`mean + std * v_norm`. After each rollout the running statistics move toward the batch of
returns and the head's last layer is rescaled so its *denormalised* outputs stay exactly what
they were ("Preserving Outputs Precisely"); Adam's moments of that layer are rescaled with it,
so the next step is not thrown off by moments kept in the old units (the reference does both).
Returns that change scale as the agent improves (a forager that lives 10x longer earns 10x
more) then never leave the head chasing a moving target.

Statistics follow the reference's `PopArtValueHead.update_stats`: a count-based step
`beta = max(1 / count, beta_min)` (the first batch sets them outright), an EMA of the batch mean
and of the batch variance, std floored at 1e-4. Everything here is a pure function of arrays.
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import optax

STD_FLOOR = 1e-4


@flax.struct.dataclass
class PopArtStats:
    mean: jax.Array  # float32 scalar
    std: jax.Array
    count: jax.Array  # int32: updates so far


def init() -> PopArtStats:
    return PopArtStats(mean=jnp.zeros((), jnp.float32), std=jnp.ones((), jnp.float32),
                       count=jnp.zeros((), jnp.int32))


def denormalize(stats: PopArtStats, value_norm: jax.Array) -> jax.Array:
    return stats.mean + stats.std * value_norm


def normalize(stats: PopArtStats, value: jax.Array) -> jax.Array:
    return (value - stats.mean) / stats.std


def update(stats: PopArtStats, returns: jax.Array, beta_min: float) -> PopArtStats:
    """The statistics after one batch of returns."""
    count = stats.count + 1
    beta = jnp.maximum(1.0 / count.astype(jnp.float32), beta_min)
    batch_std = jnp.maximum(jnp.std(returns, ddof=1), STD_FLOOR)
    mean = (1.0 - beta) * stats.mean + beta * jnp.mean(returns)
    var = (1.0 - beta) * stats.std**2 + beta * batch_std**2
    return PopArtStats(mean=mean.astype(jnp.float32),
                       std=jnp.maximum(jnp.sqrt(var), STD_FLOOR).astype(jnp.float32), count=count)


def rescale_head(head: dict, old: PopArtStats, new: PopArtStats) -> dict:
    """The value head's last Dense layer (`kernel`, `bias`) so that
    `new.mean + new.std * head(x) == old.mean + old.std * old_head(x)` for every x."""
    scale = old.std / new.std
    return {"kernel": head["kernel"] * scale,
            "bias": head["bias"] * scale + (old.mean - new.mean) / new.std}


def rescale_adam_moments(opt_state: Any, head_path: tuple[str, ...], scale: jax.Array) -> Any:
    """Adam's first moments of the head times `scale`, second moments times `scale**2`
    (every `ScaleByAdamState` in the optimiser state, wherever a chain or wrapper put it)."""

    def fix(node):
        if not isinstance(node, optax.ScaleByAdamState):
            return node
        return node._replace(mu=_map_at(node.mu, head_path, lambda head: jax.tree.map(lambda x: x * scale, head)),
                             nu=_map_at(node.nu, head_path, lambda head: jax.tree.map(lambda x: x * scale**2, head)))

    return jax.tree.map(fix, opt_state, is_leaf=lambda n: isinstance(n, optax.ScaleByAdamState))


def _map_at(tree: dict, path: tuple[str, ...], fn) -> dict:
    """`tree` with its subtree at `path` replaced by `fn(subtree)`."""
    if not path:
        return fn(tree)
    head, *rest = path
    return {**tree, head: _map_at(tree[head], tuple(rest), fn)}


HEAD_PATH = ("params", "value_head")  # networks.ActorCritic's value head


def read(stats: PopArtStats | None, value_out: jax.Array) -> jax.Array:
    """The value in return units from the head's output (unchanged without PopArt)."""
    return value_out if stats is None else denormalize(stats, value_out)


def refit(stats: PopArtStats, params, opt_state, returns: jax.Array, old_values: jax.Array,
          beta_min: float, axis_name: str | None = None):
    """After GAE, before the epochs: move the statistics toward this batch of returns (over
    every device of `axis_name`, so replicas of one seed agree), rescale the head and its Adam
    moments, and express the loss's targets in the new units. Returns
    `(stats, params, opt_state, returns_norm, old_values_norm)`."""
    batch = returns.reshape(-1)
    if axis_name is not None:
        batch = jax.lax.all_gather(batch, axis_name).reshape(-1)
    new = update(stats, batch, beta_min)
    params = _map_at(params, HEAD_PATH, lambda head: rescale_head(head, stats, new))
    opt_state = rescale_adam_moments(opt_state, HEAD_PATH, stats.std / new.std)
    return new, params, opt_state, normalize(new, returns), normalize(new, old_values)
