"""Any Gymnasium env inside the jitted rollout: `env=gymnasium env.id=CartPole-v1` (a registered
id) or `env.id=my_package.envs.MyEnv` (the import path of an env class).

The envs run in Python, in a Gymnasium `SyncVectorEnv`, and the jitted rollout reaches them
through `jax.pure_callback`: every step leaves the compiled program for the host and comes back,
so this is much slower than a JAX env or EnvPool (measured in docs/performance.md, "Envs
outside JAX"); it is the way in for an env that exists only in Python. Like EnvPool's, the env
is a *batched* env (`reset_batch` / `step_batch`, `ppo_lab.ppo.rollout.batched_step`).

Seeds and devices: the callback is batched (`vmap_method="broadcast_all"`): under `vmap` over R
seeds of n envs it receives [R, n] actions and steps ONE vector env of R x n envs, so each seed
owns its slice. Across the devices of a `shard_map` (`place`), each device's call passes its
index along the mesh axis and steps a vector env of its own. Vector envs are made on first use,
one per (device, batch size); env k of device d's vector env of size m is seeded
`env.seed` + d*m + k. Evaluation uses vector envs of its own, reset at the start of every
evaluation.

Episodes: the vector env auto-resets in the same step (`AutoresetMode.SAME_STEP`): the step
that ends an episode returns the next episode's first observation, and the episode's last one
as `final_observation` (bootstrapped where the episode was truncated), exactly as gymnax's
`step` does. The first step of a run, and of a resumed run (the envs' Python state is not in
the checkpoint: a resumed run re-creates them, while rows, counters and learner state carry on
exactly), resets the vector env instead and is flagged `info["resetting"]`: it counts in no
episode and weighs nothing in the update (`ppo_lab.ppo.train`).

Spaces: a Box observation (as float32) and a Discrete (categorical policy) or Box (Gaussian
policy; actions handed over as the space's dtype) action space; anything else is refused (a
ConfigError) before compiling. MuJoCo: `experiment=halfcheetah` (needs `mujoco`, in the extras).
"""

from __future__ import annotations

import difflib
from typing import Callable, Mapping

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from ppo_lab import parts
from ppo_lab.envs.env_section import refuse_privileged_critic
from ppo_lab.envs.gymnasium_env.config import check_config
from ppo_lab.envs.host_batched_env import EVAL_SEED_OFFSET, HostBatchedEnv
from ppo_lab.errors import ConfigError


@struct.dataclass
class GymnasiumState:
    # Per env: True until the vector env has been reset by a step (a new run, or a resumed one).
    fresh: jax.Array


