"""The STOP file: a request, from any shell, that a run stops cleanly after its chunk."""

from __future__ import annotations

import time
from pathlib import Path

from ppo_lab.rundir.atomic import write_text_atomic
from ppo_lab.rundir.paths import STOP_FILE


def stop_requested(run_dir: Path) -> bool:
    return (Path(run_dir) / STOP_FILE).exists()


def request_stop(run_dir: Path, by: str) -> Path:
    path = Path(run_dir) / STOP_FILE
    write_text_atomic(path, f"stop requested by {by} at {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
    return path
