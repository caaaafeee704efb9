"""metrics.csv: one row per (update, seed), `KEY_COLUMNS` first, then every metric, sorted.

The one reader types every value the same way for every caller: `update`, `seed` and
`timesteps` are ints, every other column a float, NaN where blank. Only complete lines count:
a process killed mid-write can leave a torn last line, which every reader here skips.

The writer appends (flushed and fsynced every chunk); on resume the file is first cut
back to the rows at or before the checkpoint's update (`truncate_after`), so a run
interrupted and resumed has no duplicate and no missing (update, seed) rows. A row with a
metric the header lacks (a resumed run of a newer version, a metric logged only later) widens
the file: it is rewritten atomically under the new header, earlier rows blank in the new
column, with a warning. No value is ever dropped.

evals.csv, the evaluations along training (`eval.every_updates`, ppo_lab/run/along.py), has
this layout, types, reader and writer (`MetricsCSV`, `read_metrics`, `columns_by_seed` of it): one row per (evaluation, seed), `KEY_COLUMNS` first (the update
evaluated after, its seed, its timesteps and training wall time), then every `eval/*` metric.
On resume it is cut back to the checkpoint's update, and a fresh start empties it, as
metrics.csv is: a run killed and relaunched has no duplicate and no missing evaluation; those
after the checkpoint are done again (bit for bit: an evaluation's keys are a function of its
seed and update).
"""

from __future__ import annotations

import csv
import io
import logging
import math
import os
from collections import deque
from pathlib import Path
from typing import Iterable

import numpy as np

from ppo_lab.rundir.atomic import fsync_dir, write_text_atomic, writing
from ppo_lab.rundir.paths import EVALS, INT_COLUMNS, KEY_COLUMNS

log = logging.getLogger(__name__)


class MetricsFileError(ValueError):
    """A complete line of metrics.csv that does not hold numbers where it must."""


# ----------------------------------------------------------------------------- reading
def _parse(text: str) -> tuple[list[str] | None, list[list[str]]]:
    """(header, raw rows) of complete CSV text; rows whose field count is wrong are skipped."""
    # Up to the last newline: a line without one may be half written.
    records = list(csv.reader(io.StringIO(text[: text.rfind("\n") + 1], newline="")))
    if not records:
        return None, []
    header = records[0]
    return header, [r for r in records[1:] if len(r) == len(header)]


def _read_raw(path: Path) -> tuple[list[str] | None, list[list[str]]]:
    path = Path(path)
    if not path.exists():
        return None, []
    with path.open(newline="") as f:
        return _parse(f.read())


def _value(column: str, text: str):
    if column in INT_COLUMNS:
        return int(text) if text.lstrip("-").isdigit() else int(float(text))
    return float(text) if text != "" else math.nan


def typed_row(columns: list[str], values: list[str], where: str = "metrics.csv") -> dict:
    """One row as {column: int or float}; raises MetricsFileError naming the bad value."""
    row = {}
    for column, text in zip(columns, values):
        try:
            row[column] = _value(column, text)
        except ValueError:
            raise MetricsFileError(f"{where}: not a number in column {column!r}: {text!r}") from None
    return row


def read_header(path: Path) -> list[str] | None:
    """The column names of metrics.csv, or None when it is missing or empty."""
    path = Path(path)
    if not path.exists():
        return None
    with path.open(newline="") as f:
        return next(csv.reader(f), None)


def read_metrics(path: Path) -> list[dict]:
    """Every complete row of metrics.csv, typed, in file order ([] when there is no file)."""
    header, raw = _read_raw(path)
    return [typed_row(header, r, str(path)) for r in raw] if header else []


def read_seed_rows(path: Path, seed: int, after: int = -1, before: float = math.inf) -> list[dict]:
    """The rows of `seed` with after < update < before, by update."""
    rows = [r for r in read_metrics(path) if r["seed"] == seed and after < r["update"] < before]
    return sorted(rows, key=lambda r: r["update"])


def read_recent_rows(path: Path, window: int) -> list[dict]:
    """The last `window` rows of each seed (what the final-metrics window of a resumed run
    needs), seeds in order of first appearance."""
    by_seed: dict[int, deque] = {}
    for row in read_metrics(path):
        by_seed.setdefault(row["seed"], deque(maxlen=window)).append(row)
    return [row for rows in by_seed.values() for row in rows]


def columns_by_seed(path: Path) -> dict[int, dict]:
    """Per seed, every column as a float array ordered by update; a duplicated (update,
    seed) row counts once, the last one written."""
    header = read_header(path) or []
    if "seed" not in header or "update" not in header:
        return {}
    rows = {(r["update"], r["seed"]): r for r in read_metrics(path)}
    out: dict[int, dict] = {}
    for seed in sorted({s for _, s in rows}):
        ordered = [rows[k] for k in sorted(k for k in rows if k[1] == seed)]
        out[seed] = {c: np.array([r[c] for r in ordered], dtype=float) for c in header if c != "seed"}
    return out


