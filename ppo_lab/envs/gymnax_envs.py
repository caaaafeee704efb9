"""Environments from gymnax itself (CartPole-v1 and any other gymnax id, discrete or continuous:
Pendulum-v1, MountainCarContinuous-v0): the builders.

Their jax-free checks are in `gymnax_config` (importing gymnax, as this module does, starts
XLA's backend, so validation must not load this module); the id itself is checked against
gymnax's registry here, when the env is built.
"""

from __future__ import annotations

import inspect
from typing import Mapping

import jax
import jax.numpy as jnp

from ppo_lab.envs import cartpole_frames
from ppo_lab.envs.base import Env, Episode
from ppo_lab.envs.gymnax_api import gymnax
from ppo_lab.envs.gymnax_config import check_gymnax
from ppo_lab.errors import ConfigError


def _make_gymnax(env_cfg: Mapping, reward_cfg: Mapping):
    check_gymnax(env_cfg, reward_cfg)
    env_id = env_cfg["gymnax_id"]
    if env_id not in gymnax.registered_envs:
        raise ConfigError("env.gymnax_id", env_id, f"a gymnax environment id, one of {sorted(gymnax.registered_envs)}")
    env, params = gymnax.make(env_id)
    if kwargs := dict(env_cfg.get("kwargs") or {}):
        _check_constructor_arguments(env_id, type(env), kwargs)
        env, params = gymnax.make(env_id, **kwargs)
    env = GymnaxEnv(env)
    overrides = dict(env_cfg.get("params") or {})
    if overrides:
        unknown = sorted(set(overrides) - set(params.__dataclass_fields__))
        if unknown:
            raise ConfigError(f"env.params.{unknown[0]}", overrides[unknown[0]], f"a field of {type(params).__name__}: {sorted(params.__dataclass_fields__)}")
        params = params.replace(**overrides)
    return env, params


def _check_constructor_arguments(env_id: str, env_class: type, kwargs: Mapping) -> None:
    """`env.kwargs` against the env class's constructor (gymnax-blines' `env_kwargs`, such as
    FourRooms' `use_visual_obs`): an unknown one refused by name, with the ones it takes."""
    accepted = [name for name in inspect.signature(env_class.__init__).parameters if name != "self"]
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise ConfigError(f"env.kwargs.{unknown[0]}", kwargs[unknown[0]], f"an argument of {env_id}'s constructor: {accepted}")


class GymnaxEnv(Env):
    """One of gymnax's own envs under the lab's contract (`envs.base.Env`): gymnax's API
    passed through, the optional members at their defaults. Where gymnax's env says other than
    it does, the contract's side is taken: a reward is a float (UmbrellaChain's is an int), and
    the observation space's dtype is that of the observations reset returns (Catch's space says
    int32 of float32 observations, FourRooms' float32 of int32 ones)."""

    def __init__(self, env):
        self.gymnax_env = env

    def __getattr__(self, name: str):
        """The rest of gymnax's API (`name`, `num_actions`, `default_params`, `reset`, `reset_env`,
        `action_space`, ...) is the gymnax env's own; the contract's defaults (`Env`) come first."""
        if name == "gymnax_env":  # not set yet (an object being unpickled or copied)
            raise AttributeError(name)
        return getattr(self.gymnax_env, name)

    def step(self, key, state, action, params=None):
        return _float_reward(self.gymnax_env.step(key, state, action, params))

    def step_env(self, key, state, action, params):
        return _float_reward(self.gymnax_env.step_env(key, state, action, params))

    # ---- replay: the gymnax envs the lab draws, by name ----------------------------------------
    @property
    def draws_frames(self) -> bool:
        return self.name in RENDERERS

    @property
    def frame_palette(self):
        return RENDERERS[self.name].palette() if self.draws_frames else None

    def render_episode(self, episode: Episode, options: Mapping):
        if not self.draws_frames:
            return super().render_episode(episode, options)
        return RENDERERS[self.name].render_episode(episode, options)

    def observation_space(self, params=None):
        space = self.gymnax_env.observation_space(params)
        params = self.default_params if params is None else params
        observed = jax.eval_shape(lambda key: self.gymnax_env.reset(key, params)[0], jax.random.PRNGKey(0)).dtype
        if observed == space.dtype:
            return space
        return type(space)(space.low, space.high, space.shape, observed)


def _float_reward(transition: tuple) -> tuple:
    """A step's (obs, state, reward, ...) with the reward as float32 where it is an integer."""
    obs, state, reward, *rest = transition
    if not jnp.issubdtype(reward.dtype, jnp.floating):
        reward = reward.astype(jnp.float32)
    return (obs, state, reward, *rest)


# gymnax env name -> the module drawing its replay frames (`render_episode`, `palette`)
RENDERERS = {"CartPole-v1": cartpole_frames}


def make_cartpole(env_cfg: Mapping, reward_cfg: Mapping, *, privileged_critic: bool = False):
    return _make_gymnax({**env_cfg, "gymnax_id": env_cfg.get("gymnax_id", "CartPole-v1")}, reward_cfg)


def make_any_gymnax(env_cfg: Mapping, reward_cfg: Mapping, *, privileged_critic: bool = False):
    return _make_gymnax(env_cfg, reward_cfg)
