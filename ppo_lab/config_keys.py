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

A user's own config folder on Hydra's search path (`hydra.searchpath=[file://MY/conf]`, its
env in `MY/conf/env/corridor.yaml`) counts as conf/ does: its options are valid options and its
keys known keys. The folders are taken (`use_config_dirs`) from the command line
(`check_overrides` sees the override), from each job's Hydra config in whatever process runs
it (launching/callbacks.py) and from a run dir's manifest.json when a run is loaded again
(`rundir.use_recorded_parts`).
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
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
# A YAML line `key: value  # meaning`: a key's one-line meaning is the comment ending its line.
_KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][\w-]*):(?P<rest>.*)$")
_LINE_COMMENT = re.compile(r"\s#\s(?P<meaning>.*)$")
SEARCHPATH_KEY = "hydra.searchpath"
# Config folders of the user's on Hydra's search path, in the order added (conf/ comes first).
_user_config_dirs: list[Path] = []


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


def searchpath_folder(entry: str) -> Path | None:
    """The folder of one Hydra search path entry: `file://DIR` (relative to the working
    folder) or `pkg://PACKAGE` (where that package lies; None when it is not importable)."""
    if entry.startswith("file://"):
        return Path(entry[len("file://"):]).resolve()
    if entry.startswith("pkg://"):
        try:
            spec = importlib.util.find_spec(entry[len("pkg://"):].replace("/", "."))
        except (ImportError, ValueError):
            return None
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        return Path(locations[0]).resolve() if locations else None
    return None


def use_config_dirs(entries) -> None:
    """Add config folders (search path entries `file://DIR`, `pkg://PACKAGE`, or folders) to
    the ones whose options and keys are valid, for the rest of this process."""
    for entry in entries or ():
        folder = searchpath_folder(entry) if "://" in str(entry) else Path(entry).resolve()
        if folder is not None and folder != CONF_DIR and folder not in _user_config_dirs:
            _user_config_dirs.append(folder)


def user_config_dirs() -> list[Path]:
    """The user's config folders added so far (`use_config_dirs`), conf/ not counted."""
    return list(_user_config_dirs)


def config_dirs() -> list[Path]:
    """Every config folder options are looked for in: conf/, then the user's."""
    return [CONF_DIR, *_user_config_dirs]


def option_file(group: str, option) -> Path | None:
    """The YAML file of `group=option` in the first config folder that has it (Hydra's order)."""
    for folder in config_dirs():
        path = folder / group / f"{option}.yaml"
        if path.is_file():
            return path
    return None


def _package_of(path: Path, text: str, root: Path) -> str:
    """Where a YAML file of config folder `root` lands: its `# @package` line, else its group's folder."""
    found = _PACKAGE.search(text)
    group = path.parent.relative_to(root).as_posix()
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


def known_keys() -> frozenset[str]:
    """Every dotted key (to `section.key`, `logger.<name>.key`) some file of conf/, sweeps/ or
    a user's config folder writes."""
    return _known_keys(tuple(config_dirs()))


@functools.cache
def _known_keys(folders: tuple[Path, ...]) -> frozenset[str]:
    keys = {USER_NAMESPACE}
    files = [(path, folder) for folder in folders for path in folder.rglob("*.yaml")]
    for path, root in [*files, *((path, None) for path in SWEEPS_DIR.glob("*.yaml"))]:
        text = path.read_text()
        package = "" if root is None or path.parent == root else _package_of(path, text, root)
        data = yaml.safe_load(text) or {}
        keys.update(p for p in _paths(data, package, 3) if not p.startswith("hydra"))
        if package:
            keys.update(".".join(package.split(".")[: i + 1]) for i in range(len(package.split("."))))
    return frozenset(keys)


def inline_meanings(path: Path) -> dict[str, str]:
    """A YAML file's keys (dotted, as the file nests them) -> their one-line meanings: the
    comment at the end of each key's line (a comment block above it may say more)."""
    meanings, parents = {}, []  # parents: (indent, key) of the enclosing mappings
    for line in path.read_text().splitlines():
        found = _KEY_LINE.match(line)
        if not found:
            continue
        indent = len(found["indent"])
        while parents and parents[-1][0] >= indent:
            parents.pop()
        dotted = ".".join([k for _, k in parents] + [found["key"]])
        comment = _LINE_COMMENT.search(found["rest"])
        if comment:
            meanings[dotted] = comment["meaning"].strip()
        parents.append((indent, found["key"]))
    return meanings


def meaning(key: str, choices: Mapping[str, str] | None = None) -> str | None:
    """A dotted key's one-line meaning, from the YAML that declares it: its group's file (the
    option `choices` names first, then the group's others), or conf/config.yaml; None if none says."""
    section, _, rest = key.partition(".")
    options = group_options(section) if rest else None
    if options is None:
        return inline_meanings(CONF_DIR / "config.yaml").get(key)
    chosen = (choices or {}).get(section)
    for option in ([chosen] if chosen in options else []) + options:
        found = inline_meanings(CONF_DIR / section / f"{option}.yaml").get(rest)
        if found:
            return found
    return None


def group_options(group: str) -> list[str] | None:
    """The options of a config group (`env`, `hydra/launcher`) in conf/ and the user's config
    folders (those in subfolders too: `zoo/cartpole`), None if it is a group in none of them."""
    folders = [folder / group for folder in config_dirs() if group and (folder / group).is_dir()]
    if not folders:
        return None
    # An option in a subfolder is named by its path, as Hydra names it: experiment=zoo/cartpole.
    return sorted({p.relative_to(folder).with_suffix("").as_posix() for folder in folders for p in folder.rglob("*.yaml")})


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
    """The `section.key`s one option file of a group writes (conf/env/cartpole.yaml: env.name, ...),
    in conf/ or a user's config folder."""
    path = option_file(group, option)  # conf/ first, then the user's config folders
    if path is None:
        return []
    text = path.read_text()
    keys = _paths(yaml.safe_load(text) or {}, _package_of(path, text, path.parent.parent), 3)
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
    every group option one that exists, before Hydra composes anything. A search path among
    them (`hydra.searchpath=[file://MY/conf]`) adds its folders' options and keys first."""
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    for override in parsed:
        if override.key_or_group == SEARCHPATH_KEY and not override.is_delete():
            value = override.value()
            use_config_dirs(value if isinstance(value, list) else [value])
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
    other sweeps (a range of options is not a thing). A mapping is no option: it sets keys."""
    if not override.is_sweep_override():
        value = override.value()
        return [value] if not isinstance(value, list) else list(value)  # logger=[csv,mlflow]: a list of options
    try:  # the values, not their strings: a mapping sets the group's keys (`pbt={exploit: false},{...}`)
        values = list(override.sweep_iterator())
    except Exception:  # noqa: BLE001 - interval()/range() sweeps of a group: Hydra says what is wrong
        return []
    return [o for v in values for o in (v if isinstance(v, list) else [v])]
