"""Which config keys exist: unknown ones are refused, naming the closest valid ones.

Hydra refuses `ppo.lrr=0.1` only with its own wording, and accepts `+ppo.lrr=0.1` silently:
the run then trains with the default `lr`. So the lab keeps its own list of valid keys, read
from `conf/` itself (every key any YAML of a group, an experiment, a scale or a fidelity cell
writes), and checks two things against it, both before jax starts anything:
- the command line (`check_overrides`, from launch.py and from every multirun's start), so a
  typo costs about a second and a sweep with one never runs a cell;
- the composed config (`check_sections`, from `config.validate`), so a typo in a YAML file or
  in a config a test passes in is refused too.

A user's own keys go under `tags` (`+tags.owner=me`): free-form, recorded in config.yaml,
read by nothing. Only `section.key` (and `logger.<name>.key`) are checked: deeper values
(`env.evaluations`, `logger.mlflow.tags`) are mappings whose keys are the user's.
"""

from __future__ import annotations

import difflib
import functools
import re
from pathlib import Path
from typing import Iterable, Mapping

import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser

from ppo_lab.errors import ConfigError

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
SWEEPS_DIR = CONF_DIR.parent / "sweeps"
USER_NAMESPACE = "tags"  # the one place for a user's own keys
# Sections read with `logger.<name>.<key>`: one level deeper than the rest.
NAMED_SECTIONS = ("logger",)
# Top-level keys that are no section of the lab's: Hydra's own, and the user's namespace.
NOT_CHECKED = ("hydra", USER_NAMESPACE)
_PACKAGE = re.compile(r"^#\s*@package\s+(\S+)", re.M)


class UnknownKeyError(ConfigError):
    """A key the lab does not read: a typo, or a user's own key outside `tags`."""

    def __init__(self, key: str, suggestions: list[str] | tuple[str, ...] = (), option: str | None = None,
                 option_keys: list[str] | tuple[str, ...] = ()):
        """`option`: the group option the command selects for the key's section (`env=cartpole`),
        whose keys (`option_keys`) alone were searched for suggestions."""
        self.suggestions, self.option, self.option_keys = list(suggestions), option, list(option_keys)
        if self.suggestions:
            hint = f"did you mean {' or '.join(self.suggestions)}?"
        elif option:
            hint = f"no key of {option} is close; it reads {', '.join(self.option_keys)}"
        else:
            hint = "no key of that section is close"
        ConfigError.__init__(self, key, None, "")
        self.args = (f"unknown config key {key}: {hint} (your own keys go under {USER_NAMESPACE}.*, "
                     f"e.g. +{USER_NAMESPACE}.note=...; `python launch.py --help` lists the common keys)",)

    def __reduce__(self):
        return type(self), (self.key, self.suggestions, self.option, self.option_keys)


class UnknownOptionError(ConfigError):
    """A config group option (`env=foo`) with no file in conf/<group>/."""

    def __init__(self, group: str, option: str, choices: list[str] | tuple[str, ...]):
        self.group, self.option, self.choices = group, option, list(choices)
        close = difflib.get_close_matches(option, self.choices, n=2)
        ConfigError.__init__(self, group, option, "")
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        self.args = (f"unknown option {group}={option}: {hint}valid: {', '.join(self.choices)}",)

    def __reduce__(self):
        return type(self), (self.group, self.option, self.choices)


def _package_of(path: Path, text: str) -> str:
    """Where a YAML file's keys land: its `# @package` line, else its group's folder."""
    found = _PACKAGE.search(text)
    group = path.parent.relative_to(CONF_DIR).as_posix() if path.is_relative_to(CONF_DIR) else ""
    package = found.group(1) if found else group.replace("/", ".")
    if package.startswith("_global_"):
        package = package[len("_global_"):].lstrip(".")
    return package.replace("_group_", group.replace("/", "."))


def _paths(node, prefix: str, depth: int) -> Iterable[str]:
    if not isinstance(node, Mapping) or depth == 0:
        return
    for key, value in node.items():
        if key == "defaults":
            continue
        path = f"{prefix}.{key}" if prefix else str(key)
        yield path
        yield from _paths(value, path, depth - 1)


@functools.cache
def known_keys() -> frozenset[str]:
    """Every dotted key (to `section.key`, `logger.<name>.key`) some file of conf/ or sweeps/ writes."""
    keys = {USER_NAMESPACE}
    for path in [*CONF_DIR.rglob("*.yaml"), *SWEEPS_DIR.glob("*.yaml")]:
        text = path.read_text()
        package = "" if path.is_relative_to(SWEEPS_DIR) or path.parent == CONF_DIR else _package_of(path, text)
        data = yaml.safe_load(text) or {}
        keys.update(p for p in _paths(data, package, 3) if not p.startswith("hydra"))
        if package:
            keys.update(".".join(package.split(".")[: i + 1]) for i in range(len(package.split("."))))
    return frozenset(keys)


def group_options(group: str) -> list[str] | None:
    """The options of a config group of conf/ (`env`, `hydra/launcher`), None if it is no group."""
    folder = CONF_DIR / group
    if not group or not folder.is_dir():
        return None
    return sorted(p.stem for p in folder.glob("*.yaml"))


