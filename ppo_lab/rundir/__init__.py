"""The run directory contract (DESIGN.md): config.yaml, metrics.csv, summary.json, checkpoints/.

Imports no jax, so launchers and start-up code may read run dirs before `apply_hardware`.
"""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path
from typing import Iterable

from ppo_lab.rundir.atomic import write_json_atomic

CONFIG = "config.yaml"
METRICS = "metrics.csv"
SUMMARY = "summary.json"
CHECKPOINTS = "checkpoints"
STOP_FILE = "STOP"
KEY_COLUMNS = ["update", "seed", "timesteps", "wall_s"]


def write_config(run_dir: Path, resolved: dict) -> None:
    from omegaconf import OmegaConf

    text = OmegaConf.to_yaml(OmegaConf.create(resolved))
    (Path(run_dir) / CONFIG).write_text(text)


def read_config(run_dir: Path) -> dict:
    from omegaconf import OmegaConf

    path = Path(run_dir) / CONFIG
    if not path.exists():
        raise FileNotFoundError(f"{run_dir} is not a run directory: it has no {CONFIG}")
    return OmegaConf.to_container(OmegaConf.load(path), resolve=True)


def load_run_config(run_dir: Path, eval_episodes: int | None = None, deterministic: bool | None = None):
    """The RunConfig a run was trained with, optionally with other evaluation settings."""
    from ppo_lab.config import validate

    raw = read_config(run_dir)
    if eval_episodes is not None:
        raw["eval"]["episodes"] = eval_episodes
    if deterministic is not None:
        raw["eval"]["deterministic"] = deterministic
    return validate(raw)


def stop_requested(run_dir: Path) -> bool:
    return (Path(run_dir) / STOP_FILE).exists()


def update_summary(run_dir: Path, changes: dict) -> dict:
    path = Path(run_dir) / SUMMARY
    summary = json.loads(path.read_text()) if path.exists() else {}
    summary.update(changes)
    write_json_atomic(path, summary)
    return summary


def _clean(value):
    if value is None:
        return ""
    if isinstance(value, float):
        # float32 metrics: 7 significant digits are all they hold.
        return "" if math.isnan(value) else float(f"{value:.7g}")
    return value


class MetricsCSV:
    """Append-only metrics.csv with a fixed header; flushed and fsynced on every write.

    On resume the file is first cut back to the rows at or before the checkpoint's update,
    so a run interrupted and resumed has no duplicate and no missing (update, seed) rows.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self.columns: list[str] | None = None
        if self.path.exists() and self.path.stat().st_size:
            with self.path.open(newline="") as f:
                self.columns = next(csv.reader(f), None)

    def truncate_after(self, update: int) -> int:
        """Drop rows with update > `update`; returns how many were dropped."""
        if not self.path.exists():
            return 0
        with self.path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        kept = [r for r in rows if r.get("update") and int(r["update"]) <= update]
        if len(kept) != len(rows):
            tmp = self.path.with_suffix(".csv.tmp")
            with tmp.open("w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=self.columns)
                writer.writeheader()
                writer.writerows(kept)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        return len(rows) - len(kept)

    def append(self, rows: Iterable[dict]) -> None:
        rows = list(rows)
        if not rows:
            return
        new_file = self.columns is None
        if new_file:
            metric_cols = sorted({k for r in rows for k in r} - set(KEY_COLUMNS))
            self.columns = KEY_COLUMNS + metric_cols
        with self.path.open("a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.columns, extrasaction="ignore")
            if new_file:
                writer.writeheader()
            writer.writerows({k: _clean(r.get(k)) for k in self.columns} for r in rows)
            f.flush()
            os.fsync(f.fileno())


def copy_rows_until(src: Path, dst: Path, update: int) -> None:
    """Start `dst` (a new run resumed from another run) with `src`'s rows up to `update`."""
    if not src.exists():
        return
    with src.open(newline="") as f:
        reader = csv.DictReader(f)
        columns = reader.fieldnames
        rows = [r for r in reader if int(r["update"]) <= update]
    with dst.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
