"""loggers.json: what the optional loggers (W&B, TensorBoard, MLflow) need to continue after a
resume, a section per logger: its runs per seed and the last update each holds
(ppo_lab/run/recorders/per_seed.py)."""

from __future__ import annotations

from pathlib import Path

from ppo_lab.rundir.atomic import read_json, write_json_atomic
from ppo_lab.rundir.paths import LOGGERS


def read_logger_state(run_dir: Path, name: str) -> dict:
    """Logger `name`'s section ({} before its first run in this directory)."""
    return read_json(Path(run_dir) / LOGGERS, default={}).get(name, {})


def write_logger_state(run_dir: Path, name: str, state: dict) -> None:
    """Replace logger `name`'s section, keeping the other loggers' sections."""
    path = Path(run_dir) / LOGGERS
    write_json_atomic(path, {**read_json(path, default={}), name: state})
