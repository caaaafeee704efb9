"""Atomic, durable file writes: a reader sees the old file or the new one, never half of one,
and once a write returns the new file survives a crash (power loss, a node going down). And
the one reader of the JSON files so written (`read_json`).

The data is fsynced before the rename and the directory after it: without the second fsync
the rename itself may still be only in memory, and a checkpoint or summary.json "written"
just before a crash can be gone (or the old one back) on the next start.

No jax here: the run-directory helpers that use this are imported before the hardware
settings are applied (launch.py, sweep callbacks, evaluate/replay start-up).
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np


@contextmanager
def writing(path: Path):
    """An OSError raised inside names the file being written (`written_path`): a full disk's
    write() names no file. The innermost such block names it (an atomic rewrite inside an append)."""
    try:
        yield
    except OSError as exc:
        if getattr(exc, "written_path", None) is None:
            exc.written_path = str(path)
        raise


def write_failure(exc: BaseException) -> str | None:
    """An OSError raised while writing a run's files, as one line: `OSError ENOSPC writing
    PATH: No space left on device`; None for any other error."""
    path = getattr(exc, "written_path", None)
    if not isinstance(exc, OSError) or path is None:
        return None
    code = errno.errorcode.get(exc.errno, f"errno {exc.errno}") if exc.errno else ""
    return f"{type(exc).__name__} {code} writing {path}: {exc.strerror or exc}".replace("  ", " ")


def write_atomic(path: Path, data: bytes) -> None:
    with writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are meant to be read by others
            os.replace(tmp, path)
            fsync_dir(path.parent)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (a rename, a new file) durable. Platforms that cannot open a
    directory (Windows) have no such step."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:  # some file systems refuse fsync on a directory (EINVAL): nothing to do
        if exc.errno not in (errno.EINVAL, errno.EBADF):
            raise
    finally:
        os.close(fd)


def write_text_atomic(path: Path, text: str) -> None:
    write_atomic(Path(path), text.encode())


def write_json_atomic(path: Path, obj) -> None:
    write_atomic(Path(path), (json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n").encode())


_MISSING = object()


def read_json(path: Path, default=_MISSING):
    """The parsed file; `default` when it does not exist (FileNotFoundError without one).

    A file that exists but does not parse raises ValueError naming the file: writes are
    atomic, so a half-written file means something else wrote it."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        if default is _MISSING:
            raise
        return default
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from exc


def _json_default(x):
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(f"not JSON serialisable: {type(x)}")
