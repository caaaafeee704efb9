"""Reading the JSON files of a run directory (writes go through `atomic.write_json_atomic`)."""

from __future__ import annotations

import json
from pathlib import Path

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
