"""Checks shared by the jax-free `check:` functions of envs that take a fixed set of keys and
their own reward (EnvPool, Gymnasium, Jumanji): no jax, no env library imported here."""

from __future__ import annotations

from typing import Any, Mapping

from ppo_lab.errors import ConfigError


def own_keys(env_cfg: Mapping, keys: tuple[str, ...], conf_file: str) -> dict[str, Any]:
    """The env section's `keys` (besides `name`); ConfigError naming an unknown or a missing one."""
    unknown = sorted(set(env_cfg) - set(keys) - {"name"})
    if unknown:
        raise ConfigError(f"env.{unknown[0]}", env_cfg[unknown[0]], f"one of the known keys {sorted(keys)}")
    missing = [k for k in keys if k not in env_cfg]
    if missing:
        raise ConfigError(f"env.{missing[0]}", None, f"a value ({conf_file} sets every key)")
    return {k: env_cfg[k] for k in keys}


def require_own_reward(env_cfg: Mapping, reward_cfg: Mapping) -> None:
    """Such envs bring their own reward: only `reward=default` goes with them."""
    if reward_cfg.get("name", "default") != "default":
        raise ConfigError("reward", reward_cfg.get("name"), f"reward=default ({env_cfg.get('id')} has its own reward)")
