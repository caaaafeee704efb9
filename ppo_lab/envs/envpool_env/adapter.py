"""EnvPool's C++ environments inside the jitted rollout: `env=envpool env.id=CartPole-v1`.

EnvPool steps a whole pool of envs in C++ threads (`env.num_threads`, null: all cores) and
offers an XLA interface (`pool.xla()`: a `jax.ffi` call that sends the actions and receives the
results), so the trainer's `lax.scan` steps it like any JAX env. The env is a *batched* env
(`ppo_lab.ppo.rollout.batched_step`): it has `reset_batch` and `step_batch` over a whole batch
of envs instead of gymnax's per-env `reset` / `step`.

Pools, seeds and devices. The FFI call names its C++ pool by a constant baked into the compiled
program, so the pool cannot be chosen per vmapped replica, and it has no vmap rule of its own.
`step_batch` therefore carries one (`jax.custom_batching.custom_vmap`): under `vmap` over
R seeds of n envs it steps ONE pool of R x n envs and slices its results per seed (seed r
owns envs r*n .. r*n+n-1). Across devices (`place`: the run's layout, seeds or one seed's envs
split over a `shard_map` mesh) every device steps a pool of its own: the one compiled program
picks it with `lax.switch` on the device's index along the mesh axis. Env k of device d's pool
of size m is seeded `env.seed` + d*m + k, so a seed's envs are seeded the same on any number of
devices. Pools are made on first use, one per (device, batch size), when the step is traced
(`custom_vmap` also traces the unbatched step, which makes an idle pool of n envs per device
beside the one of R x n). Evaluation uses its own pool (`for_evaluation`), reset on the host at
the start of every evaluation.

Auto-reset. EnvPool resets an env on the step AFTER its episode ended: that step ignores the
action and returns the first observation of the next episode with reward 0, not done, and
`elapsed_step` 0. The lab's semantics map onto it so that nothing is counted twice:
- the step that ends an episode returns EnvPool's terminated / truncated (a time limit is
  `truncated`, bootstrapped with the value of `final_observation`, the episode's last
  observation, as for every env here); its next observation is that same last observation;
- the reset step that follows is flagged `info["resetting"]`: the trainer counts it in no
  episode (neither length nor return; its reward is 0) and gives it weight 0 in the update
  (`ppo_lab.ppo.train`), since its action did nothing;
- a pool that was just created starts with a reset step (a new pool's envs are all "done"),
  so training starts, and a resumed run restarts, with every env resetting: the C++ state of
  the envs cannot be checkpointed, so a resumed run re-creates its envs (fresh episodes) while
  its metric rows, counters and learner state carry on exactly.

Actions: Discrete (the categorical policy) or a float32 Box (the Gaussian). EnvPool's MuJoCo
tasks take float64 arrays through the XLA call, which JAX in float32 cannot pass: refused, with
Gymnasium's MuJoCo (`experiment=halfcheetah`) or Brax named instead.

Observations: uint8 images come out as float32 in [0, 1] (`env.image_scale`) and channels
last (EnvPool's Atari and Procgen frames are channels first), other observations as float32.
"""

from __future__ import annotations

import difflib
import os
from typing import Mapping

import envpool
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jax.experimental import io_callback
from gymnasium import spaces as gym_spaces

from ppo_lab.envs.env_section import refuse_privileged_critic
from ppo_lab.envs.envpool_env.config import check_config
from ppo_lab.envs.host_batched_env import EVAL_SEED_OFFSET, HostBatchedEnv
from ppo_lab.errors import ConfigError


@struct.dataclass
class EnvPoolState:
    # EnvPool's handle (the bytes of its pool pointer). The FFI call takes the pool from a
    # constant of the compiled program; this array only orders the calls (each returns it).
    handle: jax.Array


