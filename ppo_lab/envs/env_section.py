"""Checks shared by the jax-free `check:` functions of the envs (conf/env/*.yaml): an env's
section refuses keys it does not know, and an env with a reward of its own takes only
`reward=default` (and, with no privileged observation, no privileged critic). No jax, no env
library imported here."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ppo_lab.errors import ConfigError


def known_keys(cfg: Mapping, defaults: Mapping[str, Any], section: str = "env",
               ignore: tuple[str, ...] = ("name",)) -> dict[str, Any]:
    """The section's keys of `defaults`, each from `cfg` or its default there; ConfigError
    naming a key of `cfg` that is not among them (`ignore` aside)."""
    unknown = sorted(set(cfg) - set(defaults) - set(ignore))
    if unknown:
        raise ConfigError(f"{section}.{unknown[0]}", cfg[unknown[0]], f"one of the known keys {sorted(defaults)}")
    return {k: cfg.get(k, d) for k, d in defaults.items()}


def require_int(key: str, value, minimum: int, valid: str, *, below: int | None = None, nullable: bool = False) -> None:
    """ConfigError(key, value, valid) unless `value` is an integer (not a bool) >= `minimum` (and
    < `below`), or None where `nullable`."""
    if nullable and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum or (below is not None and value >= below):
        raise ConfigError(key, value, valid)


def own_keys(env_cfg: Mapping, keys: tuple[str, ...], conf_file: str) -> dict[str, Any]:
    """The env section's `keys` (besides `name`), each required; ConfigError naming an unknown or a missing one."""
    known_keys(env_cfg, dict.fromkeys(keys))
    missing = [k for k in keys if k not in env_cfg]
    if missing:
        raise ConfigError(f"env.{missing[0]}", None, f"a value ({conf_file} sets every key)")
    return {k: env_cfg[k] for k in keys}


def require_own_reward(env_cfg: Mapping, reward_cfg: Mapping, why: str | None = None) -> None:
    """An env that brings its own reward goes only with `reward=default`; `why` it has no other
    (default: the env's `id` has its own reward)."""
    if reward_cfg.get("name", "default") != "default":
        why = why or f"{env_cfg.get('id')} has its own reward"
        raise ConfigError("reward", reward_cfg.get("name"), f"reward=default ({why})")


def own_reward_check(read_config: Callable[[Mapping], dict], why: str | None = None):
    """The `check:` of an env with a reward of its own: its section read by `read_config` (a
    ConfigError naming a bad key or value), and `reward=default` (`require_own_reward`'s `why`).
    It returns the section read, for the env's builder."""
    def check_config(env_cfg: Mapping, reward_cfg: Mapping) -> dict[str, Any]:
        section = read_config(env_cfg)
        require_own_reward(env_cfg, reward_cfg, why)
        return section

    return check_config


def refuse_privileged_critic(privileged_critic: bool, why: str) -> None:
    """A builder's refusal of `network.privileged_critic=true` for an env with no privileged observation."""
    if privileged_critic:
        raise ConfigError("network.privileged_critic", True, f"false ({why})")
