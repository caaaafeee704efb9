"""Environments from gymnax itself (CartPole-v1 and any other gymnax id)."""

from __future__ import annotations

from typing import Mapping

from ppo_lab.envs.registry import register_env
from ppo_lab.errors import ConfigError


def _make_gymnax(env_cfg: Mapping, reward_cfg: Mapping):
    import gymnax

    env_id = env_cfg.get("gymnax_id")
    if env_id not in gymnax.registered_envs:
        raise ConfigError("env.gymnax_id", env_id, f"a gymnax environment id, one of {sorted(gymnax.registered_envs)}")
    if reward_cfg.get("name", "default") != "default":
        raise ConfigError("reward", reward_cfg.get("name"), f"reward=default ({env_id} has no reward modes)")
    env, params = gymnax.make(env_id)
    overrides = dict(env_cfg.get("params") or {})
    if overrides:
        unknown = sorted(set(overrides) - set(params.__dataclass_fields__))
        if unknown:
            raise ConfigError(f"env.params.{unknown[0]}", overrides[unknown[0]], f"a field of {type(params).__name__}: {sorted(params.__dataclass_fields__)}")
        params = params.replace(**overrides)
    if not hasattr(env.action_space(params), "n"):
        raise ConfigError("env.gymnax_id", env_id, "an environment with discrete actions (PPO here is categorical)")
    return env, params


@register_env("cartpole")
def make_cartpole(env_cfg: Mapping, reward_cfg: Mapping, *, privileged_critic: bool = False):
    return _make_gymnax({**env_cfg, "gymnax_id": env_cfg.get("gymnax_id", "CartPole-v1")}, reward_cfg)


@register_env("gymnax")
def make_any_gymnax(env_cfg: Mapping, reward_cfg: Mapping, *, privileged_critic: bool = False):
    return _make_gymnax(env_cfg, reward_cfg)
