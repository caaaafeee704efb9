"""Atomic checkpoints of the learner state and the host loop's counters.

This module turns the state pytree into bytes and back (flax msgpack, numpy leaves); which
files a checkpoint is made of, which checkpoints exist and which is the latest complete one
is `ppo_lab.rundir.checkpoints` (jax-free, so start-up code can look before importing jax),
and so are their format and checksums. The newest two are kept.

Loading takes the newest checkpoint that verifies; one that does not is skipped with a warning (and, in the
run's own directory, moved to `checkpoints/damaged/`). One of another format is refused.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import flax.serialization
import jax
import numpy as np

from ppo_lab.rundir import checkpoints as files

log = logging.getLogger(__name__)

KEEP = 2


def save(ckpt_dir: Path, state, meta: dict) -> Path:
    """Save `state` (any pytree) and `meta` (must hold `update`) atomically."""
    host_state = jax.tree.map(np.asarray, jax.device_get(state))
    payload = flax.serialization.msgpack_serialize(flax.serialization.to_state_dict(host_state))
    path = files.write_checkpoint(ckpt_dir, int(meta["update"]), payload, meta)
    files.prune(ckpt_dir, KEEP)
    return path


@dataclass
class Loaded:
    state: object  # the learner state, host numpy arrays in the template's structure
    meta: dict
    damaged: list[files.DamagedCheckpoint] = field(default_factory=list)  # newer ones skipped, newest first


def read_payload(meta_path: Path) -> tuple[dict, dict]:
    """(meta, raw state dict) of a checkpoint that verifies and parses; DamagedCheckpoint
    otherwise (CheckpointFormatError for one of another format)."""
    meta, payload = files.verify(meta_path, files.state_path(meta_path))
    try:
        raw = flax.serialization.msgpack_restore(payload)
    except Exception as exc:  # noqa: BLE001 - msgpack raises several types (ExtraData, FormatError, ...)
        raise files.DamagedCheckpoint(meta_path, f"{files.state_path(meta_path).name} does not parse "
                                           f"({type(exc).__name__}: {exc})") from exc
    if not isinstance(raw, dict) or "params" not in raw:
        raise files.DamagedCheckpoint(meta_path, f"{files.state_path(meta_path).name} holds no learner state")
    return meta, raw


def load_verified(ckpt_dir: Path, template, *, set_aside_damaged: bool = False) -> Loaded:
    """The newest checkpoint in `ckpt_dir` that verifies, restored into
    `template`'s structure. Damaged ones are skipped with a warning, and moved to
    `checkpoints/damaged/` with `set_aside_damaged`. None verifies: NoValidCheckpoint. One of
    another format, or a state that does not fit this config's: CheckpointError (both before
    anything is compiled)."""
    ckpt_dir = Path(ckpt_dir)
    candidates = list(reversed(files.list_checkpoints(ckpt_dir)))
    if not candidates:
        raise FileNotFoundError(f"no complete checkpoint in {ckpt_dir}")
    host_template = jax.tree.map(np.asarray, jax.device_get(template))
    damaged: list[files.DamagedCheckpoint] = []
    for path in candidates:
        try:
            meta, raw = read_payload(path)
        except files.DamagedCheckpoint as exc:
            damaged.append(exc)
            where = files.set_aside(path, files.state_path(path), exc.reason) if set_aside_damaged else None
            log.warning("checkpoint %s is damaged: %s; %s", path, exc.reason,
                        f"moved to {where}/" if where else "left in place")
            continue
        try:
            state = flax.serialization.from_state_dict(host_template, raw)
        except (ValueError, KeyError, TypeError) as exc:
            raise files.CheckpointError(
                f"{path} holds a learner state this config's does not match: {exc}. A key that changes the "
                f"state's structure (e.g. ppo.separate_grad_clip, ppo.value_norm, network.*) differs from the run "
                f"that saved it: use its values, or a new run directory.") from exc
        return Loaded(state, meta, damaged)
    raise files.NoValidCheckpoint(_none_valid(ckpt_dir, damaged, set_aside_damaged))


def _none_valid(ckpt_dir: Path, damaged: list[files.DamagedCheckpoint], moved: bool) -> str:
    """The error when no checkpoint verifies: each file and why, and the ways forward."""
    lines = "\n".join(f"  {exc.path.name}: {exc.reason}" for exc in damaged)
    if not moved:  # another run's checkpoints (resume=PATH): not ours to move or start over
        return (f"no checkpoint in {ckpt_dir} verifies:\n{lines}\nThey were left in place. Ways forward: "
                f"resume=ANOTHER_RUN_DIR, or no resume= for a fresh run.")
    return (f"no checkpoint in {ckpt_dir} verifies:\n{lines}\nThey were moved to {ckpt_dir / files.DAMAGED}/. Ways forward:\n"
            f"  - a fresh run: launch without hydra.run.dir (or with a new one)\n"
            f"  - start over in this run directory, the old files kept aside in {files.DAMAGED}/: "
            f"checkpoint.if_all_damaged=start_over\n"
            f"  - resume another run's checkpoint: resume=PATH in a new run directory")
