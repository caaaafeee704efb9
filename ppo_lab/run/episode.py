"""One episode of a trained policy in one env, played for a replay: the generic driver.

The policy is the trainer's and the evaluation's (`ppo.rollout.action_policy`: argmax or a
sample, never a masked action), run for a batch of one env inside one jitted rollout
(`ppo.rollout.rollout`). The env steps with gymnax's `step_env`, the step without its
auto-reset, so the last frame shows the state the episode really ended in. What comes back is
an `envs.base.Episode` on the host, cut where the episode ended: the env draws it
(`Env.render_episode`).
"""

from __future__ import annotations

from typing import Any, Mapping

import jax
import numpy as np

from ppo_lab.envs.base import Episode
from ppo_lab.ppo.distributions import allow_all_if_none_valid
from ppo_lab.ppo.rollout import action_policy, initial_memory, rollout

REPLAY_KEY_SALT = 0x4E9A


def replay_key(seed: int, episode: int):
    """The key of episode `episode` of seed `seed`: a replay is a pure function of the two."""
    return jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(seed), REPLAY_KEY_SALT), episode)


def _one_env_policy(network, params, deterministic: bool, dist):
    """`action_policy` for one unbatched env: a batch of one for the network, and the policy's
    action probabilities (a discrete env; None otherwise) as what `record` sees."""
    policy = action_policy(network, params, deterministic, dist)

    def probs(out):
        return None if dist.continuous else jax.nn.softmax(out[0])

    def one(obs, key, mask=None, memory=None):
        mask = None if mask is None else mask[None]
        if memory is None:
            action, out = policy(obs[None], key, mask)
            return action[0], probs(out)
        # A recurrent agent's state carried from frame to frame; its reset flag a scalar, as the env's done.
        action, out, carry = policy(obs[None], key, mask, (memory[0], memory[1][None]))
        return action[0], probs(out), carry

    return one


def play(env, env_params, network, dist, params, key, num_steps: int, deterministic: bool) -> dict:
    """`num_steps` steps from a reset, whether or not the episode ends before (the host cuts
    it): the first state, each step's outputs stacked, and the policy at the last state."""
    action_mask = (lambda s: allow_all_if_none_valid(env.action_mask(s, env_params))) if env.has_action_mask else None

    def env_step(k, state, action):
        obs, state, reward, done, info = env.step_env(k, state, action, env_params)
        return obs, state, reward, done, None, {"info": info, "state": state}

    def record(_, step):
        return (), dict(probs=step.extras, action=step.action, reward=step.reward, done=step.terminated, **step.info)

    @jax.jit
    def run(p, key):
        reset_key, key = jax.random.split(key)
        obs, state = env.reset_env(reset_key, env_params)
        memory = initial_memory(network, 1)
        if memory is not None:
            memory = (memory[0], memory[1][0])
        policy = _one_env_policy(network, p, deterministic, dist)
        out = rollout(env_step, policy, state, obs, key, num_steps, record=record, action_mask=action_mask, memory=memory)
        mask = None if action_mask is None else action_mask(out.env_state)
        last = policy(out.obs, key, mask, out.memory)
        return state, out.records, last[1]

    first, steps, last_probs = jax.device_get(run(params, key))
    return {"first": first, "steps": steps, "last_probs": last_probs}


def _ending(done: np.ndarray, num_steps: int, cap: int | None) -> tuple[int, str]:
    """How many steps the episode took, and how it ended (`Episode.ending`)."""
    ended = np.flatnonzero(done)
    if ended.size:
        return int(ended[0]) + 1, "ended"
    return num_steps, "truncated" if cap is not None and num_steps >= cap else "stopped"


def episode(env, env_params, run_params, network, dist, params, key, num_steps: int, deterministic: bool,
            labels: Mapping[str, Any]) -> Episode:
    """Play one episode of at most `num_steps` steps (see `play`) and cut it where it ended."""
    out = play(env, env_params, network, dist, params, key, num_steps, deterministic)
    steps = out["steps"]
    n, ending = _ending(np.asarray(steps["done"]), num_steps, env.episode_limit(env_params))
    cut = lambda tree: jax.tree.map(lambda x: np.asarray(x)[:n], tree)  # noqa: E731
    states = jax.tree.map(lambda first, rest: np.concatenate([np.asarray(first)[None], np.asarray(rest)[:n]]),
                          out["first"], steps["state"])
    probs = None  # the policy at frame k: what step k + 1 chose from, the last frame's played after the rollout
    if not dist.continuous:
        probs = np.concatenate([np.asarray(steps["probs"]), np.asarray(out["last_probs"])[None]])[: n + 1]
    return Episode(states=states, actions=np.asarray(steps["action"])[:n], rewards=np.asarray(steps["reward"])[:n],
                   infos=cut(steps["info"]), action_probs=probs, ending=ending, step_cap=num_steps,
                   params=env_params, run_params=run_params, labels=dict(labels))
