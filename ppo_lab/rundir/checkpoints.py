"""A run's checkpoint files: which exist, which is the latest complete one, their format and
checksums (stamped when written, verified when read), and the damaged ones set aside.

Layout: `checkpoints/ckpt_<update>.msgpack`, the payload (the learner state, serialised by
`ppo_lab.run.checkpoint`, which needs jax), and `checkpoints/ckpt_<update>.json`, its meta
(counters, layout, timing). Each is written atomically, the msgpack first and the JSON last: a
checkpoint counts only once both exist, so a crash mid-write leaves the previous one usable.
The meta records

    format_version   the run dir's format (`run_format.FORMAT`): how the payload is laid out
    lab_version      the ppo_lab that wrote it
    payload          {"file", "bytes", "sha256"} of the msgpack file
    meta_sha256      sha256 of the meta itself (its other keys, canonical JSON)

so a checkpoint whose either file was damaged (a bad disk, a copy cut short, an editor)
does not verify, and `verify` says which file and why. One of another format (a lab before
1.0 wrote an integer version, or none) is refused in one line (`run_format.refusal`).

No jax here: start-up code looks at and verifies checkpoints before the hardware settings are applied.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
from pathlib import Path

from ppo_lab.errors import RunDirFormatError
from ppo_lab.rundir.atomic import _json_default, write_atomic, write_json_atomic, write_text_atomic
from ppo_lab.rundir.paths import CHECKPOINTS, CONFIG_HISTORY, METRICS, SUMMARY
from ppo_lab.rundir.run_format import FORMAT, refusal
from ppo_lab.rundir.run_format import stamp as format_stamp

DAMAGED = "damaged"  # checkpoints/damaged/: where checkpoints that do not verify are moved
NONE_VALID = "NONE_VALID.txt"  # in checkpoints/damaged/: no checkpoint verified, nothing chosen yet
_CHECKSUMS = ("payload", "meta_sha256")


class CheckpointError(RuntimeError):
    """A run cannot resume from its checkpoints (damaged, of another format, another state).
    Raised before anything is compiled or written: launch.py prints it and exits 2."""


class DamagedCheckpoint(CheckpointError):
    """A checkpoint's files do not verify: `path` (its JSON) and `reason` say which and why."""

    def __init__(self, path: Path, reason: str):
        self.path, self.reason = Path(path), reason
        super().__init__(f"{self.path.name}: {reason}")

    def __reduce__(self):  # picklable (submitit sends a job's exception back)
        return type(self), (self.path, self.reason)


class CheckpointFormatError(CheckpointError, RunDirFormatError):
    """A checkpoint of a format this ppo_lab does not read."""


class NoValidCheckpoint(CheckpointError):
    """None of a run's checkpoints verifies."""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _canonical(meta: dict) -> bytes:
    """The meta's keys other than its own checksum, as JSON with sorted keys (what is hashed)."""
    body = {k: v for k, v in meta.items() if k != "meta_sha256"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), default=_json_default).encode()


def stamp(meta: dict, payload: bytes, payload_name: str) -> dict:
    """`meta` with the format, the lab's version and the checksums of `payload` and of itself."""
    # Through JSON first, so the hash is of exactly what a reader will parse (numpy scalars
    # become numbers, tuples lists).
    stamped = json.loads(json.dumps(meta, default=_json_default))
    stamped.update(**format_stamp(), payload={"file": payload_name, "bytes": len(payload), "sha256": sha256(payload)})
    stamped["meta_sha256"] = sha256(_canonical(stamped))
    return stamped


