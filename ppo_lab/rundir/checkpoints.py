"""The checkpoint files of a run: which exist, which is the latest complete one.

Layout: `checkpoints/ckpt_<update>.msgpack` (the learner state, serialised by
`ppo_lab.run.checkpoint`, which needs jax) and `checkpoints/ckpt_<update>.json` (counters,
layout, timing). Each is written atomically, the msgpack first and the JSON last: a
checkpoint counts only once both exist, so a crash mid-write leaves the previous one usable.
The JSON records the format version and the checksums of both files
(`ppo_lab.rundir.checkpoint_format`): a checkpoint damaged later is recognised on resume.
"""

from __future__ import annotations

import re
from pathlib import Path

from ppo_lab.rundir.atomic import write_atomic, write_json_atomic
from ppo_lab.rundir.checkpoint_format import stamp
from ppo_lab.rundir.jsonfile import read_json

_NAME = re.compile(r"ckpt_(\d+)\.json$")


def meta_path(ckpt_dir: Path, update: int) -> Path:
    return Path(ckpt_dir) / f"ckpt_{int(update)}.json"


def state_path(meta: Path) -> Path:
    """The state file that belongs to a checkpoint's JSON."""
    return Path(meta).with_suffix(".msgpack")


def list_checkpoints(ckpt_dir: Path) -> list[Path]:
    """The JSON files of the complete checkpoints (both files exist), oldest first."""
    ckpt_dir = Path(ckpt_dir)
    if not ckpt_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in ckpt_dir.iterdir() if (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found) if state_path(p).exists()]


def has_checkpoint(ckpt_dir: Path) -> bool:
    return bool(list_checkpoints(ckpt_dir))


def latest_checkpoint(ckpt_dir: Path) -> Path | None:
    found = list_checkpoints(ckpt_dir)
    return found[-1] if found else None


def read_meta(meta: Path) -> dict:
    return read_json(meta)


def write_checkpoint(ckpt_dir: Path, update: int, state_bytes: bytes, meta: dict) -> Path:
    """Write one checkpoint (state first, JSON last, with the format version and checksums);
    returns its JSON path. A payload whose JSON could not be written (a disk that filled
    between the two) is removed: it is no checkpoint without its JSON, and the space it holds
    is what the run's last small writes (summary.json) need."""
    path = meta_path(ckpt_dir, update)
    write_atomic(state_path(path), state_bytes)
    try:
        write_json_atomic(path, stamp(meta, state_bytes, state_path(path).name))
    except BaseException:
        state_path(path).unlink(missing_ok=True)
        raise
    return path


def prune(ckpt_dir: Path, keep: int) -> None:
    """Delete all but the newest `keep` complete checkpoints (JSON first: it makes one count)."""
    for old in list_checkpoints(ckpt_dir)[:-keep] if keep > 0 else list_checkpoints(ckpt_dir):
        for path in (old, state_path(old)):
            path.unlink(missing_ok=True)
