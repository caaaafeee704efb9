"""`ppo-lab train ARGS` and `python launch.py ARGS`: one command line, one way.

A project folder of one's own (docs/project.md) is found by convention: the working folder's
`conf/` joins Hydra's search path (`with_project_config`), as `hydra.searchpath` would
add it, recorded with the run's Hydra overrides (so `ppo-lab resume` replays it). Then a
misspelled key or option is refused in about a second, before jax and the lab load (about 2 s
more) and long before anything compiles; then the Hydra app (`launching.app`) runs.
"""

from __future__ import annotations

from pathlib import Path

from ppo_lab import config_keys
from ppo_lab.launching.command_line import SEARCHPATH_KEY, refuse_unknown_overrides, searchpath_entries, with_searchpath


def with_project_config(argv: list[str]) -> list[str]:
    """`argv` with the working folder's conf/ on Hydra's search path (after the folders the
    command names itself), when there is one that is not the lab's own (a checkout's working
    folder is no project of its own) and the command does not name it already."""
    project = (Path.cwd() / config_keys.PROJECT_CONF).resolve()
    given = [a for a in argv if a.startswith(SEARCHPATH_KEY + "=")]
    if (not project.is_dir() or project == config_keys.CONF_DIR
            or project in config_keys.searchpath_folders(searchpath_entries(given))):
        return list(argv)
    return with_searchpath(argv, [f"file://{project}"])


def main(argv: list[str]) -> None:
    argv = with_project_config(argv)
    refuse_unknown_overrides(argv)
    from ppo_lab.launching.app import launch  # jax, flax, optax and the whole lab: after the check

    launch(argv)
