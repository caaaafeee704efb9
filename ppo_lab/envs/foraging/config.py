"""The foraging world's config: its keys, the reward modes, and their checks.

Kept free of jax so that `ppo_lab.config.validate` can check a foraging config (the `check`
of conf/env/foraging.yaml) before the hardware settings are applied; `world.build` takes the
sections the same checks complete. The values a key takes when a config leaves it out are those
of conf/ (the env's and each mode's YAML), not a copy here.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping

from omegaconf import OmegaConf

from ppo_lab import config_keys
from ppo_lab.config import ENV_WIRING_KEYS
from ppo_lab.envs.env_section import known_keys
from ppo_lab.errors import ConfigError
from ppo_lab.estimators import finite_number

MODES = ("ground_truth", "ground_truth_blind", "ground_truth_blinded", "proxy_mortal", "proxy",
         "ground_truth_handhold")

@functools.cache
def _conf_file(group: str, name: str) -> dict[str, Any]:
    """`conf/<group>/<name>.yaml`'s own keys (less the wiring, the name and a mode's env): the one
    source of this world's defaults. A config that leaves a key out (a test building the world from a
    few keys) gets the value the file gives."""
    values = OmegaConf.to_container(OmegaConf.load(config_keys.CONF_DIR / group / f"{name}.yaml"))
    return {k: v for k, v in values.items() if k not in (*ENV_WIRING_KEYS, "name", "env")}


def mode_defaults(mode: str) -> dict[str, Any]:
    """The numbers of reward mode `mode` (one row of the reference's table), from its YAML."""
    return _conf_file("reward", mode)


def env_defaults() -> dict[str, Any]:
    return _conf_file("env", "foraging")


# Per-channel observation of a food / poison cell. `interestingness` shows poison at half the
# brightness of food (the reference's "blinded" agents can tell them apart that way); `blind`
# shows both as 1.0 in the first channel, so nothing in the view tells food from poison.
OBS_TABLES = {
    "one_hot": ((1.0, 0.0), (0.0, 1.0)),
    "interestingness": ((1.0, 1.0), (0.5, 0.5)),
    "blind": ((1.0, 0.0), (1.0, 0.0)),
}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check(ok: bool, key: str, value, valid: str) -> None:
    if not ok:
        raise ConfigError(key, value, valid)


def validate_env_cfg(env_cfg: Mapping) -> dict[str, Any]:
    c = known_keys(env_cfg, env_defaults())
    for k in ("grid_size", "view_range", "food_min", "food_max", "poison_min", "poison_max",
              "max_steps"):
        _check(_is_int(c[k]), f"env.{k}", c[k], "an integer")
    for k in ("energy_start", "move_cost", "food_energy", "poison_energy", "energy_tolerance"):
        _check(finite_number(c[k]), f"env.{k}", c[k], "a finite number")
    for k in ("fresh_world_on_done", "fixed_counts", "respawn_in_place"):
        _check(isinstance(c[k], bool), f"env.{k}", c[k], "true or false")
    _check(c["view_range"] >= 1, "env.view_range", c["view_range"], "an integer >= 1")
    _check(c["grid_size"] >= 2 * c["view_range"] + 1, "env.grid_size", c["grid_size"],
           f"an integer >= 2*view_range+1 = {2 * c['view_range'] + 1} (the view must fit)")
    for item in ("food", "poison"):
        lo, hi = c[f"{item}_min"], c[f"{item}_max"]
        _check(lo >= 0, f"env.{item}_min", lo, "an integer >= 0")
        _check(hi >= lo, f"env.{item}_max", hi, f"an integer >= {item}_min = {lo}")
    n_cells = c["grid_size"] ** 2
    n_items = max(c["food_max"] + c["poison_max"], 1)  # slots, see Foraging.__init__
    _check(n_items + 1 <= n_cells, "env.food_max", c["food_max"],
           f"food_max + poison_max + 1 (the agent) <= grid_size^2 = {n_cells}")
    _check(n_cells * (n_items + 1) < 2**31, "env.grid_size", c["grid_size"],
           "grid_size^2 * (food_max + poison_max + 1) < 2^31 (int32 cell keys)")
    _check(c["max_steps"] >= 1, "env.max_steps", c["max_steps"], "an integer >= 1")
    _check(c["energy_start"] > 0, "env.energy_start", c["energy_start"], "a number > 0")
    _check(c["move_cost"] >= 0, "env.move_cost", c["move_cost"], "a number >= 0")
    _check(c["energy_tolerance"] >= 0, "env.energy_tolerance", c["energy_tolerance"], "a number >= 0")
    return c


def validate_reward_cfg(reward_cfg: Mapping) -> dict[str, Any]:
    mode = reward_cfg.get("name")
    if mode == "default":
        # `reward=default` means "the env's own reward"; this world's own is its true
        # objective, the ground_truth mode (so `python launch.py` needs no reward=...).
        reward_cfg, mode = {"name": "ground_truth"}, "ground_truth"
    _check(mode in MODES, "reward.name", mode, f"one of {list(MODES)}")
    c = known_keys(reward_cfg, mode_defaults(mode), "reward", ignore=("name", "env"))
    c["name"] = mode
    _check(c["observation"] in OBS_TABLES, "reward.observation", c["observation"],
           f"one of {sorted(OBS_TABLES)}")
    for k in ("food", "poison", "step", "death", "shaping_coef", "clip"):
        _check(finite_number(c[k]), f"reward.{k}", c[k], "a finite number")
    _check(isinstance(c["immortal"], bool), "reward.immortal", c["immortal"], "true or false")
    _check(c["clip"] > 0, "reward.clip", c["clip"], "a number > 0")
    _check(c["shaping_coef"] >= 0, "reward.shaping_coef", c["shaping_coef"], "a number >= 0")
    return c


def check_config(env_cfg: Mapping, reward_cfg: Mapping) -> str:
    """conf/env/foraging.yaml's check: ConfigError naming the first bad key of either section.
    Returns the reward mode's name (`reward=default` is ground_truth), what a user is shown."""
    validate_env_cfg(env_cfg)
    return validate_reward_cfg(reward_cfg)["name"]
