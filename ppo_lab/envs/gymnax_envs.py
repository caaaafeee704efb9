"""Environments from gymnax itself (CartPole-v1 and any other gymnax id, discrete or continuous:
Pendulum-v1, MountainCarContinuous-v0).

The checks import nothing heavy (config validation runs before jax is imported); the id
itself is checked against gymnax's registry when the env is built, since reading that
registry imports gymnax, and with it jax.
"""

from __future__ import annotations

from typing import Mapping

import gymnax

from ppo_lab.errors import ConfigError


def check_gymnax(env_cfg: Mapping, reward_cfg: Mapping) -> None:
    env_id = env_cfg.get("gymnax_id")
    if not isinstance(env_id, str) or not env_id:
        raise ConfigError("env.gymnax_id", env_id, "a gymnax environment id such as 'CartPole-v1'")
    if reward_cfg.get("name", "default") != "default":
        raise ConfigError("reward", reward_cfg.get("name"), f"reward=default ({env_id} has no reward modes)")
    overrides = env_cfg.get("params")
    if overrides is not None and not isinstance(overrides, Mapping):
        raise ConfigError("env.params", overrides, f"a mapping of {env_id}'s EnvParams fields to values")


def check_cartpole(env_cfg: Mapping, reward_cfg: Mapping) -> None:
    check_gymnax({**env_cfg, "gymnax_id": env_cfg.get("gymnax_id", "CartPole-v1")}, reward_cfg)


def _make_gymnax(env_cfg: Mapping, reward_cfg: Mapping):
    check_gymnax(env_cfg, reward_cfg)
    env_id = env_cfg["gymnax_id"]
    if env_id not in gymnax.registered_envs:
        raise ConfigError("env.gymnax_id", env_id, f"a gymnax environment id, one of {sorted(gymnax.registered_envs)}")
    env, params = gymnax.make(env_id)
    overrides = dict(env_cfg.get("params") or {})
    if overrides:
        unknown = sorted(set(overrides) - set(params.__dataclass_fields__))
        if unknown:
            raise ConfigError(f"env.params.{unknown[0]}", overrides[unknown[0]], f"a field of {type(params).__name__}: {sorted(params.__dataclass_fields__)}")
        params = params.replace(**overrides)
    return env, params


def make_cartpole(env_cfg: Mapping, reward_cfg: Mapping, *, privileged_critic: bool = False):
    return _make_gymnax({**env_cfg, "gymnax_id": env_cfg.get("gymnax_id", "CartPole-v1")}, reward_cfg)


def make_any_gymnax(env_cfg: Mapping, reward_cfg: Mapping, *, privileged_critic: bool = False):
    return _make_gymnax(env_cfg, reward_cfg)
