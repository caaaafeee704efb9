"""The `env` section of `env=envpool` (imports neither jax nor envpool: the task id is checked
against EnvPool's registry when the env is built, before anything compiles)."""

from __future__ import annotations

from typing import Any, Mapping

from ppo_lab.envs.env_section import own_keys, own_reward_check, require_int
from ppo_lab.errors import ConfigError

KEYS = ("id", "num_threads", "seed", "make_kwargs", "image_scale")


def read_config(env_cfg: Mapping) -> dict[str, Any]:
    """The env section's own keys; ConfigError naming any bad key or value."""
    c = own_keys(env_cfg, KEYS, "conf/env/envpool.yaml")
    if not isinstance(c["id"], str) or not c["id"]:
        raise ConfigError("env.id", c["id"], "an EnvPool task id such as 'CartPole-v1' (envpool.list_all_envs())")
    require_int("env.num_threads", c["num_threads"], 1, "null (all cores) or an integer >= 1", nullable=True)
    require_int("env.seed", c["seed"], 0, "an integer in [0, 2^31 - 2^24) (EnvPool seeds are int32)", below=2**31 - 2**24)
    if not isinstance(c["make_kwargs"], Mapping):
        raise ConfigError("env.make_kwargs", c["make_kwargs"], "a mapping of envpool.make keyword arguments")
    if not isinstance(c["image_scale"], bool):
        raise ConfigError("env.image_scale", c["image_scale"], "true (uint8 images as float32 in [0, 1]) or false")
    return c


check_config = own_reward_check(read_config)  # conf/env's `check:`: the section, and reward=default (the task's own)
