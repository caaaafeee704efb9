"""config.yaml: the resolved config a run was trained with; config_history.jsonl: the
changes to it a relaunch was allowed to make (allow_config_change=true)."""

from __future__ import annotations

import json
from pathlib import Path

from omegaconf import OmegaConf

from ppo_lab.config import validate
from ppo_lab.rundir.atomic import write_text_atomic
from ppo_lab.rundir.manifest import use_recorded_parts
from ppo_lab.rundir.older_configs import complete
from ppo_lab.rundir.paths import CONFIG, CONFIG_HISTORY


def write_config(run_dir: Path, resolved: dict) -> None:
    write_text_atomic(Path(run_dir) / CONFIG, OmegaConf.to_yaml(OmegaConf.create(resolved)))


def read_config(run_dir: Path, resolve: bool = True) -> dict:
    """The saved config; `resolve=False` keeps interpolations as written (never fails on them)."""
    path = Path(run_dir) / CONFIG
    if not path.exists():
        raise FileNotFoundError(f"{run_dir} is not a run directory: it has no {CONFIG}")
    return OmegaConf.to_container(OmegaConf.load(path), resolve=resolve) or {}


def read_config_history(run_dir: Path) -> list[dict]:
    """The allowed config changes of a run, oldest first (one JSON object a line)."""
    path = Path(run_dir) / CONFIG_HISTORY
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def append_config_history(run_dir: Path, entries: list[dict]) -> None:
    """Add entries to config_history.jsonl (rewritten atomically: never half a line)."""
    lines = [json.dumps(e, sort_keys=True) for e in read_config_history(run_dir) + list(entries)]
    write_text_atomic(Path(run_dir) / CONFIG_HISTORY, "\n".join(lines) + "\n")


def read_experiment(run_dir: Path):
    """The `experiment` key of config.yaml, or None (no file, or one that does not parse)."""
    path = Path(run_dir) / CONFIG
    if not path.exists():
        return None
    try:
        return OmegaConf.load(path).get("experiment")
    except Exception:  # noqa: BLE001 - an unreadable config only loses the label
        return None


def load_run_config(run_dir: Path, eval_episodes: int | None = None, deterministic: bool | None = None):
    """The RunConfig a run was trained with, optionally with other evaluation settings; a run
    written by an older lab gets the keys added since at their old-behaviour values
    (`older_configs.complete`). Every command that loads a run comes here: the run's own parts
    are found where it found them (`manifest.use_recorded_parts`) before its check loads one."""
    use_recorded_parts(run_dir)
    raw = complete(read_config(run_dir))
    if eval_episodes is not None:
        raw["eval"]["episodes"] = eval_episodes
    if deterministic is not None:
        raw["eval"]["deterministic"] = deterministic
    return validate(raw, saved=True)