class MetricsTail:
    """Reads only what was appended since the last call (a live dashboard refreshing often)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.offset = 0
        self.columns: list[str] | None = None
        self.inode: int | None = None

    def read_new(self) -> tuple[list[dict], bool]:
        """(new typed rows, whether the file was rewritten (cut back on resume, or widened by
        a new metric), so earlier rows are to be read again)."""
        try:
            f = self.path.open("rb")
        except OSError:
            return [], False
        with f:
            stat = os.fstat(f.fileno())
            # Every rewrite is atomic (a new file renamed over the old one: a new inode, though a
            # freed number can come back); a widened file also has another first line.
            reset = stat.st_size < self.offset or (self.inode is not None and stat.st_ino != self.inode) \
                or (self.columns is not None and f.readline() != self._header_line)
            self.inode = stat.st_ino
            if reset:
                self.offset, self.columns = 0, None
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        if end == 0:
            return [], reset
        self.offset += end
        text = data[:end].decode()
        if self.columns is None:
            self.columns, rows = _parse(text)
            self._header_line = text[: text.index("\n") + 1].encode()
        else:
            rows = _parse(",".join(self.columns) + "\n" + text)[1]
        return [typed_row(self.columns, r, str(self.path)) for r in rows], reset


# ----------------------------------------------------------------------------- writing
def _clean(value):
    if value is None:
        return ""
    if isinstance(value, float):
        # float32 metrics: 7 significant digits are all they hold.
        return "" if math.isnan(value) else float(f"{value:.7g}")
    return value


def _csv_text(columns: list[str], rows: Iterable[list]) -> str:
    buf = io.StringIO(newline="")
    writer = csv.writer(buf)
    writer.writerow(columns)
    writer.writerows(rows)
    return buf.getvalue()


def _rows_until(header: list[str], raw: list[list[str]], update: int) -> list[list[str]]:
    at = header.index("update")
    return [r for r in raw if r[at] and _value("update", r[at]) <= update]


class MetricsCSV:
    """The writer of metrics.csv: appends rows; a new metric widens the header (`_widen`)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.columns: list[str] | None = read_header(self.path)

    def truncate_after(self, update: int) -> int:
        """Drop rows with update > `update` (and a torn last line); returns how many rows
        were dropped. The kept lines are rewritten byte for byte, atomically."""
        header, raw = _read_raw(self.path)
        if header is None:
            return 0
        kept = _rows_until(header, raw, update)
        if len(kept) != len(raw) or self.path.read_bytes()[-1:] != b"\n":
            write_text_atomic(self.path, _csv_text(header, kept))
        return len(raw) - len(kept)

    def append(self, rows: Iterable[dict]) -> None:
        with writing(self.path):
            self._append(list(rows))

    def _append(self, rows: list[dict]) -> None:
        if not rows:
            return
        new_file = self.columns is None
        if new_file:
            metric_cols = sorted({k for r in rows for k in r} - set(KEY_COLUMNS))
            self.columns = KEY_COLUMNS + metric_cols
        else:
            unseen = sorted({k for r in rows for k in r} - set(self.columns))
            if unseen:
                self._widen(unseen)
        with self.path.open("a", newline="") as f:
            # extrasaction="raise": a column missing from the header is a bug here, never a silent drop.
            writer = csv.DictWriter(f, fieldnames=self.columns, extrasaction="raise")
            if new_file:
                writer.writeheader()
            writer.writerows({k: _clean(r.get(k)) for k in self.columns} for r in rows)
            f.flush()
            os.fsync(f.fileno())
        if new_file:
            fsync_dir(self.path.parent)  # the new file's directory entry, durable too

    def _widen(self, unseen: list[str]) -> None:
        """Rewrite the file (atomically) under a header that also has `unseen`, sorted in
        among the metrics; the rows already written are blank in the new columns."""
        header, raw = _read_raw(self.path)
        header = header or self.columns
        metric_cols = sorted((set(header) | set(unseen)) - set(KEY_COLUMNS))
        columns = [c for c in KEY_COLUMNS if c in header] + [c for c in KEY_COLUMNS if c not in header] + metric_cols
        at = {c: i for i, c in enumerate(header)}
        widened = [[r[at[c]] if c in at else "" for c in columns] for r in raw]
        write_text_atomic(self.path, _csv_text(columns, widened))
        log.warning("%s: new metric(s) %s: the header now has them; the %d rows before are blank there",
                    self.path, ", ".join(unseen), len(raw))
        self.columns = columns


def copy_rows_until(src: Path, dst: Path, update: int) -> None:
    """Start `dst` (a new run resumed from another run) with `src`'s rows up to `update`."""
    header, raw = _read_raw(src)
    if header is None:
        return
    write_text_atomic(Path(dst), _csv_text(header, _rows_until(header, raw, update)))


# ----------------------------------------------------------------------------- evals.csv
def keep_evals(run_dir: Path, update: int, source: Path | None) -> int:
    """Make `run_dir`'s evals.csv hold the evaluations up to `update` of the run resumed from
    `source` (`run_dir` itself, or another run's dir whose rows are copied); none for a fresh
    start (`source` None). Returns how many of its own rows were dropped."""
    if source is not None and Path(source) != Path(run_dir) and (Path(source) / EVALS).exists():
        copy_rows_until(Path(source) / EVALS, Path(run_dir) / EVALS, update)
        return 0
    return MetricsCSV(Path(run_dir) / EVALS).truncate_after(update if source is not None else -1)
