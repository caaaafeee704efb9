"""The command line's errors in the lab's one form: `error: ...` printed once, exit 2.

Before the lab (and jax) loads, `refuse_unknown_overrides` has Hydra compose the config the
command names, as `launch.py` will (`check_overrides`): Hydra refuses a value of a wrong type,
a key no section has and an option no group has, and `refusal` says so in the lab's words,
naming the closest keys (of the option the command selects, for a part whose keys are its
own: env=cartpole's, not the foraging world's) or options. What Hydra lets through is checked
against the config's dataclasses (`config.typed_config`): a key added with `+` (Hydra adds it
even to a closed node), and a multirun's sweeps (the command line's, and a sweep file's
`hydra.sweeper.params`, an Optuna search space among them) by their first value, so a typo
costs about a second and a multirun with one launches no job. What Hydra refuses later, while
`launch.py` composes, comes back through `lab_error` in the same form.
"""

from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import CompactHydraException, MissingConfigException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ppo_lab import config_keys
from ppo_lab.config import ENV_WIRING_KEYS, config_error, declared_keys, typed_config
from ppo_lab.config_keys import USER_NAMESPACE, UnknownKeyError, group_options, suggest
from ppo_lab.errors import ConfigError
from ppo_lab.resolvers import scaled as _scaled  # noqa: F401 - registers ${ppo_lab.scaled:...}: a sweep file composed here uses it

class UnknownOptionError(ConfigError):
    """A config group option (`env=foo`) with no file in conf/<group>/ (or, for a reward mode,
    none the selected env takes)."""

    def __init__(self, group: str, option: str, choices):
        self.group, self.option, self.choices = group, option, list(choices)
        close = difflib.get_close_matches(option, self.choices, n=2)
        ConfigError.__init__(self, group, option, "")
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        self.args = (f"unknown option {group}={option}: {hint}valid: {', '.join(self.choices)}",)

    def __reduce__(self):
        return type(self), (self.group, self.option, self.choices)


class Refused(ConfigError):
    """A config the command line cannot compose, said in a sentence of its own (Hydra's, or the lab's
    for a key of an option the command did not select)."""

    def __init__(self, key: str, message: str):
        ConfigError.__init__(self, key, None, "")
        self.args = (message,)

    def __reduce__(self):
        return type(self), (self.key, self.args[0])


SEARCHPATH_KEY = "hydra.searchpath"
OWN_KEYS = ("env", "reward")  # sections whose keys are their option's own: free-form, no dataclass
_NOT_IN_STRUCT = re.compile(r"Key '[^']*' is not in struct\s+full_key: (\S+)")


def overrides_of(argv: list[str]) -> list[str]:
    """The `key=value` overrides of a launch.py command line (Hydra's flags and their values
    such as `-cd sweeps` carry no `=` as a separate word, or start with `-`)."""
    return [a for a in argv if "=" in a and not a.startswith("-")]


def config_source(argv: list[str]) -> tuple[Path | None, str]:
    """The config folder and name a command line names (`-cd sweeps -cn zoo`; none: conf/, config)."""
    flags = {"-cd": None, "--config-dir": None, "-cn": None, "--config-name": None}
    for flag, value in zip(argv, argv[1:]):
        if flag in flags:
            flags[flag] = value
    folder = flags["-cd"] or flags["--config-dir"]
    return (Path(folder).resolve() if folder else None), flags["-cn"] or flags["--config-name"] or "config"


def compose(overrides, config_dir: Path | None = None, config_name: str = "config", hydra: bool = False):
    """The config Hydra composes for these overrides, from conf/ or a named sweep's folder (with
    conf/ on its search path, as `launch.py -cd FOLDER` has it), the user's config folders met so
    far (`config_keys.use_config_dirs`) on its search path too."""
    folder = Path(config_dir or config_keys.CONF_DIR).resolve()
    entries = [f"file://{d}" for d in config_keys.user_config_dirs()]
    entries += [f"file://{config_keys.CONF_DIR}"] if folder != config_keys.CONF_DIR else []
    with initialize_config_dir(config_dir=str(folder), version_base="1.3"):
        return hydra_compose(config_name=config_name, overrides=with_searchpath(overrides, entries), return_hydra_config=hydra)


def with_searchpath(argv, entries) -> list[str]:
    """`argv` with `entries` on Hydra's search path, after the folders it names itself (each once)."""
    given = [a for a in argv if a.startswith(SEARCHPATH_KEY + "=")]
    joined = ",".join(dict.fromkeys([*searchpath_entries(given), *entries]))
    return [a for a in argv if a not in given] + ([f"{SEARCHPATH_KEY}=[{joined}]"] if joined else [])


