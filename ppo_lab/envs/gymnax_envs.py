"""Environments from gymnax itself (CartPole-v1 and any other gymnax id, discrete or continuous:
Pendulum-v1, MountainCarContinuous-v0): the builders.

Their jax-free checks are in `gymnax_config` (importing gymnax, as this module does, starts
XLA's backend, so validation must not load this module); the id itself is checked against
gymnax's registry here, when the env is built.
"""

from __future__ import annotations

from typing import Mapping

from ppo_lab.envs.base import Env
from ppo_lab.envs.gymnax_api import gymnax
from ppo_lab.envs.gymnax_config import check_gymnax
from ppo_lab.errors import ConfigError


def _make_gymnax(env_cfg: Mapping, reward_cfg: Mapping):
    check_gymnax(env_cfg, reward_cfg)
    env_id = env_cfg["gymnax_id"]
    if env_id not in gymnax.registered_envs:
        raise ConfigError("env.gymnax_id", env_id, f"a gymnax environment id, one of {sorted(gymnax.registered_envs)}")
    env, params = gymnax.make(env_id)
    env = GymnaxEnv(env)
    overrides = dict(env_cfg.get("params") or {})
    if overrides:
        unknown = sorted(set(overrides) - set(params.__dataclass_fields__))
        if unknown:
            raise ConfigError(f"env.params.{unknown[0]}", overrides[unknown[0]], f"a field of {type(params).__name__}: {sorted(params.__dataclass_fields__)}")
        params = params.replace(**overrides)
    return env, params


class GymnaxEnv(Env):
    """One of gymnax's own envs under the lab's contract (`envs.base.Env`): gymnax's API
    passed through, the optional members at their defaults."""

    def __init__(self, env):
        self.gymnax_env = env

    @property
    def name(self) -> str:
        return self.gymnax_env.name

    @property
    def num_actions(self) -> int:
        return self.gymnax_env.num_actions

    @property
    def default_params(self):
        return self.gymnax_env.default_params

    def reset(self, key, params=None):
        return self.gymnax_env.reset(key, params)

    def step(self, key, state, action, params=None):
        return self.gymnax_env.step(key, state, action, params)

    def action_space(self, params=None):
        return self.gymnax_env.action_space(params)

    def observation_space(self, params=None):
        return self.gymnax_env.observation_space(params)


def make_cartpole(env_cfg: Mapping, reward_cfg: Mapping, *, privileged_critic: bool = False):
    return _make_gymnax({**env_cfg, "gymnax_id": env_cfg.get("gymnax_id", "CartPole-v1")}, reward_cfg)


def make_any_gymnax(env_cfg: Mapping, reward_cfg: Mapping, *, privileged_critic: bool = False):
    return _make_gymnax(env_cfg, reward_cfg)
