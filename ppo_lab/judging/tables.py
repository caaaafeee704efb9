"""Numbers and tables as the lab writes them, in every docs block, report and closing line: one
markdown table writer, a figure to three significant digits, `point [low, high]` in one format
(and the caller's reason where there is no interval), a mean across seeds with the interval and
the method every table of the lab gives (`estimators.mean_summary`), a test with its n."""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from ppo_lab import estimators as es

MAX_DECIMALS = 4


def table(header: list[str], align, rows: list[list[str]]) -> str:
    """A markdown table; `align`: per column, "r" right-aligned, anything else left ("lrr" or a list)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def text_table(header: list[str], align, rows: list[list[str]]) -> str:
    """The same table for a terminal: each column as wide as its widest cell, two spaces apart,
    a rule of dashes under the header."""
    widths = [max(map(len, column)) for column in zip(header, *rows)]

    def pad(cells):
        return "  ".join(c.rjust(w) if a == "r" else c.ljust(w) for c, w, a in zip(cells, widths, align)).rstrip()
    return "\n".join([pad(header), pad(["-" * w for w in widths]), *map(pad, rows)])


def decimals(x: float, digits: int = 3) -> int:
    """The decimals that show `x` to `digits` significant digits (none for |x| >= 10^digits)."""
    if x == 0 or not math.isfinite(x):
        return digits - 1
    return min(MAX_DECIMALS, max(0, digits - 1 - math.floor(math.log10(abs(x)))))


def formatted(x, spec: str, missing: str = "-") -> str:
    """`x` in the format `spec`, or `missing` where there is no value (None or NaN)."""
    return missing if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def num(x: float | None, digits: int = 3, places: int | None = None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    places = decimals(x, digits) if places is None else places
    return f"{x:,.{places}f}" if abs(x) >= 10_000 else f"{x:.{places}f}"


def interval(point: float, low: float, high: float, digits: int = 3, spec: str | None = None, missing: str = "") -> str:
    """`point [low, high]`, all three in one format: `spec` (e.g. ".4g"), else at the decimals that
    show the largest of them to `digits` significant digits. Without an interval (`low` None or
    NaN), the point followed by `missing`, the caller's reason (" [no interval: n<8]")."""
    if spec is None and (point is None or math.isnan(point)):
        return "-"
    if low is None or math.isnan(low):
        return (num(point, digits) if spec is None else format(point, spec)) + missing
    if spec is None:
        places = decimals(max(abs(point), abs(low), abs(high)), digits)
        return f"{num(point, places=places)} [{num(low, places=places)}, {num(high, places=places)}]"
    return f"{point:{spec}} [{low:{spec}}, {high:{spec}}]"


def mean_ci(values: Iterable[float], metric: str, bounds: dict | None = None, digits: int = 3) -> str:
    """The mean across seeds with its 95% interval (`estimators.mean_summary`: Student t, or
    Anderson's where the metric's bounds are known)."""
    s = es.mean_summary(list(values), metric, bounds=bounds or {})
    return interval(s["mean"], s["ci_low"], s["ci_high"], digits)


def per_seed(values: Sequence[float], digits: int = 3) -> str:
    return ", ".join(num(v, digits) for v in values)


def welch(a: Sequence[float], b: Sequence[float]) -> str:
    """Welch's t-test of two groups of seeds, with both n: `p = 0.012 (8 + 8 seeds)`."""
    _, p = es.welch_t_test(a, b)
    return f"p = {pvalue(p)} ({len(a)} + {len(b)} seeds)"


def pvalue(p: float) -> str:
    if math.isnan(p):
        return "-"
    return f"{p:.2g}" if p < 0.001 else f"{p:.3f}" if p < 0.01 else f"{p:.2f}"


def probability(p: dict) -> str:
    """P(A > B) as `estimators.probability_of_improvement_interval` gives it, to 2 decimals."""
    return interval(p["point"], p["ci_low"], p["ci_high"], spec=".2f")


def count(values: Iterable[bool]) -> str:
    """`6 of 8`."""
    values = list(values)
    return f"{sum(bool(v) for v in values)} of {len(values)}"