def searchpath_entries(overrides) -> list[str]:
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        if override.key_or_group == SEARCHPATH_KEY and not override.is_delete():
            value = override.value()
            return [str(v) for v in (value if isinstance(value, list) else [value])]
    return []


def override_text(value) -> str:
    """A value as Hydra override text (`[64,64]`, `null`, `0.001`, `'a b'`)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(override_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{override_text(v)}" for k, v in value.items()) + "}"
    text = str(value)
    if text and all(c.isalnum() or c in "_-./:" for c in text):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _first(override) -> str:
    """An override with the first value of its sweep (the override itself if it sweeps nothing)."""
    if not override.is_sweep_override():
        return override.input_line
    if override.is_interval_sweep():  # interval(a, b), an Optuna range: its low end
        return f"{override.get_key_element()}={override.value().start}"
    return f"{override.get_key_element()}={next(override.sweep_string_iterator())}"


def _options(override) -> list:
    """The option names a group override selects (one, each of a sweep's, a list's); a mapping
    is no option: it sets the group's keys (`pbt={exploit: false}`)."""
    values = list(override.sweep_iterator()) if override.is_choice_sweep() or override.is_range_sweep() else [override.value()]
    return [o for v in values for o in (v if isinstance(v, list) else [v]) if isinstance(o, str)]


def check_overrides(overrides, config_dir: Path | None = None, config_name: str = "config") -> None:
    """Refuse (a ConfigError) overrides naming a key, an option or a value the config does not
    take, with the closest valid ones; their search path's folders count as conf/ from here on."""
    config_keys.use_config_dirs(searchpath_entries(overrides))
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    _check_options(parsed, overrides, config_dir, config_name)
    probe = [_first(o) for o in parsed]
    cfg = _composed(probe, config_dir, config_name)
    params = OmegaConf.to_container(cfg.hydra.sweeper, resolve=True).get("params") or {}
    if params:  # a sweep file's or an Optuna search space's: its keys with the command line's
        given = {o.key_or_group for o in parsed}  # the command line's win over the file's
        swept = [o for o in OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in params.items()])
                 if o.key_or_group not in given]
        cfg = _composed(probe + [_first(o) for o in swept], config_dir, config_name)
        parsed += swept
    values = {k: v for k, v in OmegaConf.to_container(cfg).items() if k != "hydra"}
    typed_config(values)  # a key Hydra added to a closed node (`+ppo.lrr`): refused by the dataclasses
    for override in parsed:  # `+env.X`: the env's (a reward mode's) own keys are its option's
        section, _, name = override.key_or_group.partition(".")
        if override.is_add() and section in OWN_KEYS and name:
            added = {o.key_or_group.split(".")[1] for o in parsed if o.is_add() and o.key_or_group.startswith(section + ".")}
            own = set(values[section]) - added
            if section == "env":  # the lab's wiring keys, any env may add them (`+env.evaluations=...`)
                own |= set(ENV_WIRING_KEYS)
            if name.split(".")[0] not in own:
                raise _unknown_own_key(override.key_or_group, cfg, own)


def _check_options(parsed, overrides, config_dir, config_name) -> None:
    """Each group option the overrides select has a file, and a preset of one's own is one."""
    for override in parsed:
        options = group_options(override.key_or_group)
        if options is not None and not override.is_delete() and not override.is_hydra_override():
            for option in _options(override):
                if option not in options:
                    raise _unknown_option(override.key_or_group, option, overrides, config_dir, config_name)
                _check_preset_header(override.key_or_group, option)


def _check_preset_header(group: str, option: str) -> None:
    """A preset (experiment=..., +fidelity=...) without `# @package _global_`: said so, where
    Hydra would say "Could not override 'env@experiment.env'" or put its keys under `experiment.`."""
    path = config_keys.option_file(group, option)
    if group in config_keys.preset_groups() and path is not None and not config_keys.sets_global_keys(path):
        raise Refused(group, f"{group}={option}: {path} must start with the line `# @package _global_` (a preset "
                             f"sets keys of the whole config: env, ppo.lr, ...; without that line Hydra puts them "
                             f"under `{group}.` and says \"Could not override 'env@{group}.env'\")")


_PRESET_OVERRIDE = re.compile(r"In '([\w/]+)/([\w/.-]+)': Could not override")


def _composed(overrides, config_dir, config_name):
    try:
        return compose(overrides, config_dir, config_name, hydra=True)
    except (CompactHydraException, OmegaConfBaseException) as exc:
        raise refusal(exc, overrides, config_dir, config_name) from None


def _unknown_option(group, option, overrides, config_dir, config_name) -> UnknownOptionError:
    """An option no file of its group has; for a reward mode, the selected env's modes listed."""
    if group == "reward":
        rest = [o for o in overrides if not o.split("=")[0].lstrip("+~") == "reward"]
        return UnknownOptionError(group, option, env_rewards(compose(rest, config_dir, config_name).env.name))
    return UnknownOptionError(group, option, group_options(group))


