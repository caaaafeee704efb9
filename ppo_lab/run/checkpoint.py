"""Atomic checkpoints of the learner state and the host loop's counters.

Layout: `checkpoints/ckpt_<update>.msgpack` (flax msgpack of the state, numpy leaves) and
`checkpoints/ckpt_<update>.json` (counters, layout, timing). A checkpoint is written to a
temporary file, fsynced and renamed, JSON last: a checkpoint counts only once its JSON exists,
so a crash mid-write leaves the previous one usable. The newest two are kept.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import flax.serialization
import jax
import numpy as np

from ppo_lab.rundir.atomic import write_atomic, write_json_atomic

KEEP = 2
_NAME = re.compile(r"ckpt_(\d+)\.json$")


def save(ckpt_dir: Path, state, meta: dict) -> Path:
    """Save `state` (any pytree) and `meta` (must hold `update`) atomically."""
    ckpt_dir = Path(ckpt_dir)
    update = int(meta["update"])
    host_state = jax.tree.map(np.asarray, jax.device_get(state))
    write_atomic(ckpt_dir / f"ckpt_{update}.msgpack", flax.serialization.msgpack_serialize(flax.serialization.to_state_dict(host_state)))
    write_json_atomic(ckpt_dir / f"ckpt_{update}.json", meta)
    for old in list_checkpoints(ckpt_dir)[:-KEEP]:
        for suffix in (".json", ".msgpack"):
            old.with_suffix(suffix).unlink(missing_ok=True)
    return ckpt_dir / f"ckpt_{update}.json"


def list_checkpoints(ckpt_dir: Path) -> list[Path]:
    """Complete checkpoints (their JSON exists), oldest first."""
    ckpt_dir = Path(ckpt_dir)
    if not ckpt_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in ckpt_dir.iterdir() if (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found) if p.with_suffix(".msgpack").exists()]


def latest_meta(ckpt_dir: Path) -> dict | None:
    found = list_checkpoints(ckpt_dir)
    return json.loads(found[-1].read_text()) if found else None


def load(ckpt_dir: Path, template, update: int | None = None):
    """Restore `(state, meta)` from the latest (or the given) checkpoint into `template`'s structure."""
    found = list_checkpoints(ckpt_dir)
    if not found:
        raise FileNotFoundError(f"no complete checkpoint in {ckpt_dir}")
    path = found[-1] if update is None else Path(ckpt_dir) / f"ckpt_{update}.json"
    meta = json.loads(path.read_text())
    raw = flax.serialization.msgpack_restore(path.with_suffix(".msgpack").read_bytes())
    host_template = jax.tree.map(np.asarray, jax.device_get(template))
    return flax.serialization.from_state_dict(host_template, raw), meta