class GymnasiumEnv(HostBatchedEnv):
    """Gymnasium envs in a vector env behind the lab's batched-env API (module docstring)."""

    def __init__(self, factory: Callable[[], gymnasium.Env], label: str, *, seed: int, max_episode_steps: int | None,
                 reset_on_host: bool = False):
        self.factory, self.label, self.seed = factory, label, seed
        self.max_episode_steps, self.reset_on_host = max_episode_steps, reset_on_host
        probe = factory()
        obs_space, action_space = probe.observation_space, probe.action_space
        probe.close()
        discrete = isinstance(action_space, gymnasium.spaces.Discrete) and int(action_space.start) == 0
        if not (discrete or isinstance(action_space, gymnasium.spaces.Box)):
            raise ConfigError("env.id", label, f"a Gymnasium env with a Discrete action space from 0 or a Box one "
                                               f"({label}'s is {action_space})")
        if not isinstance(obs_space, gymnasium.spaces.Box):
            raise ConfigError("env.id", label, f"a Gymnasium env with a Box observation space ({label}'s is {obs_space})")
        self.take_action_space(action_space, continuous=not discrete)
        self._obs_shape = tuple(obs_space.shape)
        self._vectors: dict[tuple[int, int], list] = {}  # (device, batch size) -> [vector env, reset yet]

    @property
    def name(self) -> str:
        return f"Gymnasium/{self.label}"

    def for_evaluation(self) -> "GymnasiumEnv":
        """The same env with vector envs of its own, seeded apart, reset by `reset_batch`."""
        return GymnasiumEnv(self.factory, self.label, seed=self.seed + EVAL_SEED_OFFSET,
                            max_episode_steps=self.max_episode_steps, reset_on_host=True)

    # ---- the host side -------------------------------------------------------------------
    def vector(self, size: int, device: int = 0) -> list:
        if (device, size) not in self._vectors:
            vector = SyncVectorEnv([self.factory] * size, autoreset_mode=AutoresetMode.SAME_STEP)
            self._vectors[device, size] = [vector, False]
        return self._vectors[device, size]

    def _host_reset(self, size: int, device: int = 0) -> np.ndarray:
        entry = self.vector(size, device)
        obs, _ = entry[0].reset(seed=self.seed + device * size)
        entry[1] = True
        return np.asarray(obs, np.float32)

    def _host_step(self, device, fresh, action):
        """One step of the vector env of `fresh.size` envs (any leading shape: [n] or, under
        vmap, [R, n]); a reset instead where it has not been reset yet or `fresh` says so."""
        lead = fresh.shape
        flat = np.asarray(action).reshape((-1,) + self._action_space.shape)
        if self.continuous:
            flat = flat.astype(self._action_space.dtype)
        n, device = len(flat), int(np.asarray(device).reshape(-1)[0])  # under vmap: one per replica, all alike
        entry = self.vector(n, device)
        if not entry[1] or np.any(fresh):
            obs = self._host_reset(n, device)
            false = np.zeros(n, bool)
            out = (obs, np.zeros(n, np.float32), false, false, obs, np.ones(n, bool))
        else:
            obs, reward, terminated, truncated, info = entry[0].step(flat)
            obs = np.asarray(obs, np.float32)
            final = obs.copy()
            for i in np.flatnonzero(info.get("_final_obs", np.zeros(n, bool))):
                final[i] = info["final_obs"][i]
            out = (obs, np.asarray(reward, np.float32), np.asarray(terminated, bool), np.asarray(truncated, bool), final,
                   np.zeros(n, bool))
        return tuple(x.reshape(lead + x.shape[1:]) for x in out)

    # ---- the batched gymnax API ----------------------------------------------------------
    def reset_batch(self, key, params, num_envs: int):
        """`(obs [n, ...], state)`. Training: zeros, and the first step resets the vector env
        (flagged `resetting`). Evaluation (`reset_on_host`): the vector env reset now."""
        if not self.reset_on_host:
            return jnp.zeros((num_envs,) + self._obs_shape, jnp.float32), GymnasiumState(jnp.ones((num_envs,), bool))
        shape = jax.ShapeDtypeStruct((num_envs,) + self._obs_shape, jnp.float32)
        obs = jax.pure_callback(lambda _: self._host_reset(num_envs), shape, key, vmap_method="broadcast_all")
        return obs, GymnasiumState(jnp.zeros((num_envs,), bool))

    def step_batch(self, key, state: GymnasiumState, action, params=None):
        n = state.fresh.shape[0]
        action = action.astype(jnp.float32 if self.continuous else jnp.int32)
        obs = jax.ShapeDtypeStruct((n,) + self._obs_shape, jnp.float32)
        flags = jax.ShapeDtypeStruct((n,), bool)
        shapes = (obs, jax.ShapeDtypeStruct((n,), jnp.float32), flags, flags, obs, flags)
        device = jnp.int32(0) if self.num_devices == 1 else jax.lax.axis_index(self.axis_name).astype(jnp.int32)
        obs, reward, terminated, truncated, final, resetting = jax.pure_callback(
            self._host_step, shapes, device, state.fresh, action, vmap_method="broadcast_all")
        info = {"final_observation": final, "resetting": resetting}
        return obs, GymnasiumState(jnp.zeros_like(state.fresh)), reward, terminated, truncated, info


def _factory(env_id: str, make_kwargs: dict, max_steps: int | None) -> tuple[Callable, int | None]:
    """`(make one env, its time limit or None)` for a registered id or an env class's import path."""
    if env_id in gymnasium.registry:
        limit = max_steps or gymnasium.registry[env_id].max_episode_steps
        return (lambda: gymnasium.make(env_id, max_episode_steps=limit, **make_kwargs)), limit
    if "." not in env_id:
        near = difflib.get_close_matches(env_id, list(gymnasium.registry), n=8, cutoff=0.5)
        raise ConfigError("env.id", env_id, f"a registered Gymnasium id (nearest: {near}) or the import path of an "
                                            "env class such as 'my_package.envs.MyEnv'")
    cls = parts.load("env.id", env_id)
    if not (isinstance(cls, type) and issubclass(cls, gymnasium.Env)):
        raise ConfigError("env.id", env_id, "the import path of a gymnasium.Env subclass")
    if max_steps is None:
        return (lambda: cls(**make_kwargs)), None
    return (lambda: gymnasium.wrappers.TimeLimit(cls(**make_kwargs), max_steps)), max_steps


def build(env_cfg: Mapping, reward_cfg: Mapping, *, privileged_critic: bool = False):
    """`(env, EnvParams)` for `env=gymnasium env.id=<id or import path>`; ConfigError on bad
    values (an unknown id lists the nearest registered ones), before any compile."""
    c = check_config(env_cfg, reward_cfg)
    refuse_privileged_critic(privileged_critic, "Gymnasium envs have no privileged observation")
    factory, limit = _factory(c["id"], dict(c["make_kwargs"]), c["max_steps"])
    env = GymnasiumEnv(factory, c["id"], seed=c["seed"], max_episode_steps=limit)  # its spaces checked first
    if limit is None:
        raise ConfigError("env.max_steps", None, f"an integer >= 1 ({c['id']} has no time limit of its own, and "
                                                 "evaluation and truncation need one)")
    return env, env.default_params
