"""Gradient clipping for the actor and the critic apart, as the reference clipped them.

`clip_policy_and_value(max_norm)` clips the policy's gradients (actor tower and policy head,
and a shared tower) to global norm `max_norm`, and the value function's (critic tower and
value head) to `max_norm` on their own. One global norm over everything lets a large value
error scale the policy's step down (or the other way round); apart, neither can.
"""

from __future__ import annotations

import jax
import optax

# Top-level parameter names (networks.ActorCritic) that belong to the value function (a
# recurrent critic's cell with separate towers and a value head's hidden layer included).
VALUE_MODULES = ("critic_torso", "critic_cell", "value_hidden", "value_head")


def param_group(name: str) -> str:
    return "value" if name in VALUE_MODULES else "policy"


def labels(params):
    """The same tree as `params` with each leaf labelled "policy" or "value" by the top-level
    module it sits under (flax params: {"params": {module: ...}})."""
    inner = params["params"] if "params" in params else params
    labelled = {name: jax.tree.map(lambda _, g=param_group(name): g, sub) for name, sub in inner.items()}
    return {"params": labelled} if "params" in params else labelled


def clip_policy_and_value(max_norm: float) -> optax.GradientTransformation:
    return optax.multi_transform(
        {"policy": optax.clip_by_global_norm(max_norm), "value": optax.clip_by_global_norm(max_norm)}, labels)
