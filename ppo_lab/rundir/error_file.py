"""error.txt: why a sweep's job failed before its run wrote summary.json (a config error, say);
the sweep callback writes it, the aggregate reads it."""

from __future__ import annotations

from pathlib import Path

from ppo_lab.rundir.atomic import write_text_atomic
from ppo_lab.rundir.paths import ERROR


def write_error(run_dir: Path, message: str) -> None:
    write_text_atomic(Path(run_dir) / ERROR, message.rstrip("\n") + "\n")


def read_error(run_dir: Path) -> str | None:
    """The failure recorded in error.txt, or None when there is none."""
    path = Path(run_dir) / ERROR
    return path.read_text().strip() if path.exists() else None
