"""Compare a run with its reproduction: metrics.csv row by row, and their manifests.

Rows are matched by (update, seed) over the first ``updates`` updates; every column but the
wall-clock ones (``wall_s``, ``perf/*``) must be equal as written (metrics.csv keeps 7
significant digits of each float32 metric; NaN equals NaN). The first difference, in
(update, seed, column) order, is reported with both values, together with the manifest fields
that differ (a package version, an XLA flag, a device kind, the CPU, the layout: what may
explain it), and the largest difference over every compared value: a run reproduced on another
CPU differs in the last digits (`ppo_lab/host_cpu.py`), a changed program usually by more.
`within(rtol, atol)` says whether every difference is that small.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ppo_lab import rundir
from ppo_lab.estimators import finite_number

WALL_CLOCK = ("wall_s",)
WALL_CLOCK_PREFIXES = ("perf/",)


def compared(column: str) -> bool:
    return column not in WALL_CLOCK and not column.startswith(WALL_CLOCK_PREFIXES)


@dataclass
class Comparison:
    rows: int  # (update, seed) rows compared
    updates: int  # updates compared
    manifest_differences: list = field(default_factory=list)
    # every differing value, in (update, seed, column) order: (update, seed, column, original, reproduced)
    differences: list = field(default_factory=list)

    @property
    def first_difference(self) -> tuple | None:
        return self.differences[0] if self.differences else None

    @property
    def identical(self) -> bool:
        return self.first_difference is None and self.rows > 0

    def within(self, rtol: float, atol: float = 0.0) -> bool:
        """Every difference numeric and |a - b| <= atol + rtol * max(|a|, |b|) (numpy's isclose,
        symmetric); a missing row or column, or a NaN against a number, is never within."""
        return self.rows > 0 and all(close(a, b, rtol, atol) for *_, a, b in self.differences)

    def largest(self) -> tuple | None:
        """The difference of the largest relative size: (update, seed, column, original, reproduced, relative)."""
        sized = [(*d, _relative(d[3], d[4])) for d in self.differences]
        return max(sized, key=lambda d: d[5]) if sized else None


def _relative(a, b) -> float:
    if not (finite_number(a) and finite_number(b)):
        return math.inf
    scale = max(abs(a), abs(b))
    return abs(a - b) / scale if scale else 0.0


def close(a, b, rtol: float, atol: float) -> bool:
    """Both finite numbers and |a - b| <= atol + rtol * max(|a|, |b|)."""
    return finite_number(a) and finite_number(b) and abs(a - b) <= atol + rtol * max(abs(a), abs(b))


def same(a, b) -> bool:
    """Equal as written, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _rows(path: Path, updates: int) -> dict[tuple[int, int], dict]:
    return {(r["update"], r["seed"]): r for r in rundir.read_metrics(Path(path) / rundir.METRICS) if r["update"] <= updates}


def compare_runs(original: Path, reproduced: Path, updates: int) -> Comparison:
    """The first (update, seed, column) whose values differ in the first `updates` updates."""
    a = _rows(original, updates)
    updates = min(updates, max((k[0] for k in a), default=0))  # a run that stopped early has fewer
    b = _rows(reproduced, updates)
    keys = sorted(set(a) | set(b))
    result = Comparison(rows=len(keys), updates=max((k[0] for k in keys), default=0))
    result.manifest_differences = rundir.manifest_differences(rundir.read_manifest(original), rundir.read_manifest(reproduced))
    for update, seed in keys:
        ra, rb = a.get((update, seed)), b.get((update, seed))
        if ra is None or rb is None:
            result.differences.append((update, seed, "(row)", "present" if ra else "absent", "present" if rb else "absent"))
            continue
        for column in sorted(set(ra) | set(rb)):
            if compared(column) and not same(ra.get(column, "absent"), rb.get(column, "absent")):
                result.differences.append((update, seed, column, ra.get(column, "absent"), rb.get(column, "absent")))
    return result


def format_comparison(c: Comparison, original: Path, reproduced: Path) -> str:
    lines = []
    if c.identical:
        lines.append(f"identical: {c.rows} rows ({c.updates} update(s) x seeds) of {original} and {reproduced}, "
                     f"wall-clock columns aside")
    elif c.rows == 0:
        lines.append(f"nothing to compare: {original} has no metrics rows in the updates asked for")
    else:
        update, seed, column, va, vb = c.first_difference
        lines.append(f"DIFFERENT: first at update {update}, seed {seed}, {column}: {va!r} (original) vs {vb!r} (reproduced)")
        *where, va, vb, rel = c.largest()
        size = f"{rel:.2g} relative" if math.isfinite(rel) else "not a number against a number"
        lines.append(f"  {len(c.differences)} value(s) differ; the largest: {size}, update {where[0]}, seed {where[1]}, "
                     f"{where[2]}: {va!r} vs {vb!r}")
    if c.manifest_differences:
        why = "" if c.identical else ", which may explain the difference"
        lines.append(f"manifest differences (original -> reproduced){why}:")
        lines += [f"  {k}: {va!r} -> {vb!r}" for k, va, vb in c.manifest_differences]
    elif not c.identical:
        lines.append("the manifests agree (same code, packages, flags, devices and layout)")
    return "\n".join(lines)
