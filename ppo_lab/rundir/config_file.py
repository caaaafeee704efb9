"""config.yaml: the resolved config a run was trained with; config_history.jsonl: the
changes to it a relaunch was allowed to make (allow_config_change=true)."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
from pathlib import Path

from omegaconf import OmegaConf

from ppo_lab.config import validate
from ppo_lab.rundir.atomic import write_text_atomic
from ppo_lab.rundir.manifest import check_format, use_recorded_parts
from ppo_lab.rundir.paths import CONFIG, CONFIG_HISTORY


def write_config(run_dir: Path, resolved: dict) -> None:
    write_text_atomic(Path(run_dir) / CONFIG, OmegaConf.to_yaml(OmegaConf.create(resolved)))


def read_config(run_dir: Path, resolve: bool = True) -> dict:
    """The saved config; `resolve=False` keeps interpolations as written (never fails on them)."""
    path = Path(run_dir) / CONFIG
    if not path.exists():
        raise FileNotFoundError(f"{run_dir} is not a run directory: it has no {CONFIG}")
    stat = path.stat()
    return copy.deepcopy(_parsed_config(str(path), (stat.st_ino, stat.st_size, stat.st_mtime_ns), resolve))


# Tables and pages read one run's config several times (a docs render reads ~400), and
# OmegaConf's YAML parse costs ~50 ms a file: a file unchanged since (same inode, size and
# mtime; config.yaml is only ever replaced whole) is parsed once. Callers get a copy.
@functools.lru_cache(maxsize=2048)
def _parsed_config(path: str, stamp: tuple, resolve: bool) -> dict:
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
    if not (Path(run_dir) / CONFIG).exists():
        return None
    try:
        return read_config(run_dir, resolve=False).get("experiment")
    except Exception:  # noqa: BLE001 - an unreadable config only loses the label
        return None


UNSET = "<unset>"  # how config_history.jsonl writes a key one side of a change did not have


def _set_dotted(cfg: dict, key: str, value) -> None:
    """Set (or, for UNSET, remove) the dotted `key` in the nested dict `cfg`."""
    *parents, leaf = key.split(".")
    node = cfg
    for part in parents:
        node = node.setdefault(part, {})
    if value == UNSET:
        node.pop(leaf, None)
    else:
        node[leaf] = value


def config_spans(run_dir: Path) -> list[tuple[int, dict]]:
    """Which config trained which updates: [(from_update, resolved config)], oldest first.
    config.yaml holds the config in force now; each allowed change in config_history.jsonl
    (newest first) is undone to recover the config before it. A span that trained nothing (two
    changes at one update) is left out. The run's own parts are found where it found them
    (`manifest.use_recorded_parts`), as for `load_run_config`; one of another format is refused."""
    check_format(run_dir)
    use_recorded_parts(run_dir)
    now = read_config(run_dir)
    spans = [(0, now)]
    for entry in reversed(read_config_history(run_dir)):
        before = copy.deepcopy(spans[0][1])
        for key, (old, _new) in entry["changes"].items():
            _set_dotted(before, key, old)
        spans[0] = (int(entry["from_update"]), spans[0][1])
        spans.insert(0, (0, before))
    return [span for span, following in zip(spans, spans[1:] + [(None, None)])
            if following[0] is None or following[0] > span[0]]


def validated_config(raw: dict):
    """A saved (resolved) config as the RunConfig it trains. Its `resolved` stays the config as
    saved, so a run re-made from it (`ppo-lab reproduce`) records the same config and config
    hash as the run it re-makes."""
    return dataclasses.replace(validate(copy.deepcopy(raw), saved=True), resolved=copy.deepcopy(raw))


def load_run_config(run_dir: Path, eval_episodes: int | None = None, deterministic: bool | None = None):
    """The RunConfig a run was trained with, optionally with other evaluation settings. Every
    command that loads a run comes here: its format is checked first (`manifest.check_format`:
    one of another format is refused), then the run's own parts are found where it found them
    (`manifest.use_recorded_parts`) before its check loads one."""
    check_format(run_dir)
    use_recorded_parts(run_dir)
    raw = read_config(run_dir)
    if eval_episodes is not None:
        raw["eval"]["episodes"] = eval_episodes
    if deterministic is not None:
        raw["eval"]["deterministic"] = deterministic
    return validate(raw, saved=True)
