"""The `env` section of `env=gymnasium` (imports neither jax nor gymnasium: the id is looked up
in Gymnasium's registry, or imported, when the env is built, before anything compiles)."""

from __future__ import annotations

from typing import Any, Mapping

from ppo_lab.envs.env_section import own_keys, own_reward_check, require_int
from ppo_lab.errors import ConfigError

KEYS = ("id", "seed", "make_kwargs", "max_steps")


def read_config(env_cfg: Mapping) -> dict[str, Any]:
    """The env section's own keys; ConfigError naming any bad key or value."""
    c = own_keys(env_cfg, KEYS, "conf/env/gymnasium.yaml")
    if not isinstance(c["id"], str) or not c["id"]:
        raise ConfigError("env.id", c["id"], "a Gymnasium id such as 'CartPole-v1', or the import path of an env "
                                             "class such as 'my_package.envs.MyEnv'")
    require_int("env.seed", c["seed"], 0, "an integer >= 0")
    if not isinstance(c["make_kwargs"], Mapping):
        raise ConfigError("env.make_kwargs", c["make_kwargs"], "a mapping of keyword arguments for the env")
    require_int("env.max_steps", c["max_steps"], 1, "null (the env's own time limit) or an integer >= 1", nullable=True)
    return c


check_config = own_reward_check(read_config)  # conf/env's `check:`: the section, and reward=default (the env's own)