class EnvPoolEnv(HostBatchedEnv):
    """A pool of EnvPool envs behind the lab's batched-env API; see the module docstring."""

    def __init__(self, task_id: str, *, num_threads: int | None, seed: int, make_kwargs: Mapping,
                 image_scale: bool, reset_on_host: bool = False):
        self.task_id, self.seed, self.make_kwargs = task_id, seed, dict(make_kwargs)
        self.num_threads = num_threads or os.cpu_count() or 1
        self.image_scale, self.reset_on_host = image_scale, reset_on_host
        try:
            spec = envpool.make_spec(task_id, **self.make_kwargs)
        except (TypeError, ValueError, AssertionError) as exc:
            raise ConfigError("env.make_kwargs", self.make_kwargs, f"keyword arguments {task_id} accepts ({exc})") from exc
        obs_space, action_space = spec.gymnasium_observation_space, spec.gymnasium_action_space
        if not isinstance(obs_space, gym_spaces.Box):
            raise ConfigError("env.id", task_id, f"an EnvPool task with one array observation (not {obs_space})")
        if not isinstance(action_space, (gym_spaces.Discrete, gym_spaces.Box)):
            raise ConfigError("env.id", task_id, f"an EnvPool task with Discrete or Box actions (not {action_space})")
        wide = [what for what, dtype in (("actions", action_space.dtype), ("observations", obs_space.dtype))
                if np.dtype(dtype) == np.float64]
        if wide:
            # EnvPool's XLA call takes and gives float64 arrays here (its MuJoCo tasks): JAX in this
            # lab runs with jax_enable_x64 off, so it cannot hand them over.
            raise ConfigError("env.id", task_id, f"an EnvPool task whose {' and '.join(wide)} are not float64 (EnvPool's "
                              "XLA interface passes this task's as float64, which JAX here, in float32, cannot): "
                              "for MuJoCo use experiment=halfcheetah (Gymnasium's MuJoCo) or env=brax")
        self.take_action_space(action_space, continuous=isinstance(action_space, gym_spaces.Box))
        self.max_episode_steps = int(spec.config.max_episode_steps)
        self._raw_shape, self._raw_dtype = tuple(obs_space.shape), np.dtype(obs_space.dtype)
        self._image = len(self._raw_shape) == 3
        self._obs_shape = self._raw_shape[1:] + self._raw_shape[:1] if self._image else self._raw_shape
        self._pools: dict[tuple[int, int], tuple] = {}  # (device, batch size) -> (pool, xla step)
        self._step = self._make_step()

    @property
    def name(self) -> str:
        return f"EnvPool/{self.task_id}"

    def for_evaluation(self) -> "EnvPoolEnv":
        """The same task with pools of its own, seeded apart and reset on the host by
        `reset_batch`, so every evaluation starts fresh episodes and never touches training's envs."""
        return EnvPoolEnv(self.task_id, num_threads=self.num_threads, seed=self.seed + EVAL_SEED_OFFSET,
                          make_kwargs=self.make_kwargs, image_scale=self.image_scale, reset_on_host=True)

    # ---- pools ---------------------------------------------------------------------------
    def pool(self, size: int, device: int = 0):
        """`(pool, xla step)` of `size` envs for `device`, made on first use (when a step is traced)."""
        if (device, size) not in self._pools:
            pool = envpool.make_gymnasium(self.task_id, num_envs=size, batch_size=size, seed=self.seed + device * size,
                                          num_threads=min(self.num_threads, size), **self.make_kwargs)
            self._pools[device, size] = (pool, pool.xla()[3])
        return self._pools[device, size]

    def _observe(self, raw):
        obs = raw.astype(jnp.float32)
        if self.image_scale and self._raw_dtype == np.uint8:
            obs = obs / 255.0
        return jnp.moveaxis(obs, -3, -1) if self._image else obs

    def _call(self, handle, action):
        """One step of this device's pool of `len(action)` envs, results in env order."""
        if self.num_devices == 1:
            return self._call_on(0, handle, action)
        branches = [lambda h, a, d=d: self._call_on(d, h, a) for d in range(self.num_devices)]
        return jax.lax.switch(jax.lax.axis_index(self.axis_name), branches, handle, action)

    def _call_on(self, device: int, handle, action):
        _, xla_step = self.pool(action.shape[0], device)
        action = action.astype(self._action_space.dtype if self.continuous else jnp.int32)
        handle, (obs, reward, terminated, truncated, info) = xla_step(handle, action)
        order = jnp.argsort(info["env_id"])  # sync mode returns env order; sorting makes sure
        take = lambda x: jnp.asarray(x)[order]  # noqa: E731
        return (handle, self._observe(take(obs)), take(reward).astype(jnp.float32), take(terminated).astype(bool),
                take(truncated).astype(bool), take(info["elapsed_step"]) == 0)

    def _make_step(self):
        """`step(handle, actions [n]) -> (handle, obs, reward, terminated, truncated, resetting)`,
        whose vmap over R replicas steps one pool of R x n envs (module docstring)."""
        step = jax.custom_batching.custom_vmap(self._call)

        @step.def_vmap
        def _one_pool(axis_size, in_batched, handle, action):
            handle = handle[0] if in_batched[0] else handle
            if not in_batched[1]:
                action = jnp.broadcast_to(action, (axis_size,) + action.shape)
            out = self._call(handle, action.reshape((-1,) + action.shape[2:]))
            per_replica = [x.reshape((axis_size, -1) + x.shape[1:]) for x in out[1:]]
            handle = jnp.broadcast_to(out[0], (axis_size,) + out[0].shape)
            return (handle, *per_replica), (True,) * len(out)

        return step

    # ---- the batched gymnax API ----------------------------------------------------------
    def reset_batch(self, key, params, num_envs: int):
        """`(obs [n, ...], state)`. Training: zeros, and the pool's first step resets every env
        (flagged `resetting`). Evaluation (`reset_on_host`): the pool reset now, on the host."""
        handle = jnp.zeros((8,), jnp.uint8)
        if not self.reset_on_host:
            return jnp.zeros((num_envs,) + self._obs_shape, jnp.float32), EnvPoolState(handle)
        shapes = (jax.ShapeDtypeStruct((num_envs,) + self._raw_shape, self._raw_dtype), jax.ShapeDtypeStruct((8,), jnp.uint8))
        # The handle comes out of the callback so that the pool's steps follow its reset.
        obs, handle = io_callback(lambda: self._host_reset(num_envs), shapes, ordered=False)
        return self._observe(obs), EnvPoolState(handle)

    def _host_reset(self, num_envs: int):
        pool, _ = self.pool(num_envs)
        obs, info = pool.reset()
        return np.asarray(obs)[np.argsort(info["env_id"])].astype(self._raw_dtype), np.zeros((8,), np.uint8)

    def step_batch(self, key, state: EnvPoolState, action, params=None):
        handle, obs, reward, terminated, truncated, resetting = self._step(state.handle, action)
        info = {"final_observation": obs, "resetting": resetting}
        return obs, EnvPoolState(handle), reward, terminated, truncated, info


def build(env_cfg: Mapping, reward_cfg: Mapping, *, privileged_critic: bool = False):
    """`(env, EnvParams)` for `env=envpool env.id=<task>`; ConfigError on bad values, before
    any compile (an unknown id lists the nearest known ones)."""
    c = check_config(env_cfg, reward_cfg)
    refuse_privileged_critic(privileged_critic, "EnvPool tasks have no privileged observation")
    known = envpool.list_all_envs()
    if c["id"] not in known:
        near = difflib.get_close_matches(c["id"], known, n=8, cutoff=0.5)
        raise ConfigError("env.id", c["id"], f"an EnvPool task id; nearest: {near}" if near else
                          f"an EnvPool task id (envpool.list_all_envs(): {len(known)} tasks)")
    env = EnvPoolEnv(c["id"], num_threads=c["num_threads"], seed=c["seed"], make_kwargs=c["make_kwargs"],
                     image_scale=c["image_scale"])
    return env, env.default_params
