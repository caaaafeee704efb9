"""Atomic checkpoints of the learner state and the host loop's counters.

This module turns the state pytree into bytes and back (flax msgpack, numpy leaves); which
files a checkpoint is made of, which checkpoints exist and which is the latest complete one
is `ppo_lab.rundir.checkpoints` (jax-free, so start-up code can look before importing jax).
The newest two are kept.
"""

from __future__ import annotations

from pathlib import Path

import flax.serialization
import jax
import numpy as np

from ppo_lab.rundir import checkpoints as files
from ppo_lab.rundir.checkpoints import list_checkpoints  # noqa: F401 - callers use checkpoint.list_checkpoints

KEEP = 2


def save(ckpt_dir: Path, state, meta: dict) -> Path:
    """Save `state` (any pytree) and `meta` (must hold `update`) atomically."""
    host_state = jax.tree.map(np.asarray, jax.device_get(state))
    payload = flax.serialization.msgpack_serialize(flax.serialization.to_state_dict(host_state))
    path = files.write_checkpoint(ckpt_dir, int(meta["update"]), payload, meta)
    files.prune(ckpt_dir, KEEP)
    return path


def load(ckpt_dir: Path, template, update: int | None = None):
    """Restore `(state, meta)` from the latest (or the given) checkpoint into `template`'s structure."""
    path = files.latest_checkpoint(ckpt_dir) if update is None else files.meta_path(ckpt_dir, update)
    if path is None:
        raise FileNotFoundError(f"no complete checkpoint in {ckpt_dir}")
    meta = files.read_meta(path)
    raw = flax.serialization.msgpack_restore(files.state_path(path).read_bytes())
    host_template = jax.tree.map(np.asarray, jax.device_get(template))
    return flax.serialization.from_state_dict(host_template, raw), meta