def _depth(key: str) -> int:
    return 3 if key.split(".")[0] in NAMED_SECTIONS else 2


def suggest(key: str) -> list[str]:
    """The closest valid keys: of the same section first, then of any section."""
    section = key.rsplit(".", 1)[0] + "." if "." in key else ""
    same = sorted(k for k in known_keys() if k.startswith(section) and k.count(".") == key.count("."))
    close = difflib.get_close_matches(key, same, n=3, cutoff=0.6)
    if not close and not key.startswith("hydra."):  # Hydra's own keys are not the lab's to guess
        leaf = key.rsplit(".", 1)[-1]
        by_leaf = {k.rsplit(".", 1)[-1]: k for k in sorted(known_keys()) if "." in k}
        close = [by_leaf[m] for m in difflib.get_close_matches(leaf, list(by_leaf), n=3, cutoff=0.75)]
    return close


def _defaults_choice(path: Path, group: str) -> str | None:
    """The option a YAML file's defaults list picks for `group` (`- env: x`, `- override /env: x`)."""
    if not path.exists():
        return None
    for item in (yaml.safe_load(path.read_text()) or {}).get("defaults") or []:
        if isinstance(item, Mapping):
            for name, option in item.items():
                if str(name).removeprefix("override").strip().lstrip("/") == group and isinstance(option, str):
                    return option
    return None


def selected_option(group: str, overrides: list) -> str | None:
    """The one option of `group` a command line composes (parsed overrides): its own `group=X`,
    else the one its `experiment=` picks, else conf/config.yaml's default; None for a sweep of options."""
    given = {o.key_or_group: o for o in overrides}

    def single(override):
        value = override.value() if not override.is_sweep_override() else None
        return value if isinstance(value, str) else None

    if group in given:
        return single(given[group])
    if "experiment" in given:
        experiment = single(given["experiment"])
        if experiment is None:
            return None
        found = _defaults_choice(CONF_DIR / "experiment" / f"{experiment}.yaml", group)
        if found:
            return found
    return _defaults_choice(CONF_DIR / "config.yaml", group)


def option_keys(group: str, option: str) -> list[str]:
    """The `section.key`s one option file of a group writes (conf/env/cartpole.yaml: env.name, ...)."""
    path = CONF_DIR / group / f"{option}.yaml"
    if not path.exists():
        return []
    text = path.read_text()
    keys = _paths(yaml.safe_load(text) or {}, _package_of(path, text), 3)
    return sorted(k for k in keys if k.count(".") == 1 and not k.endswith("_"))  # `_target_`: wiring, not a setting


def check_option_key(key: str, overrides: list) -> None:
    """A key of a group's section (`env.lenght`) that no option reads, refused with suggestions
    from the option this command selects (env=cartpole's keys, not the foraging world's)."""
    section = key.split(".")[0]
    several = len(group_options(section) or []) > 1 and section not in NAMED_SECTIONS  # logger=[...]: a list
    option = selected_option(section, overrides) if several else None
    keys = option_keys(section, option) if option else []
    if not keys:
        check_key(key)
        return
    checked = ".".join(key.split(".")[: _depth(key)])
    if checked in known_keys():
        return
    close = difflib.get_close_matches(checked, keys, n=3, cutoff=0.6)
    raise UnknownKeyError(checked, close, f"{section}={option}", keys)


def check_key(key: str) -> None:
    """Refuse a dotted key (from the command line or a config) the lab does not read."""
    parts = key.split(".")
    if parts[0] in NOT_CHECKED:
        return
    checked = ".".join(parts[: _depth(key)])
    if checked not in known_keys():
        raise UnknownKeyError(checked, suggest(checked))


def check_sections(cfg: Mapping) -> None:
    """Every key of a resolved config down to `section.key` (`logger.<name>.key`) is one the lab reads."""
    for path in _paths(cfg, "", 3):
        if path.count(".") < _depth(path):
            check_key(path)


def check_overrides(overrides: Iterable[str]) -> None:
    """Command-line overrides (Hydra syntax, sweeps included): every key one the lab reads and
    every group option one that exists, before Hydra composes anything."""
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    for override in parsed:
        name = override.key_or_group
        if override.is_delete() or name.split(".")[0].split("/")[0] in NOT_CHECKED:
            continue
        options = group_options(name)
        if options is None and "." not in name and "/" not in name and name not in known_keys():
            raise UnknownKeyError(name, suggest(name))
        if options is None:
            check_option_key(name, parsed)
            continue
        for option in _option_values(override):
            if isinstance(option, str) and option not in options:
                raise UnknownOptionError(name, option, options)


def _option_values(override) -> list:
    """The option names a group override selects (one, or each of a choice sweep); none for
    other sweeps (a range of options is not a thing)."""
    if not override.is_sweep_override():
        value = override.value()
        return [value] if not isinstance(value, list) else list(value)  # logger=[csv,mlflow]: a list of options
    try:
        return list(override.sweep_string_iterator())
    except Exception:  # noqa: BLE001 - interval()/range() sweeps of a group: Hydra says what is wrong
        return []