def env_rewards(env: str, folders=None) -> list[str]:
    """The reward modes env `env` takes: those whose YAML names it as their `env`, or no env."""
    return [o for o in group_options("reward", folders) or []
            if OmegaConf.load(config_keys.option_file("reward", o, folders)).get("env") in (None, env)]


def _unknown_own_key(dotted: str, cfg, keys) -> ConfigError:
    """A key of the env's (reward's) own no file of the selected option has: its keys suggested;
    or one another option has (`env.grid_size` with env=cartpole): select that option first."""
    section, name = dotted.split(".")[:2]
    checked = f"{section}.{name}"
    option = OmegaConf.select(cfg, f"hydra.runtime.choices.{section}")
    for other in group_options(section) or []:
        if other != option and name in (OmegaConf.load(config_keys.option_file(section, other)) or {}):
            return _not_selected(checked, f"the {section}=OPTION that has it", f" ({section}={other} has it)")
    own = sorted(f"{section}.{k}" for k in keys if not k.endswith("_"))  # `_target_`: wiring, not a setting
    return UnknownKeyError(checked, suggest(checked, own) if own else [], f"{section}={option}", own)


def _not_selected(dotted: str, select: str, which: str = "") -> Refused:
    return Refused(dotted, f"{dotted} is not in this config: it belongs to another option of its group "
                           f"(select {select} first){which}")


def refusal(exc: BaseException, overrides=(), config_dir=None, config_name="config") -> ConfigError | None:
    """Hydra's composition error (or OmegaConf's within it) as the lab says it; None for another."""
    inner = exc
    while inner is not None:  # a lab error Hydra wrapped (a plugin refusing its config): said as itself
        if isinstance(inner, ConfigError):
            return inner
        if isinstance(inner, OmegaConfBaseException) and not _NOT_IN_STRUCT.search(str(inner)):
            return config_error(inner)
        inner = inner.__cause__ or inner.__context__
    found = _PRESET_OVERRIDE.search(str(exc))
    if found and found.group(1) in config_keys.preset_groups():  # a preset of one's own, selected by another file
        try:
            _check_preset_header(found.group(1), found.group(2))
        except Refused as refused:
            return refused
    if isinstance(exc, MissingConfigException) and exc.missing_cfg_file:
        group, _, option = str(exc.missing_cfg_file).rpartition("/")
        if group_options(group) is not None and not group.startswith("hydra"):  # Hydra's own groups: its message
            return _unknown_option(group, option, [o for o in overrides if not o.startswith(group + "=")], config_dir,
                                   config_name)
    found = _NOT_IN_STRUCT.search(f"{exc}\n{exc.__cause__}")
    if not isinstance(exc, CompactHydraException) or not found:
        return None if not isinstance(exc, CompactHydraException) else Refused("config", str(exc).strip())
    dotted = found.group(1)
    section = dotted.split(".")[0]
    if section == USER_NAMESPACE:
        return Refused(dotted, f"{dotted} is a new key of your own: add it with a plus, +{dotted}=...")
    if section in OWN_KEYS:
        rest = [o for o in overrides if o.split("=")[0].lstrip("+") != dotted]
        cfg = compose(rest, config_dir, config_name, hydra=True)
        return _unknown_own_key(dotted, cfg, OmegaConf.to_container(cfg)[section])
    if dotted in declared_keys():  # a lab logger's key, that logger not selected
        return _not_selected(dotted, f"logger=[csv,{dotted.split('.')[1]}]")
    return UnknownKeyError(dotted, suggest(dotted, declared_keys()))


def fail(message: object) -> None:
    """The lab's form of a user error: once on stderr, exit 2."""
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def refuse_unknown_overrides(argv: list[str]) -> None:
    try:
        check_overrides(overrides_of(argv), *config_source(argv))
    except ConfigError as exc:
        fail(exc)
    if any(a.lstrip("+").startswith("hardware.num_envs=") for a in overrides_of(argv)):
        print(NUM_ENVS_NOTE, file=sys.stderr, flush=True)


# Two names, two meanings: said when a user reaches for the one that may do nothing.
NUM_ENVS_NOTE = ("note: hardware.num_envs is the hardware preset's default for ppo.num_envs, used only where no "
                 "experiment or scale sets ppo.num_envs; to set the number of envs, use ppo.num_envs")


def lab_error(exc: BaseException, argv: list[str] = ()) -> str | None:
    """Hydra's composition error as the lab says it (the command's overrides for the hints), or
    None for any other error."""
    if not isinstance(exc, CompactHydraException):
        return None
    found = refusal(exc, overrides_of(list(argv)), *config_source(list(argv)))
    return str(found) if found is not None else str(exc).strip()
