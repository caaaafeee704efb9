"""Where the config groups are, which options they have, and how an unknown key is refused
(naming the closest valid ones); which keys exist is ppo_lab/config.py's dataclasses'.

A user's own config folder on Hydra's search path (`hydra.searchpath=[file://MY/conf]`) counts
as conf/ does: its options are valid. The folders come (`use_config_dirs`) from the command line,
each job's Hydra config (launching/callbacks.py) and a run dir's manifest.json (`rundir`). The
working folder's `conf/` is a project's own: `ppo-lab train` puts it on the search path
without being asked (launching/train_command.py).
"""

from __future__ import annotations

import difflib
import functools
import sys
from pathlib import Path

from ppo_lab import parts
from ppo_lab.errors import ConfigError

# The folder that holds the package: a checkout's root (conf/, docs/, records), or an install's site-packages.
PROJECT_ROOT = Path(__file__).resolve().parent.parent
# The config groups: the one place that says where they are. ppo_lab/conf is the repository's
# conf/ in a checkout (a link, resolved here, so paths read as the folder one edits) and the
# shipped copy in an installed lab (pyproject.toml's package data).
CONF_DIR = (Path(__file__).parent / "conf").resolve()
# A project of one's own keeps its config groups in this folder of its working folder (docs/project.md).
PROJECT_CONF = "conf"
USER_NAMESPACE = "tags"  # the one place for a user's own keys
# Config folders of the user's on Hydra's search path, in the order added (conf/ comes first).
_user_config_dirs: list[Path] = []


def train_command() -> str:
    """How this process was asked to train, for the commands the lab's messages show: a
    checkout's `python launch.py`, or the installed `ppo-lab train`."""
    return "python launch.py" if Path(sys.argv[0]).name == "launch.py" else "ppo-lab train"


class UnknownKeyError(ConfigError):
    """A key the lab does not read: a typo, or a user's own key outside `tags`."""

    def __init__(self, key: str, suggestions=(), option: str | None = None, option_keys=()):
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
                     f"e.g. +{USER_NAMESPACE}.note=...; `{train_command()} --help` lists the common keys)",)

    def __reduce__(self):
        return type(self), (self.key, self.suggestions, self.option, self.option_keys)


def suggest(dotted: str, known) -> list[str]:
    """The closest of the `known` keys: of the same section first, then of any by the last name."""
    section = dotted.rsplit(".", 1)[0] + "." if "." in dotted else ""
    same = sorted(k for k in known if k.startswith(section) and k.count(".") == dotted.count("."))
    close = difflib.get_close_matches(dotted, same, n=3, cutoff=0.6)
    if not close and not dotted.startswith("hydra."):  # Hydra's own keys are not the lab's to guess
        by_leaf = {k.rsplit(".", 1)[-1]: k for k in sorted(known) if "." in k}
        close = [by_leaf[m] for m in difflib.get_close_matches(dotted.rsplit(".", 1)[-1], list(by_leaf), n=3, cutoff=0.75)]
    return close


def searchpath_folders(entries) -> list[Path]:
    """The folders of Hydra search path entries `file://DIR` (relative to the working folder)."""
    return [Path(str(e).removeprefix("file://")).resolve() for e in entries or () if "://" not in str(e)
            or str(e).startswith("file://")]


def use_config_dirs(entries) -> None:
    """Add a user's config folders (`file://DIR` entries, or folders) to conf/, for this process.
    A project's (a folder named conf/) brings its project's modules: the folder that holds it
    goes on Python's path (`parts.use_project_folder`), so `_target_: my_envs.keydoor.build`
    beside it imports without PYTHONPATH."""
    for folder in searchpath_folders(entries):
        if folder != CONF_DIR and folder not in _user_config_dirs:
            _user_config_dirs.append(folder)
        if folder != CONF_DIR and folder.name == PROJECT_CONF:
            parts.use_project_folder(folder.parent)


def user_config_dirs() -> list[Path]:
    return list(_user_config_dirs)


def config_dirs(folders=None) -> list[Path]:  # conf/, then the user's config folders (added so far, or `folders`)
    return [CONF_DIR, *(_user_config_dirs if folders is None else folders)]


def group_options(group: str, folders=None) -> list[str] | None:
    """The options of a config group in conf/ and the user's config folders (those in
    subfolders too, named as Hydra names them: experiment=zoo/cartpole); None for no group."""
    found = [folder / group for folder in config_dirs(folders) if group and (folder / group).is_dir()]
    if not found:
        return None
    return sorted({p.relative_to(d).with_suffix("").as_posix() for d in found for p in d.rglob("*.yaml")})


def sets_global_keys(path: Path) -> bool:
    """Whether a group's YAML file declares `# @package _global_` in its header (the comment
    lines it starts with), where Hydra reads it: its keys are the whole config's, not its group's."""
    for line in path.read_text().splitlines():
        if not line.startswith("#") and line.strip():
            return False
        if line.lstrip("# ").startswith("@package") and line.split("@package", 1)[1].strip() == "_global_":
            return True
    return False


@functools.cache  # conf/ does not change while the lab runs
def preset_groups() -> tuple[str, ...]:
    """The groups whose options are presets of the whole config (experiment, fidelity, scale):
    those of conf/ whose every option is `# @package _global_`. An option of one's own in such a
    group must be one too."""
    return tuple(sorted(folder.name for folder in CONF_DIR.iterdir() if folder.is_dir() and list(folder.glob("*.yaml"))
                        and all(sets_global_keys(path) for path in folder.rglob("*.yaml"))))


def option_file(group: str, option, folders=None) -> Path | None:
    """The YAML file of `group=option` in the first config folder that has it (Hydra's order)."""
    return next((path for d in config_dirs(folders) if (path := d / group / f"{option}.yaml").is_file()), None)
