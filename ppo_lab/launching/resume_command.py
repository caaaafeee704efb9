"""`ppo-lab resume DIR [KEY=VALUE ...]`: relaunch a run or a sweep exactly as it was launched, from
any folder.

A relaunch into a run dir resumes it from its newest checkpoint (ppo_lab/run/resume.py), but only
with the command that made it: the same overrides, the same search path (a project's conf/, a
`hydra.searchpath`), the same named sweep (`-cd sweeps -cn NAME`) and the same working folder
(relative paths in the config are the working folder's). Hydra records all of them in the run
dir (`.hydra/hydra.yaml`) and a sweep dir (`multirun.yaml`); this command reads them back, goes to
that folder and runs `ppo-lab train` with them into DIR:

- a run dir: the run again, into itself;
- a sweep dir (the folder of `multirun.yaml`): the sweep again, into itself (its completed jobs
  are skipped, the others resume);
- one job's dir of a sweep: that job alone, as a run into its dir.

KEY=VALUE overrides after DIR replace the recorded ones (`train.duration_min=120` for a run that
timed out; a diverged run's changed `ppo.lr` with `allow_config_change=true`).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from ppo_lab import config_keys, rundir
from ppo_lab.launching.command_line import fail

RUN_RECORD = Path(".hydra") / "hydra.yaml"  # Hydra's record of the command that launched a run dir
SWEEP_RECORD = Path("multirun.yaml")  # ... and of the multirun that made a sweep dir
# Hydra overrides a relaunch sets itself, or that only a sweep reads (a job resumed alone is a run).
PLACE_KEYS = ("hydra.run.dir", "hydra.sweep.dir", "hydra.mode")
SWEEP_KEYS = ("hydra.sweep.", "hydra/launcher", "hydra.launcher", "hydra/sweeper", "hydra.sweeper")


@dataclass(frozen=True)
class Launch:
    """What a run or sweep dir says about the command that made it."""
    folder: Path  # the working folder it was launched from
    task: list[str]  # the config's overrides
    hydra: list[str]  # Hydra's own (its search path among them)
    config_dir: Path | None  # a named sweep's folder (-cd), None for the lab's conf/
    config_name: str  # -cn
    sweep: bool  # the record is a sweep dir's
    job: bool  # the record is a run dir's that a sweep made (one of its jobs)


def recorded_launch(target: Path) -> Launch:
    """The launch recorded in `target` (a run, job or sweep dir); ValueError naming what is missing."""
    path = target / (SWEEP_RECORD if (target / SWEEP_RECORD).is_file() else RUN_RECORD)
    if not path.is_file():
        raise ValueError(f"{target} holds neither {RUN_RECORD} (a run dir) nor {SWEEP_RECORD} (a sweep dir): "
                         f"it was not launched by `ppo-lab train` (or launch.py), so nothing says how to relaunch it")
    hydra = OmegaConf.load(path).hydra
    sources = OmegaConf.to_container(hydra.runtime.config_sources)
    named = [Path(s["path"]) for s in sources if s["provider"] == "command-line" and s["schema"] == "file"]
    return Launch(folder=Path(hydra.runtime.cwd), task=list(hydra.overrides.task), hydra=list(hydra.overrides.hydra),
                  config_dir=named[0] if named else None, config_name=hydra.job.config_name,
                  sweep=path.name == SWEEP_RECORD.name, job=str(hydra.mode).endswith("MULTIRUN"))


def _key(override: str) -> str:
    [parsed] = OverridesParser.create().parse_overrides([override])
    return parsed.key_or_group


def command_line(launch: Launch, target: Path, extra: list[str]) -> list[str]:
    """`ppo-lab train`'s arguments that relaunch `launch` into `target` with `extra` overrides."""
    job_alone = launch.job and not launch.sweep
    dropped = PLACE_KEYS + (SWEEP_KEYS if job_alone else ())
    hydra = [o for o in launch.hydra if not _key(o).startswith(dropped)]
    given = {_key(o) for o in extra}
    task = [o for o in launch.task if _key(o) not in given]
    source = (["-cd", str(launch.config_dir)] if launch.config_dir else []) + (
        ["-cn", launch.config_name] if launch.config_name != "config" else [])
    if launch.sweep:
        place = ["hydra.mode=MULTIRUN", f"hydra.sweep.dir={target}"]
    else:  # a job of a sweep alone is a run: a named sweep's file says MULTIRUN, the command line wins
        place = ["hydra.mode=RUN", f"hydra.run.dir={target}"]
    return [*source, *task, *extra, *hydra, *place]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="ppo-lab resume", description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=Path, help="a run dir, a sweep dir (multirun.yaml) or one job's dir of a sweep")
    parser.add_argument("overrides", nargs="*", help="KEY=VALUE overrides replacing the recorded ones")
    args = parser.parse_args(argv)
    target = args.dir.resolve()
    rundir.check_format(target)  # a run dir of another format: refused in one line before anything is said or run
    try:
        launch = recorded_launch(target)
    except ValueError as exc:
        fail(exc)
    if not launch.folder.is_dir():
        fail(f"{target} was launched from {launch.folder}, which is no longer there: its relative paths (and a "
             f"project's ./{config_keys.PROJECT_CONF}) are that folder's; put it back, or relaunch by hand")
    arguments = command_line(launch, target, list(args.overrides))
    print(f"resuming {target} from {launch.folder}: ppo-lab train {shlex.join(arguments)}", file=sys.stderr, flush=True)
    os.chdir(launch.folder)
    from ppo_lab.launching.train_command import main as train

    train(arguments)
    return 0
