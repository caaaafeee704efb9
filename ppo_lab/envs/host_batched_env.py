"""What envs stepped outside JAX (EnvPool's C++ pools, Gymnasium vector envs) show the trainer
alike: a batched env (`reset_batch` / `step_batch`, `ppo_lab.ppo.rollout.batched_step`) whose
spaces and time limit are read from the simulator once, when it is built.

A subclass sets `continuous`, `num_actions` (a Box's size when continuous), `_action_space`
(the simulator's Box, when continuous), `_obs_shape` and `max_episode_steps`.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ppo_lab.envs.base import Env
from ppo_lab.envs.gymnax_api import environment, spaces


class HostBatchedEnv(Env):
    batched = True  # steps whole batches: reset_batch / step_batch (ppo.rollout.batched_step)
    lives_outside_jax = True  # evaluates on a pool of its own: `for_evaluation()`

    @property
    def default_params(self) -> environment.EnvParams:
        return environment.EnvParams(max_steps_in_episode=self.max_episode_steps)

    def action_space(self, params=None):
        if self.continuous:
            box = self._action_space
            return spaces.Box(np.asarray(box.low, np.float32), np.asarray(box.high, np.float32), tuple(box.shape), jnp.float32)
        return spaces.Discrete(self.num_actions)

    def observation_space(self, params=None) -> spaces.Box:
        return spaces.Box(-jnp.inf, jnp.inf, self._obs_shape, jnp.float32)
