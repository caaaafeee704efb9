"""The jax-free checks of `env=gymnax` and `env=cartpole` (run when the config is validated,
before XLA starts; `gymnax_envs`, which imports gymnax, builds the env)."""

from __future__ import annotations

from typing import Mapping

from ppo_lab.envs.env_section import known_keys, require_own_reward
from ppo_lab.errors import ConfigError


# kwargs: the env's constructor arguments; params: overrides of its EnvParams fields (null: none)
KEYS = ("gymnax_id", "kwargs", "params")


def check_gymnax(env_cfg: Mapping, reward_cfg: Mapping) -> None:
    known_keys(env_cfg, dict.fromkeys(KEYS))
    env_id = env_cfg.get("gymnax_id")
    if not isinstance(env_id, str) or not env_id:
        raise ConfigError("env.gymnax_id", env_id, "a gymnax environment id such as 'CartPole-v1'")
    require_own_reward(env_cfg, reward_cfg, f"{env_id} has no reward modes")
    kwargs = env_cfg.get("kwargs")
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise ConfigError("env.kwargs", kwargs, f"a mapping of {env_id}'s constructor arguments to values, e.g. "
                          "{use_visual_obs: true}")
    overrides = env_cfg.get("params")
    if overrides is not None and not isinstance(overrides, Mapping):
        raise ConfigError("env.params", overrides, f"a mapping of {env_id}'s EnvParams fields to values")


def check_cartpole(env_cfg: Mapping, reward_cfg: Mapping) -> None:
    check_gymnax({**env_cfg, "gymnax_id": env_cfg.get("gymnax_id", "CartPole-v1")}, reward_cfg)
