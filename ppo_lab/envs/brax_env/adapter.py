"""Brax environments behind the gymnax 1.0 API (`env=brax env.id=<name>`).

`brax.envs.get_environment(env.id, backend=env.backend)`, wrapped in Brax's own
`EpisodeWrapper` (the time limit `env.max_steps`), and nothing else: the auto-reset is done
here, the gymnax way, so that the lab's truncation bootstrap sees each ending once:
- `terminated` = Brax's `done` where the time limit did not cause it (the pendulum fell, the
  ant flipped): no bootstrap;
- `truncated` = `EpisodeWrapper`'s `info["truncation"]` (the limit was reached in a state that
  is not terminal): the trainer adds gamma x V(final observation);
- `info["final_observation"]` = the observation the episode ended on; the returned observation
  is the next episode's first (a fresh reset where the episode ended).
Brax's `AutoResetWrapper` is not used: it would reset inside Brax's state and return the reset
observation as the step's, leaving no final observation to bootstrap from.

Actions are in [-1, 1] per dimension (Brax's convention); the policy's Gaussian sample is
clipped there (or squashed, `network.squash=tanh`). Imports brax (and jax) at its top: loaded
only through `conf/env/brax.yaml`'s `_target_`, after `ppo_lab.hardware.start_jax`.
"""

from __future__ import annotations

from typing import Mapping

import brax.envs
import flax.struct
import jax
import jax.numpy as jnp
from brax.envs.wrappers.training import EpisodeWrapper

from ppo_lab.envs.base import Env
from ppo_lab.envs.gymnax_api import spaces
from ppo_lab.envs.brax_env.config import check_config
from ppo_lab.errors import ConfigError


@flax.struct.dataclass
class BraxParams:
    max_steps_in_episode: int = flax.struct.field(pytree_node=False, default=1000)


class BraxEnv(Env):
    """One Brax env (unbatched), speaking gymnax 1.0's `reset` and six-value `step`."""

    def __init__(self, env, env_id: str, max_steps: int):
        self.env = EpisodeWrapper(env, episode_length=max_steps, action_repeat=1)
        self.name = env_id
        self.num_actions = env.action_size
        # Brax's `observation_size` runs a reset eagerly, op by op: about a hundred small
        # compiles (inverted_pendulum: 2.0 s of CPU, against 0.15 s for this trace of its shape).
        self.obs_size = jax.eval_shape(env.reset, jax.random.PRNGKey(0)).obs.shape[-1]

    @property
    def default_params(self) -> BraxParams:
        return BraxParams()

    def reset(self, key, params=None):
        state = self.env.reset(key)
        return state.obs, state

    def step(self, key, state, action, params=None):
        next_state = self.env.step(state, action)
        done = next_state.done > 0.5
        truncated = next_state.info["truncation"] > 0.5
        terminated = jnp.logical_and(done, jnp.logical_not(truncated))
        reset_state = self.env.reset(key)
        # A fresh episode where this one ended (all of Brax's state, the wrapper's counters included).
        state = jax.tree.map(lambda fresh, kept: jnp.where(done, fresh, kept), reset_state, next_state)
        info = {"final_observation": next_state.obs}
        return state.obs, state, next_state.reward, terminated, truncated, info

    def action_space(self, params=None):
        return spaces.Box(low=-1.0, high=1.0, shape=(self.num_actions,), dtype=jnp.float32)

    def observation_space(self, params=None):
        return spaces.Box(low=-jnp.inf, high=jnp.inf, shape=(self.obs_size,), dtype=jnp.float32)


def build(env_cfg: Mapping, reward_cfg: Mapping, *, privileged_critic: bool = False):
    check_config(env_cfg, reward_cfg)
    env_id = env_cfg["id"]
    valid = sorted(brax.envs._envs)  # Brax's registry (name -> class); get_environment raises a bare KeyError
    if env_id not in valid:
        raise ConfigError("env.id", env_id, f"a Brax environment name, one of {valid}")
    env = BraxEnv(brax.envs.get_environment(env_id, backend=env_cfg["backend"]), env_id, env_cfg["max_steps"])
    return env, BraxParams(max_steps_in_episode=env_cfg["max_steps"])
