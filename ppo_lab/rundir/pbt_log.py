"""pbt.jsonl: a population run's exploit steps, one JSON line each (no jax).

Each line: `update`, `fitness` (per member), `hypers` (per member, after the step), `copied`
(per member: the member it copied, or null), `exploit` (false: random search, nothing copied).
Appended and fsynced once per step; on resume cut back to the checkpoint's update (as
metrics.csv), so no step is ever written twice.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ppo_lab.rundir.atomic import write_text_atomic, writing


def read_pbt_log(path: Path) -> list[dict]:
    """The steps in order; a torn last line (a crash mid-write) is left out."""
    path = Path(path)
    if not path.exists():
        return []
    steps = []
    for line in path.read_text().splitlines():
        try:
            steps.append(json.loads(line))
        except ValueError:
            break
    return steps


def append_pbt_step(path: Path, step: dict) -> None:
    with writing(path), Path(path).open("a") as f:
        f.write(json.dumps(step, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


def pbt_log_until(source: Path, path: Path, update: int) -> int:
    """Write to `path` the steps of `source` up to `update` (the same file on a resume in
    place); returns how many were dropped."""
    steps = read_pbt_log(source)
    kept = [s for s in steps if int(s["update"]) <= update]
    if Path(path).exists() or kept:
        write_text_atomic(Path(path), "".join(json.dumps(s, sort_keys=True) + "\n" for s in kept))
    return len(steps) - len(kept)
