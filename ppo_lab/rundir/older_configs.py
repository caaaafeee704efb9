"""Configs saved by an older lab, read the way this lab reads them.

A key added since a run dir was written is missing from its config.yaml. Two kinds are filled
in, and only these:
- keys that say how a part is found, not what is trained (`env._target_`, `env.check`,
  `env.evaluations`, `network._target_`, `logger.<name>._target_`): from this lab's own
  `conf/` file of the part the run names (`conf/env/<env.name>.yaml`, ...);
- keys added with a value that trains as the lab did before them (`KEYS_ADDED_AS_BEFORE`):
  at that value. A recurrent cell's size and a head layer's gain go with their part: this lab's default
  when the part is absent.

Resuming compares a relaunch's config with the saved one through the same table
(`ppo_lab.run.resume`): such a key at its old-behaviour value is no change of config.
Evaluation and replay read an old run's config through `complete` (`load_run_config`).
"""

from __future__ import annotations

import copy
from omegaconf import OmegaConf

from ppo_lab.config_keys import option_file

# Keys added since a run dir could have been written, with the value that trains as the lab
# did before them (a feed-forward network, float observations in the update, ...).
KEYS_ADDED_AS_BEFORE = {
    "network.recurrent": None,
    "network.head_hidden": 0,
    "ppo.rollout_obs_dtype": "float32",
    "ppo.privileged_view_after_step": False,
    "ppo.value_loss": "mean_of_max",
    "env.respawn_in_place": False,
    "network.squash": None,
    "ppo.normalize_obs": False,
    "ppo.normalize_reward": False,
    "hardware.deterministic": False,
}

# Per section: which keys are wiring, and which conf/ file (by the key naming the option) holds them.
WIRING = {"env": (("_target_", "check", "evaluations"), "name"), "network": (("_target_",), "kind")}


def is_wiring(key: str) -> bool:
    """Whether a dotted key only says how a part is found (`*._target_`, `*.check`, `env.evaluations.*`)."""
    return key.rsplit(".", 1)[-1] in ("_target_", "check") or key.startswith(("env.evaluations", "env.scores"))


def _conf_file(group: str, option) -> dict:
    path = option_file(group, option)  # conf/ first, then the user's config folders
    return OmegaConf.to_container(OmegaConf.load(path), resolve=False) or {} if path is not None else {}


def complete(saved: dict) -> dict:
    """A copy of `saved` with the wiring and the added-as-before keys it lacks filled in."""
    out = copy.deepcopy(saved)
    for section, (keys, option_key) in WIRING.items():
        body = out.get(section)
        if not isinstance(body, dict) or not any(k not in body for k in keys):
            continue
        defaults = _conf_file(section, body.get(option_key))
        for key in keys:
            if key not in body and key in defaults:
                body[key] = defaults[key]
    loggers = out.get("logger") or {}
    for name in list(loggers):
        options = loggers[name] if isinstance(loggers[name], dict) else {}
        defaults = _conf_file("logger", name).get(name) or {}  # conf/logger/<name>.yaml nests under its name
        if "_target_" not in options and "_target_" in defaults:
            loggers[name] = {**options, "_target_": defaults["_target_"]}
    env_keys = _conf_file("env", (out.get("env") or {}).get("name"))
    for dotted, value in KEYS_ADDED_AS_BEFORE.items():
        section, key = dotted.split(".", 1)
        if section == "env" and key not in env_keys:
            continue  # a key of another env (env.respawn_in_place is the foraging world's)
        if isinstance(out.get(section), dict) and key not in out[section]:
            out[section][key] = value
    network = out.get("network")
    if isinstance(network, dict):  # the size (gain) of a part that is not there: this lab's default
        defaults = _conf_file("network", network.get("kind"))
        if network.get("recurrent") is None and "recurrent_size" not in network:
            network["recurrent_size"] = defaults.get("recurrent_size")
        if network.get("head_hidden") == 0 and "head_hidden_gain" not in network:
            network["head_hidden_gain"] = defaults.get("head_hidden_gain")
    return out
