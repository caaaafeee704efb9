"""`env=brax`: its keys, checked without importing brax or jax (config validation runs first).

The id itself is checked against Brax's registry when the env is built (reading it imports
brax, and with it jax); an unknown id is refused there, listing the valid ones.
"""

from __future__ import annotations

from typing import Mapping

from ppo_lab.envs.env_section import own_keys, require_int, require_own_reward
from ppo_lab.errors import ConfigError

# Brax's physics pipelines (`brax.envs.get_environment(..., backend=)`).
BACKENDS = ("generalized", "positional", "spring", "mjx")


def check_config(env_cfg: Mapping, reward_cfg: Mapping) -> None:
    own_keys(env_cfg, ("id", "backend", "max_steps"), "conf/env/brax.yaml")
    env_id = env_cfg.get("id")
    if not isinstance(env_id, str) or not env_id:
        raise ConfigError("env.id", env_id, "a Brax environment name such as 'inverted_pendulum' or 'ant'")
    backend = env_cfg.get("backend")
    if backend not in BACKENDS:
        raise ConfigError("env.backend", backend, f"one of {list(BACKENDS)}")
    require_int("env.max_steps", env_cfg.get("max_steps"), 1, "an episode length in steps, an integer >= 1")
    require_own_reward(env_cfg, reward_cfg, f"Brax's {env_id} has no reward modes")
