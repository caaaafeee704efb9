"""How far a policy has moved from where it started: the KL divergence from the initial policy
and from the policy of the previous evaluation, averaged over a fixed set of held-out states.
Evaluation along training (run/along.py) logs both; d = sqrt(KL to the initial policy) is the
distance Gao, Schulman and Hilton (ICML 2023) fit the true objective against.

- `PolicyAnchors`: the policy's parameters at update 0 and at the last evaluation, kept in the
  learner state (so in every checkpoint) when evaluation along training is on, None otherwise.
- `held_out_states`: the states the initial policy visits, sampling its actions, in worlds no
  training env uses (envs reset from a key of their own, `held_out_key`): a function of the
  seed and the initial parameters alone, so a resumed run regenerates the same states.
- `distance_program`: KL(pi || pi_initial) and KL(pi || pi_previous), each the mean over the
  held-out states of the policy distribution's own KL (`ppo.policies`: the masked categorical,
  the diagonal Gaussian, squashed or not). A recurrent policy runs over the held-out sequences
  from its zero state, each of the three policies with its own memory.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, NamedTuple

import flax.struct
import jax
import jax.numpy as jnp

from ppo_lab.ppo.rollout import action_policy, batched_mask, batched_reset, batched_step, episode_ended, initial_memory, rollout

# The held-out worlds' key: the seed's key folded with this, which no training env's key is.
HELD_OUT_SALT = 0x4E1D
# Held-out states are sampled from this many envs at most, over as many steps as it takes.
HELD_OUT_ENVS = 64


@flax.struct.dataclass
class PolicyAnchors:
    """The parameters the policy's distance is measured from (each a copy of `params`' tree)."""
    initial: Any  # at update 0
    previous: Any  # at the last evaluation along training (update 0's until the first one after it)


class HeldOut(NamedTuple):
    """Held-out states as sequences [steps, envs, ...] of the initial policy's rollout."""
    obs: Any
    mask: Any  # [steps, envs, actions] the valid actions (None: the env has no mask)
    reset: jax.Array  # [steps, envs] a recurrent state is zeroed before this step (the previous one ended an episode)


def held_out_key(seed: int) -> jax.Array:
    return jax.random.fold_in(jax.random.PRNGKey(seed), HELD_OUT_SALT)


def held_out_shape(count: int) -> tuple[int, int]:
    """(steps, envs) of a rollout with at least `count` states."""
    envs = min(count, HELD_OUT_ENVS)
    return math.ceil(count / envs), envs


def held_out_program(env, env_params, network, dist, count: int, env_params_arg=None):
    """`held_out_states(initial_params, key) -> HeldOut`, jitted once for every seed. An env outside JAX
    (EnvPool, Gymnasium) samples them on envs of its own (`env.for_evaluation()`); an env whose
    params are data takes them as the program's argument (`env_params_arg`)."""
    steps, envs = held_out_shape(count)
    env = env.for_evaluation()

    def held_out_states(params, key, env_params=env_params):  # named so: its program is jit(held_out_states)
        reset_key, run_key = jax.random.split(key)
        obs, env_state = batched_reset(env, env_params, reset_key, envs)

        def record(stats, step):
            return stats, (step.obs, step.mask, episode_ended(step.terminated, step.truncated))

        out = rollout(batched_step(env, env_params, envs), action_policy(network, params, False, dist), env_state, obs,
                      run_key, steps, record=record, action_mask=batched_mask(env, env_params),
                      memory=initial_memory(network, envs))
        obs, mask, ended = out.records
        return HeldOut(obs, mask, jnp.concatenate([jnp.zeros_like(ended[:1]), ended[:-1]]))

    program = jax.jit(held_out_states)
    return program if env_params_arg is None else partial(program, env_params=env_params_arg)


def policy_outputs(network, params, held: HeldOut):
    """The policy's outputs ([steps, envs, ...] leaves) on the held-out states."""
    steps, envs = held.reset.shape
    if network.recurrent:
        _, out, _ = network.apply(params, held.obs, network.initial_carry(envs), held.reset)
        return out
    out, _ = network.apply(params, held.obs.reshape((steps * envs,) + held.obs.shape[2:]))
    return jax.tree.map(lambda x: x.reshape((steps, envs) + x.shape[1:]), out)


def distance_program(network, dist, count: int):
    """`policy_distances(params, anchors, held) -> (KL from the initial policy, KL from the previous
    evaluation's)`, each the mean over the first `count` held-out states (time-major), jitted."""

    def mean_kl(now, then, held: HeldOut):
        kl = dist.kl(now, then, held.mask).reshape(-1)  # [steps * envs], time-major
        return jnp.mean(kl[:count])

    def policy_distances(params, anchors: PolicyAnchors, held: HeldOut):  # its program: jit(policy_distances)
        now = policy_outputs(network, params, held)
        return (mean_kl(now, policy_outputs(network, anchors.initial, held), held),
                mean_kl(now, policy_outputs(network, anchors.previous, held), held))

    return jax.jit(policy_distances)
