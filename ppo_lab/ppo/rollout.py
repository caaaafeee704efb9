"""The one rollout loop: a policy acting in an env for a fixed number of steps, in `lax.scan`.

The trainer, the final evaluation, an env's own evaluation protocols, replay, and the
benchmark all run this loop; what differs between them is passed in:
- `env_step(key, env_state, action) -> (obs, env_state, reward, terminated, truncated, info)`:
  usually `batched_step` (gymnax's `step`, auto-reset included, over a batch of envs); the
  survival protocol and replay pass their own;
- `policy(obs, key, mask) -> (action, extras)`: sampled or greedy, over a network's `apply`
  (`extras`, e.g. the log-prob and value, reach `record`); `mask` is the batch's valid
  actions (bool `[..., num_actions]`) when the env has a mask, else None;
- `action_mask(env_state) -> mask` (optional): usually `batched_mask`, for an env that
  exposes `action_mask(state, params)`; the mask of the state each action is taken in
  reaches the policy and `record` (`Step.mask`);
- `record(stats, step) -> (stats, out)`: what the caller keeps. `stats` is carried from step
  to step (running returns, counters); `out` is stacked over the steps (transitions, frames).

A recurrent policy also carries `memory = (state, reset)`: its recurrent state and, per env,
whether the previous step ended an episode (terminated or truncated), so the policy zeroes the
state before acting there. `rollout(..., memory=initial_memory(network, n))` calls
`policy(obs, key, mask, memory) -> (action, extras, state)` and hands back the memory after
the last step (`Rollout.memory`); without `memory`, policies are feed-forward as above.

Keys: one key is carried and split three ways every step (next carried key, the policy's key,
the env's key), so a rollout is a pure function of its starting key.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from ppo_lab.ppo.distributions import allow_all_if_none_valid
from ppo_lab.ppo.policies import categorical


class Step(NamedTuple):
    """One step as `record` sees it."""
    obs: Any  # what the policy saw
    action: Any
    extras: Any  # the policy's other outputs
    next_obs: Any
    reward: Any
    terminated: Any
    truncated: Any
    info: Any
    mask: Any = None  # the valid actions at `obs` (None: the env has no mask)


class Rollout(NamedTuple):
    env_state: Any  # where the rollout stopped
    obs: Any
    stats: Any  # `record`'s carried statistics after the last step
    key: Any  # the carried key, to continue from
    records: Any  # `record`'s per-step outputs, stacked (leading axis: steps)
    memory: Any = None  # a recurrent policy's (state, reset) after the last step; None: feed-forward


def batched_step(env, env_params, num_envs: int) -> Callable:
    """`env.step` over `num_envs` envs, one key each split from the step's key. A batched env
    (`env.batched`: EnvPool, Gymnasium; `ppo_lab.envs.base.Env`) steps the whole batch itself."""
    if env.batched:
        return lambda key, env_state, action: env.step_batch(key, env_state, action, env_params)
    vstep = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def step(key, env_state, action):
        return vstep(jax.random.split(key, num_envs), env_state, action, env_params)

    return step


def batched_mask(env, env_params) -> Callable | None:
    """`mask(env_state)`: `env.action_mask` over a batch of envs (a state with no valid action
    allows every action, see `distributions.allow_all_if_none_valid`); None for an env without
    a mask."""
    if not env.has_action_mask:
        return None

    vmask = jax.vmap(env.action_mask, in_axes=(0, None))
    return lambda env_state: allow_all_if_none_valid(vmask(env_state, env_params))


def batched_reset(env, env_params, key, num_envs: int):
    """`(obs, env_state)` of `num_envs` envs, one key each split from `key`."""
    if env.batched:
        return env.reset_batch(key, env_params, num_envs)
    return jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key, num_envs), env_params)


def episode_ended(terminated, truncated):
    """terminated or truncated (an env that never truncates may pass None)."""
    return terminated if truncated is None else jnp.logical_or(terminated, truncated)


def initial_memory(network, num_envs: int):
    """A recurrent network's memory at the start of `num_envs` episodes (zero state, no reset
    pending); None for a feed-forward network."""
    if not network.recurrent:
        return None
    return network.initial_carry(num_envs), jnp.zeros((num_envs,), bool)


def policy_and_value(network, params, obs, memory=None, extra_obs=None):
    """The network's one call per step, for training, evaluation, replay and the benchmark: the
    policy output and values of a batch `obs` [B, ...] (`networks.PolicyValue`); a recurrent
    network steps from `memory = (state, reset)` and hands back its new state (`.carry`);
    `extra_obs`: their values too, in the same pass (the truncation bootstrap)."""
    return network.apply(params, obs, memory, extra_obs, method="policy_and_value")


def value_of(network, params, obs, memory=None):
    """The values [B] of a batch of observations (a recurrent network: one step from `memory`)."""
    if memory is None:
        return network.apply(params, obs, method="value")
    return network.apply(params, obs, *memory, method="step_value")


def rollout(env_step: Callable, policy: Callable, env_state, obs, key, num_steps: int, *,
            record: Callable, stats=(), action_mask: Callable | None = None, memory=None) -> Rollout:
    """Run `num_steps` steps from `(env_state, obs)`; see the module docstring."""

    def body(carry, _):
        env_state, obs, stats, key, memory = carry
        key, policy_key, env_key = jax.random.split(key, 3)
        mask = None if action_mask is None else action_mask(env_state)
        if memory is None:
            action, extras = policy(obs, policy_key, mask)
        else:
            action, extras, state = policy(obs, policy_key, mask, memory)
        next_obs, env_state, reward, terminated, truncated, info = env_step(env_key, env_state, action)
        if memory is not None:
            memory = (state, episode_ended(terminated, truncated))
        stats, out = record(stats, Step(obs, action, extras, next_obs, reward, terminated, truncated, info, mask))
        return (env_state, next_obs, stats, key, memory), out

    (env_state, obs, stats, key, memory), records = jax.lax.scan(body, (env_state, obs, stats, key, memory), None, num_steps)
    return Rollout(env_state, obs, stats, key, records, memory)


def action_policy(network, params, deterministic, dist=None) -> Callable:
    """`policy(obs, key, mask=None) -> (actions, policy output)`: greedy (argmax, or a Gaussian's
    mean), or a sample, in the form the env takes (`ppo.policies`: clipped or squashed); never
    an action the mask forbids. `dist`: the env's `ppo.policies.for_env` (None: categorical).
    For a recurrent network, `policy(obs, key, mask, memory) -> (actions, policy output, state)`
    (see `rollout`): one function for both, over `policy_and_value`. `deterministic`: a Python
    bool (the program holds one of the two), or a traced one (both, one selected: one program
    serves greedy and sampled play, with the numbers of either alone)."""
    dist = dist or categorical(network.action_dim)

    def choose(out, key, mask):
        if isinstance(deterministic, bool):
            action = dist.greedy(out, mask) if deterministic else dist.sample(key, out, mask)
        else:
            action = jnp.where(deterministic, dist.greedy(out, mask), dist.sample(key, out, mask))
        return dist.env_action(action)

    def policy(obs, key, mask=None, memory=None):
        net = policy_and_value(network, params, obs, memory)
        action = choose(net.policy, key, mask)
        return (action, net.policy) if memory is None else (action, net.policy, net.carry)

    return policy
