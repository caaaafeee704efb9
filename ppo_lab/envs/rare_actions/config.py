"""The `env` section of `env=rare_actions`: its keys, defaults and checks (imports no jax).

`grid_size` and `n_data` fix array shapes; every other key is a field of the game's
`EnvParams` (`max_steps` is `max_steps_in_episode`). The game's rules are described in
`ppo_lab.envs.rare_actions.game`.
"""

from __future__ import annotations

from typing import Any, Mapping

from ppo_lab.envs.env_section import known_keys, own_reward_check, require_int
from ppo_lab.errors import ConfigError

STATIC_DEFAULTS: dict[str, Any] = dict(grid_size=5, n_data=3)
PARAM_DEFAULTS: dict[str, Any] = dict(
    max_steps=64, data_reward=1.0, trace_penalty=1.0, integrity=3, threat_min=8, threat_max=14,
    max_siphons=2, max_credits=4, shield_cost=1, shield_steps=2, shield_warning=4,
    overclock_cost=2, overclock_steps=8, overclock_multiplier=2.0, overclock_range=2,
    cache_cost=1, cache_delay=8, cache_payout=2.0,
)
FLOAT_KEYS = ("data_reward", "trace_penalty", "overclock_multiplier", "cache_payout")
# Integer keys that may be 0 (a free program, no range); the others must be >= 1.
ZERO_OK = ("shield_cost", "overclock_cost", "cache_cost", "overclock_range")


def read_config(env_cfg: Mapping) -> dict[str, Any]:
    """The env section with defaults filled in; ConfigError naming any bad key or value."""
    c = known_keys(env_cfg, {**STATIC_DEFAULTS, **PARAM_DEFAULTS})
    for k, v in c.items():
        if k in FLOAT_KEYS:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
                raise ConfigError(f"env.{k}", v, "a number >= 0")
            c[k] = float(v)
        else:
            require_int(f"env.{k}", v, 0 if k in ZERO_OK else 1, f"an integer >= {0 if k in ZERO_OK else 1}")
    if c["grid_size"] < 2:
        raise ConfigError("env.grid_size", c["grid_size"], "an integer >= 2")
    if c["threat_max"] < c["threat_min"]:
        raise ConfigError("env.threat_max", c["threat_max"], f"an integer >= threat_min = {c['threat_min']}")
    return c


check_config = own_reward_check(read_config, "rare_actions has one reward")  # conf/env's `check:`