def verify(meta_path: Path, state_path: Path) -> tuple[dict, bytes]:
    """(meta, payload bytes) of a checkpoint of this format whose files verify; DamagedCheckpoint
    where they do not, CheckpointFormatError for one of another format."""
    meta_path, state_path = Path(meta_path), Path(state_path)
    try:
        text = meta_path.read_bytes()
    except OSError as exc:
        raise DamagedCheckpoint(meta_path, f"cannot read it ({exc})") from exc
    try:
        meta = json.loads(text)
    except ValueError as exc:
        raise DamagedCheckpoint(meta_path, f"not valid JSON ({exc})") from exc
    if not isinstance(meta, dict) or not isinstance(meta.get("update"), int):
        raise DamagedCheckpoint(meta_path, "not a checkpoint's meta (no integer `update`)")
    try:
        payload = state_path.read_bytes()
    except OSError as exc:
        raise DamagedCheckpoint(meta_path, f"cannot read {state_path.name} ({exc})") from exc
    if "format_version" not in meta:
        if any(k in meta for k in _CHECKSUMS):
            raise DamagedCheckpoint(meta_path, "has checksum fields but no format_version")
        raise CheckpointFormatError(refusal(f"the checkpoint {meta_path}", f"a format before {FORMAT} (unversioned)", None))
    recorded = meta.get("meta_sha256")
    if recorded != sha256(_canonical(meta)):
        raise DamagedCheckpoint(meta_path, "its own checksum (meta_sha256) does not match its content")
    expected = meta.get("payload") or {}
    if len(payload) != expected.get("bytes"):
        raise DamagedCheckpoint(meta_path, f"{state_path.name} has {len(payload)} bytes, the checkpoint recorded {expected.get('bytes')}")
    actual = sha256(payload)
    if actual != expected.get("sha256"):
        raise DamagedCheckpoint(meta_path, f"sha256 of {state_path.name} is {actual[:16]}..., "
                                           f"the checkpoint recorded {str(expected.get('sha256'))[:16]}...")
    if meta["format_version"] != FORMAT:  # after the checksums: a damaged meta is damaged, not of another format
        version = meta["format_version"]
        its_format = f"format {version}" if isinstance(version, str) else f"a format before {FORMAT} (checkpoint format {version})"
        lab = meta.get("lab_version")
        raise CheckpointFormatError(refusal(f"the checkpoint {meta_path}", its_format, f"ppo_lab {lab}" if lab else None))
    return meta, payload


def set_aside(meta_path: Path, state_path: Path, reason: str) -> Path:
    """Move a checkpoint's files into `checkpoints/damaged/` (never deleted) with a note of
    why; returns that folder. A name already there (an earlier damaged copy) gets a suffix."""
    meta_path, state_path = Path(meta_path), Path(state_path)
    folder = meta_path.parent / DAMAGED
    folder.mkdir(parents=True, exist_ok=True)
    suffix = ""
    while any((folder / (p.name + suffix)).exists() for p in (meta_path, state_path)):
        suffix = f".{time.strftime('%Y%m%d-%H%M%S')}" if not suffix else suffix + "_"
    for path in (meta_path, state_path):  # JSON first: without it the checkpoint no longer counts
        if path.exists():
            shutil.move(str(path), str(folder / (path.name + suffix)))
    write_text_atomic(folder / f"{meta_path.stem}{suffix}.reason.txt",
                      f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {meta_path.name}: {reason}\n")
    return folder


def remember_none_valid(ckpt_dir: Path, message: str) -> None:
    """Note in checkpoints/damaged/ that no checkpoint verified: a relaunch must not take the
    emptied checkpoints/ for a fresh run (that would drop the earlier attempt's rows)."""
    write_text_atomic(Path(ckpt_dir) / DAMAGED / NONE_VALID, message.rstrip() + "\n")


def none_valid_note(ckpt_dir: Path) -> str | None:
    """The note `remember_none_valid` left, or None."""
    path = Path(ckpt_dir) / DAMAGED / NONE_VALID
    return path.read_text().strip() if path.exists() else None


def set_aside_attempt(run_dir: Path, why: str) -> Path:
    """Start over in place: the earlier attempt's metrics.csv, summary.json and
    config_history.jsonl join its damaged checkpoints in checkpoints/damaged/ (prefixed with
    the time, never deleted) with a note of why; the none-verified note is cleared."""
    folder = Path(run_dir) / CHECKPOINTS / DAMAGED
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for name in (METRICS, SUMMARY, CONFIG_HISTORY):
        if (Path(run_dir) / name).exists():
            shutil.move(str(Path(run_dir) / name), str(folder / f"{stamp}-{name}"))
    write_text_atomic(folder / f"{stamp}-start_over.txt", f"checkpoint.if_all_damaged=start_over:\n{why.rstrip()}\n")
    (folder / NONE_VALID).unlink(missing_ok=True)
    return folder


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
