"""Matplotlib for the lab's plots: a headless backend unless one is already chosen, one way to save.

Importing this module picks the Agg backend unless pyplot is already in use or $MPLBACKEND
names one (a notebook keeps its inline backend; a SLURM job or a test has no display). A
pyplot that gymnax's import left lazy (`ppo_lab.envs.gymnax_api`) is not in use yet.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

from ppo_lab.parts import loaded

if not loaded("matplotlib.pyplot") and "MPLBACKEND" not in os.environ:
    matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402 - after the backend is chosen

DPI = 110


def save_figure(fig, path: Path, close: bool = False) -> Path:
    """Write `fig` to `path` (parent folders made), optionally closing it; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    if close:
        plt.close(fig)
    return path
