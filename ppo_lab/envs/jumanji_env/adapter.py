"""Jumanji environments behind the lab's env API: `env=jumanji env.id=Game2048-v1`.

`jumanji.make(id)` gives an env with `reset(key) -> (state, timestep)` and
`step(state, action) -> (state, timestep)`. The adapter turns it into the gymnax 1.0 API the
trainer speaks (`reset(key, params)`, a six-value `step(key, state, action, params)` with
auto-reset) and adds:

- Observations: every field of Jumanji's observation except `action_mask`, as float32 (after
  `obs_transform`: `symlog` = sign(x) log(1 + |x|), for unbounded values such as 2048's tiles),
  either flattened and concatenated (`observation: flat`, for the MLP), or stacked as image
  channels (`observation: image`, for the CNN): fields with the spatial shape of the first
  grid-shaped field become channels, scalars become constant planes.
- Actions: a discrete action space; a multi-discrete one (Minesweeper's row x column, Tetris'
  rotation x column) is flattened row-major into one index.
- The mask: `action_mask(state, params)` reads the env's own `observation.action_mask`
  (flattened like the actions); the adapter offers it only when the env has one.
- Episode ends: Jumanji's last step with discount 0 is `terminated`; a last step with a
  non-zero discount (Jumanji's own time limit) or the adapter's `max_steps` is `truncated`.
- `info["metrics"]`: the env's scalar `extras` as `env/<name>` (e.g. 2048's `env/highest_tile`),
  rollout means in metrics.csv.
- `reward_scale` multiplies the reward (2048's merge rewards run into the thousands).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping

import jax
import jax.numpy as jnp
import jumanji
from flax import struct

from ppo_lab.envs.base import Env
from ppo_lab.envs.env_section import refuse_privileged_critic
from ppo_lab.envs.gymnax_api import environment, spaces
from ppo_lab.envs.jumanji_env.config import check_config
from ppo_lab.errors import ConfigError

MASK_FIELD = "action_mask"


@struct.dataclass
class JumanjiState:
    # Jumanji's state and its observation (which holds the action mask), as dicts of their
    # leaves: Jumanji's own classes are not known to flax's checkpoint serialisation, dicts of
    # arrays are. `JumanjiEnv.inner_state` / `.inner_observation` rebuild them.
    inner: dict
    observation: dict
    time: jax.Array  # int32: steps in this episode (for `max_steps`)


def observation_fields(env) -> list[str]:
    """Names of the fields of a Jumanji env's observation (a NamedTuple or a dataclass)."""
    example = jax.eval_shape(lambda k: env.reset(k)[1].observation, jax.random.PRNGKey(0))
    if hasattr(example, "_fields"):
        return list(example._fields)
    return [f.name for f in dataclasses.fields(example)]


def _symlog(x):
    return jnp.sign(x) * jnp.log1p(jnp.abs(x))


