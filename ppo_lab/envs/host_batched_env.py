"""What envs stepped outside JAX (EnvPool's C++ pools, Gymnasium vector envs) show the trainer
alike: a batched env (`reset_batch` / `step_batch`, `ppo_lab.ppo.rollout.batched_step`) whose
spaces and time limit are read from the simulator once, when it is built.

A subclass takes the simulator's action space (`take_action_space`) and sets `_obs_shape` and
`max_episode_steps`; it keeps one simulator per device of the layout (`place`), and its
evaluation's simulators are seeded `EVAL_SEED_OFFSET` away from training's (other starts).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ppo_lab.envs.base import Env
from ppo_lab.envs.gymnax_api import environment, spaces


EVAL_SEED_OFFSET = 1 << 24


class HostBatchedEnv(Env):
    batched = True  # steps whole batches: reset_batch / step_batch (ppo.rollout.batched_step)
    lives_outside_jax = True  # evaluates on a pool of its own: `for_evaluation()`
    num_devices, axis_name = 1, None  # `place`

    def take_action_space(self, action_space, continuous: bool) -> None:
        """The simulator's action space: Discrete (`continuous` False) or a Box, its size `num_actions`."""
        self.continuous, self._action_space = continuous, action_space
        self.num_actions = int(np.prod(action_space.shape)) if continuous else int(action_space.n)
        self.action_names = None if continuous else [str(i) for i in range(self.num_actions)]

    def place(self, num_devices: int, axis_name: str) -> None:
        """A simulator per device of a `shard_map` over `num_devices` devices along `axis_name`
        (`ppo_lab.run.build`, from the run's layout); one device: one, no axis needed."""
        self.num_devices, self.axis_name = num_devices, axis_name

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
