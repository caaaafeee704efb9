"""The `env` section of `env=jumanji` (imports no jax; the id is checked against Jumanji's
registry when the env is built, since importing jumanji imports jax)."""

from __future__ import annotations

from typing import Any, Mapping

from ppo_lab.envs.env_section import known_keys, own_reward_check, require_int
from ppo_lab.errors import ConfigError
from ppo_lab.estimators import finite_number

DEFAULTS: dict[str, Any] = dict(id=None, max_steps=1000, observation="flat", obs_transform="none", reward_scale=1.0)
OBSERVATIONS = ("flat", "image")
OBS_TRANSFORMS = ("none", "symlog")


def read_config(env_cfg: Mapping) -> dict[str, Any]:
    """The env section with defaults filled in; ConfigError naming any bad key or value."""
    c = known_keys(env_cfg, DEFAULTS)
    if not isinstance(c["id"], str) or not c["id"]:
        raise ConfigError("env.id", c["id"], "a registered Jumanji id such as 'Game2048-v1' (jumanji.registered_environments())")
    require_int("env.max_steps", c["max_steps"], 1, "an integer >= 1 (episodes are truncated there)")
    if c["observation"] not in OBSERVATIONS:
        raise ConfigError("env.observation", c["observation"], f"one of {list(OBSERVATIONS)}")
    if c["obs_transform"] not in OBS_TRANSFORMS:
        raise ConfigError("env.obs_transform", c["obs_transform"], f"one of {list(OBS_TRANSFORMS)}")
    scale = c["reward_scale"]
    if not finite_number(scale) or scale <= 0:
        raise ConfigError("env.reward_scale", scale, "a finite number > 0")
    return c


check_config = own_reward_check(read_config)  # conf/env's `check:`: the section, and reward=default (the env's own)