class JumanjiEnv(Env):
    """A Jumanji env with the gymnax 1.0 API; see the module docstring."""

    def __init__(self, env, env_id: str, observation: str = "flat", obs_transform: str = "none",
                 reward_scale: float = 1.0):
        self.jumanji_env = env
        self.env_id = env_id
        self.observation = observation
        self.obs_transform = obs_transform
        self.reward_scale = float(reward_scale)
        spec = env.action_spec
        dims = getattr(spec, "num_values", None)
        if dims is None or not jnp.issubdtype(spec.dtype, jnp.integer):
            raise ConfigError("env.id", env_id, "a Jumanji env with discrete actions (PPO here is categorical)")
        self.action_dims = tuple(int(n) for n in jnp.atleast_1d(jnp.asarray(dims)))
        self.obs_fields = [name for name in observation_fields(env) if name != MASK_FIELD]
        self.action_names = [str(i) for i in range(self.num_actions)]
        key = jax.random.PRNGKey(0)
        state, timestep = jax.eval_shape(env.reset, key)
        self._state_def = jax.tree.structure(state)
        self._obs_def = jax.tree.structure(timestep.observation)
        self._obs_shape = jax.eval_shape(lambda k: self._observe(env.reset(k)[1].observation), key).shape

    @property
    def name(self) -> str:
        return f"Jumanji/{self.env_id}"

    @property
    def num_actions(self) -> int:
        return math.prod(self.action_dims)

    @property
    def default_params(self) -> environment.EnvParams:
        return environment.EnvParams(max_steps_in_episode=1000)

    def action_space(self, params=None) -> spaces.Discrete:
        return spaces.Discrete(self.num_actions)

    def observation_space(self, params=None) -> spaces.Box:
        return spaces.Box(-jnp.inf, jnp.inf, self._obs_shape, jnp.float32)

    # ---- Jumanji's objects <-> the lab's state ------------------------------------------------
    def _wrap(self, inner, observation, time) -> JumanjiState:
        leaves = lambda tree: {str(i): x for i, x in enumerate(jax.tree.leaves(tree))}  # noqa: E731
        return JumanjiState(inner=leaves(inner), observation=leaves(observation), time=time)

    def inner_state(self, state: JumanjiState):
        """Jumanji's own state object."""
        return jax.tree.unflatten(self._state_def, [state.inner[str(i)] for i in range(len(state.inner))])

    def inner_observation(self, state: JumanjiState):
        """Jumanji's observation of the current state (with `action_mask`)."""
        return jax.tree.unflatten(self._obs_def, [state.observation[str(i)] for i in range(len(state.observation))])

    # ---- observations and actions -----------------------------------------------------------
    def _fields(self, observation) -> list[jax.Array]:
        arrays = [jnp.asarray(getattr(observation, name), jnp.float32) for name in self.obs_fields]
        return [_symlog(a) for a in arrays] if self.obs_transform == "symlog" else arrays

    def _observe(self, observation) -> jax.Array:
        arrays = self._fields(observation)
        if self.observation == "flat":
            return jnp.concatenate([a.reshape(-1) for a in arrays])
        grids = [a for a in arrays if a.ndim >= 2]
        if not grids:
            raise ConfigError("env.observation", "image", f"flat ({self.env_id} has no grid-shaped observation)")
        hw = grids[0].shape[:2]
        planes = []
        for name, a in zip(self.obs_fields, arrays):
            if a.ndim == 0:
                planes.append(jnp.full(hw + (1,), a))
            elif a.shape[:2] == hw:
                planes.append(a.reshape(hw + (-1,)))
            else:
                raise ConfigError("env.observation", "image",
                                  f"flat ({self.env_id}'s field {name!r} of shape {a.shape} is not on the {hw} grid)")
        return jnp.concatenate(planes, axis=-1)

    def _jumanji_action(self, action):
        if len(self.action_dims) == 1:
            return jnp.asarray(action, jnp.int32)
        return jnp.stack(jnp.unravel_index(action, self.action_dims)).astype(jnp.int32)

    # ---- gymnax API -------------------------------------------------------------------------
    def reset(self, key: jax.Array, params=None):
        inner, timestep = self.jumanji_env.reset(key)
        state = self._wrap(inner, timestep.observation, jnp.zeros((), jnp.int32))
        return self._observe(timestep.observation), state

    def step(self, key: jax.Array, state: JumanjiState, action, params=None):
        if params is None:
            params = self.default_params
        inner, timestep = self.jumanji_env.step(self.inner_state(state), self._jumanji_action(action))
        time = state.time + 1
        last = timestep.last()
        terminated = last & (timestep.discount == 0)
        truncated = ~terminated & (last | (time >= params.max_steps_in_episode))
        done = terminated | truncated
        obs_st = self._observe(timestep.observation)
        obs_re, state_re = self.reset(key, params)
        state_st = self._wrap(inner, timestep.observation, time)
        next_state = jax.tree.map(lambda r, s: jnp.where(done, r, s), state_re, state_st)
        obs = jnp.where(done, obs_re, obs_st)
        metrics = {f"env/{k}": jnp.asarray(v, jnp.float32) for k, v in (timestep.extras or {}).items()
                   if jnp.ndim(v) == 0}
        info = {"metrics": metrics, "terminated": terminated, "truncated": truncated, "final_observation": obs_st}
        reward = jnp.asarray(timestep.reward, jnp.float32) * self.reward_scale
        return obs, next_state, reward, terminated, truncated, info


class MaskedJumanjiEnv(JumanjiEnv):
    """A Jumanji env whose observation carries `action_mask`: the trainer, evaluation and
    replay then only ever pick valid actions."""

    def action_mask(self, state: JumanjiState, params=None) -> jax.Array:
        return jnp.asarray(getattr(self.inner_observation(state), MASK_FIELD), bool).reshape(-1)


def build(env_cfg: Mapping, reward_cfg: Mapping, *, privileged_critic: bool = False):
    """`(env, EnvParams)` for `env=jumanji env.id=<registered id>`; ConfigError on bad values."""
    c = check_config(env_cfg, reward_cfg)
    refuse_privileged_critic(privileged_critic, "Jumanji envs have no privileged observation")
    registered = sorted(jumanji.registered_environments())
    if c["id"] not in registered:
        raise ConfigError("env.id", c["id"], f"a registered Jumanji id, one of {registered}")
    inner = jumanji.make(c["id"])
    has_mask = MASK_FIELD in observation_fields(inner)
    cls = MaskedJumanjiEnv if has_mask else JumanjiEnv
    env = cls(inner, c["id"], observation=c["observation"], obs_transform=c["obs_transform"],
              reward_scale=c["reward_scale"])
    if has_mask:
        mask_size = math.prod(inner.observation_spec.action_mask.shape)
        if mask_size != env.num_actions:
            raise ConfigError("env.id", c["id"], f"an env whose action mask ({mask_size}) covers its {env.num_actions} actions")
    return env, environment.EnvParams(max_steps_in_episode=c["max_steps"])
