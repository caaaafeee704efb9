"""The policy's categorical distribution, with an optional mask of valid actions.

Every function takes `mask=None` (all actions valid: the plain categorical, bit for bit) or a
boolean array shaped like the logits, True where an action is valid. Invalid actions get the
logit `MASKED_LOGIT`, so they have probability exactly 0, are never sampled nor chosen
greedily, and the log-probabilities and entropy are those of the distribution renormalised
over the valid actions (as in MaskablePPO).

Why a large finite logit and not -inf: `exp(-1e9 - x)` is exactly 0 in float32, so nothing
changes numerically, but `-inf` turns `p * log p` into `0 * -inf = NaN` in the entropy and its
gradient, and `log p_new - log p_old` into `-inf + inf`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

MASKED_LOGIT = -1e9


def mask_logits(logits, mask=None):
    """Logits with invalid actions pushed to `MASKED_LOGIT` (unchanged when `mask` is None)."""
    if mask is None:
        return logits
    return jnp.where(mask, logits, jnp.asarray(MASKED_LOGIT, logits.dtype))


def categorical_log_prob(logits, actions, mask=None):
    """log pi(action) under the (masked, renormalised) categorical."""
    log_p = jax.nn.log_softmax(mask_logits(logits, mask))
    return jnp.take_along_axis(log_p, actions[..., None].astype(jnp.int32), axis=-1)[..., 0]


def categorical_entropy(logits, mask=None):
    """Entropy over the valid actions only (masked actions contribute exactly 0)."""
    log_p = jax.nn.log_softmax(mask_logits(logits, mask))
    p_log_p = jnp.exp(log_p) * log_p
    if mask is not None:
        # 0 * -1e9 is already 0; the where also keeps the gradient of masked terms exactly 0.
        p_log_p = jnp.where(mask, p_log_p, 0.0)
    return -jnp.sum(p_log_p, axis=-1)


def categorical_kl(logits_p, logits_q, mask=None):
    """KL(p || q) of two (masked, renormalised) categoricals over the last axis: sum over the
    valid actions of p (log p - log q); masked actions contribute exactly 0."""
    log_p = jax.nn.log_softmax(mask_logits(logits_p, mask))
    log_q = jax.nn.log_softmax(mask_logits(logits_q, mask))
    terms = jnp.exp(log_p) * (log_p - log_q)
    if mask is not None:
        terms = jnp.where(mask, terms, 0.0)
    return jnp.sum(terms, axis=-1)


def sample_action(key, logits, mask=None):
    """A sample from the (masked) policy: never an invalid action."""
    return jax.random.categorical(key, mask_logits(logits, mask))


def greedy_action(logits, mask=None):
    """The most probable valid action (argmax over the masked logits)."""
    return jnp.argmax(mask_logits(logits, mask), axis=-1)


def allow_all_if_none_valid(mask):
    """The mask, with every action allowed in a state that has no valid action at all.

    Some envs can reach such a state (Jumanji's Snake, boxed in by its own body: any move ends
    the episode); masking every action there would leave the policy no distribution to sample.
    Applied where the rollout reads the env's mask, so such steps are not counted as invalid."""
    return mask | ~jnp.any(mask, axis=-1, keepdims=True)


def invalid_fraction(actions, mask):
    """Share of `actions` that the `mask` (one row per action, last axis = actions) forbids."""
    valid = jnp.take_along_axis(mask, actions[..., None].astype(jnp.int32), axis=-1)[..., 0]
    return jnp.mean(jnp.logical_not(valid).astype(jnp.float32))
