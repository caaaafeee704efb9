"""Matplotlib for the lab's plots: a headless backend unless one is already chosen, one way to save."""

from __future__ import annotations

import sys
from pathlib import Path

DPI = 110


def pyplot():
    """`matplotlib.pyplot`, on the Agg backend unless pyplot is already in use (a notebook
    keeps its inline backend; a SLURM job or a test has no display)."""
    import matplotlib

    if "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: Path, close: bool = False) -> Path:
    """Write `fig` to `path` (parent folders made), optionally closing it; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    if close:
        pyplot().close(fig)
    return path
