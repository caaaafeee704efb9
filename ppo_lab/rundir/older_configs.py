"""Configs saved by an older lab, read the way this lab reads them.

A key added since a run dir was written is missing from its config.yaml. Two kinds are filled
in, and only these:
- keys that say how a part is found, not what is trained (`env._target_`, `env.check`,
  `env.evaluations`, `env.metrics.criteria`, `network._target_`, `logger.<name>._target_`):
  from this lab's own `conf/` file of the part the run names (`conf/env/<env.name>.yaml`, ...);
- keys added with a value that trains as the lab did before them: the `before` mark on the
  key's field in ppo_lab/config.py (`config.keys_added_as_before()`, `with_keys_added_since`),
  and an env's own keys (`ENV_KEYS_ADDED_AS_BEFORE`: env options have no field there). A key
  that sizes a part (a recurrent cell's size, a head layer's gain) is marked
  `LabDefaultWhen(...)`: this lab's default while the part is absent.

A part of this lab that moved since is found where it lives now: a saved wiring value naming
its old dotted path is read as the new one (`MOVED_PARTS`).

Resuming compares a relaunch's config with the saved one through the same marks
(`ppo_lab.run.resume`): such a key at its old-behaviour value is no change of config.
Evaluation and replay read an old run's config through `complete` (`load_run_config`).
"""

from __future__ import annotations

import copy
from omegaconf import OmegaConf

from ppo_lab.config import LabDefaultWhen, keys_added_as_before, keys_marked, with_keys_added_since
from ppo_lab.config_keys import option_file

# An env's own keys added since a run dir could have been written, with the value that trains
# as before them; filled in only for an env whose conf/env file has the key.
ENV_KEYS_ADDED_AS_BEFORE = {"env.respawn_in_place": False}


def added_as_before() -> dict:
    """Every key added with a value that trains as before: the fields' marks and the envs' keys."""
    return {**keys_added_as_before(), **ENV_KEYS_ADDED_AS_BEFORE}


# The lab's own parts that moved since a run dir could have been written: the dotted path a saved
# config names -> where the part lives now.
MOVED_PARTS = {
    "ppo_lab.run.survival.evaluate_policy": "ppo_lab.experiments.goodhart.survival.evaluate_policy",
}

# Per section: which keys (dotted within it) are wiring, and which conf/ file (by the key naming
# the option) holds them. `metrics.criteria`: the env's own criteria, read by the analysis alone.
WIRING = {"env": (("_target_", "check", "evaluations", "metrics.criteria"), "name"), "network": (("_target_",), "kind")}


def is_wiring(key: str) -> bool:
    """Whether a dotted key only says how a part is found (`*._target_`, `*.check`, `env.evaluations.*`)."""
    return key.rsplit(".", 1)[-1] in ("_target_", "check") or key.startswith(("env.evaluations", "env.scores"))


def as_before_when_absent(key: str) -> LabDefaultWhen | None:
    """The `LabDefaultWhen` mark that covers a dotted key (its own, or its section's), with the
    mark's `key` made dotted: e.g. network.recurrent_size -> (network.recurrent, None)."""
    for marked, mark in keys_marked("before").items():
        if isinstance(mark, LabDefaultWhen) and (key == marked or key.startswith(marked + ".")):
            section = marked if key != marked else marked.rpartition(".")[0]
            return LabDefaultWhen(f"{section}.{mark.key}" if section else mark.key, mark.value)
    return None


def _conf_file(group: str, option) -> dict:
    path = option_file(group, option)  # conf/ first, then the user's config folders
    return OmegaConf.to_container(OmegaConf.load(path), resolve=False) or {} if path is not None else {}


def _get(body: dict, dotted: str):
    for key in dotted.split("."):
        body = body.get(key) if isinstance(body, dict) else None
    return body


def _has(body: dict, dotted: str) -> bool:
    *outer, key = dotted.split(".")
    inner = _get(body, ".".join(outer)) if outer else body
    return isinstance(inner, dict) and key in inner


def _put(body: dict, dotted: str, value) -> None:
    """Set a dotted key, making the mappings above it where absent or null; a saved value
    that is no mapping is left for validation to name."""
    *outer, key = dotted.split(".")
    for name in outer:
        if body.get(name) is None:
            body[name] = {}
        if not isinstance(body[name], dict):
            return
        body = body[name]
    body[key] = value


def _follow_moved_parts(config: dict) -> None:
    """Each saved evaluation naming a part that moved (`MOVED_PARTS`) now names where it lives."""
    env = config.get("env")
    evaluations = env.get("evaluations") if isinstance(env, dict) else None
    if isinstance(evaluations, dict):
        for name, path in evaluations.items():
            evaluations[name] = MOVED_PARTS.get(path, path)


def complete(saved: dict) -> dict:
    """A copy of `saved` with the wiring and the added-as-before keys it lacks filled in."""
    out = with_keys_added_since(copy.deepcopy(saved))
    _follow_moved_parts(out)
    for section, (keys, option_key) in WIRING.items():
        body = out.get(section)
        if not isinstance(body, dict) or all(_has(body, k) for k in keys):
            continue
        defaults = _conf_file(section, body.get(option_key))
        for key in keys:
            if not _has(body, key) and _has(defaults, key):
                _put(body, key, _get(defaults, key))
    loggers = out.get("logger") or {}
    for name in list(loggers):
        options = loggers[name] if isinstance(loggers[name], dict) else {}
        defaults = _conf_file("logger", name).get(name) or {}  # conf/logger/<name>.yaml nests under its name
        if "_target_" not in options and "_target_" in defaults:
            loggers[name] = {**options, "_target_": defaults["_target_"]}
    env_keys = _conf_file("env", (out.get("env") or {}).get("name"))
    for dotted, value in ENV_KEYS_ADDED_AS_BEFORE.items():
        key = dotted.split(".", 1)[1]
        if key in env_keys and isinstance(out.get("env"), dict) and key not in out["env"]:
            out["env"][key] = value
    _complete_part_sizes(out)
    return out


def _complete_part_sizes(out: dict) -> None:
    """Keys marked `LabDefaultWhen` inside a section (a part's size): this lab's conf/ default
    where the saved config lacks the key and the part is absent."""
    for marked, mark in keys_marked("before").items():
        if not isinstance(mark, LabDefaultWhen) or "." not in marked:
            continue  # a whole section (pbt): validate reads its absence as the mark says
        section, key = marked.split(".", 1)
        body = out.get(section)
        if isinstance(body, dict) and key not in body and body.get(mark.key) == mark.value:
            option = body.get(WIRING[section][1]) if section in WIRING else "default"
            body[key] = _conf_file(section, option).get(key)
