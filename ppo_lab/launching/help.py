"""`python launch.py --help`, written for people: the groups one line each, the keys people
change most with what they mean and their value in the config the command would run, and
where the rest is. Hydra's own dump (138 lines, no meanings) stays at `--hydra-help` and
`--cfg job`.

The values are composed, not copied: `python launch.py experiment=cartpole --help` shows
CartPole's, from the options Hydra selected (a user's config folder on `hydra.searchpath`
included). Which keys are listed, and in which order, is the `help` mark on their fields
(`help_keys`: the fields marked help); what a key means is the comment ending its line in its YAML
(`meaning`), where its default is. A reward mode is offered for its env alone.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping

from omegaconf import OmegaConf

from ppo_lab import config_keys
from ppo_lab.config import declared_keys
from ppo_lab.config_keys import USER_NAMESPACE, group_options, option_file, searchpath_folders, train_command
from ppo_lab.launching.command_line import compose, env_rewards, searchpath_entries

GROUPS = {
    "experiment": "a preset setting what differs",
    "env": "the environment",
    "reward": "the env's reward mode, for an env with several (default: the env's own)",
    "network": "the network's torso",
    "hardware": "devices, precision, memory, a ppo.num_envs for them",
    "logger": "besides metrics.csv: logger=[csv,mlflow]",
    "scale": "picked for you: sizes that suit the env on this hardware",
    "fidelity": "Goodhart fidelity cells: +fidelity=reference",
}


# A YAML line `key: value  # meaning`: a key's one-line meaning is the comment ending its line.
_KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][\w-]*):(?P<rest>.*)$")
_LINE_COMMENT = re.compile(r"\s#\s(?P<meaning>.*)$")


def help_keys() -> list[str]:
    """The keys `--help` lists: the fields marked help (`config.key`), in their order."""
    return [k for k, f in declared_keys().items() if f.metadata.get("help")]


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
        comment = _LINE_COMMENT.search(found["rest"])
        if comment:
            meanings[".".join([k for _, k in parents] + [found["key"]])] = comment["meaning"].strip()
        parents.append((indent, found["key"]))
    return meanings


def meaning(key: str, choices: Mapping[str, str] | None = None, folders=None) -> str | None:
    """A dotted key's one-line meaning, from the YAML that declares it: its group's file (the
    option `choices` names first, then the group's others), or conf/config.yaml; None if none says."""
    section, _, rest = key.partition(".")
    options = group_options(section, folders) if rest else None
    if options is None:
        return inline_meanings(config_keys.CONF_DIR / "config.yaml").get(key)
    chosen = (choices or {}).get(section)
    for option in ([chosen] if chosen in options else []) + options:
        found = inline_meanings(option_file(section, option, folders)).get(rest)
        if found:
            return found
    return None


def _value(cfg, key: str) -> str:
    value = OmegaConf.select(cfg, key, default="?")
    value = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
    return "null" if value is None else str(value).replace(" ", "")


def help_text(overrides: list[str], config_dir=None, config_name: str = "config") -> str:
    """The help for the config these overrides compose (errors in them are the caller's)."""
    cfg = compose(overrides, config_dir, config_name, hydra=True)
    folders = searchpath_folders(searchpath_entries(overrides))
    command = train_command()
    lines = [f"usage: {command} [group=option ...] [key=value ...] [-m for a sweep]", "",
             "Trains PPO on the composed config; a run ends saying where its results are.", "",
             "Config groups (group=option):"]
    choices = OmegaConf.to_container(cfg.hydra.runtime.choices)
    for group, says in GROUPS.items():
        # a reward mode only for the env that takes it
        options = env_rewards(cfg.env.name, folders) if group == "reward" else group_options(group, folders) or []
        chosen = choices.get(group)
        listed = ", ".join(options) if len(options) <= 14 else f"{len(options)} in conf/{group}/"
        lines.append(f"  {group:<11} {says}: {listed}" + (f" (now {chosen})" if chosen in options else ""))
    lines.append("  ppo, train  the sections every key below is in (conf/ppo/default.yaml, conf/train/default.yaml)")
    shown = " ".join(overrides) or "the defaults"
    lines += ["", f"Keys people change most (key=value; value now, for {shown}):"]
    keys = help_keys()
    width = max(map(len, keys))
    for key in keys:
        says = meaning(key, choices, folders) or "(no meaning in its YAML: see conf/)"
        lines.append(f"  {key:<{width}}  {_value(cfg, key):<10} {says}")
    lines += ["",
              f"Your own keys: +{USER_NAMESPACE}.NAME=VALUE (recorded, change nothing). Any other unknown key is refused.",
              f"The rest: {command} [overrides] --cfg job prints every key of the composed config;",
              f"each {config_keys.CONF_DIR}/<group>/*.yaml says what its keys do; README.md and docs/guide.md the rest.",
              f"Your project's own groups: ./{config_keys.PROJECT_CONF}/<group>/ of the working folder (docs/project.md).",
              f"Examples: {command} experiment=cartpole num_seeds=4",
              f"          {command} -m experiment=cartpole ppo.lr=1e-3,3e-4",
              "Hydra's own help: --hydra-help."]
    return "\n".join(lines)
