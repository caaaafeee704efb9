"""Matplotlib for the lab's plots: a headless backend unless one is already chosen, one way to
save; and a run's metrics.csv as the pandas DataFrame its plots draw from.

Importing this module picks the Agg backend unless pyplot is already in use or $MPLBACKEND
names one (a notebook keeps its inline backend; a SLURM job or a test has no display). A
pyplot that gymnax's import left lazy (`ppo_lab.envs.gymnax_api`) is not in use yet.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

from ppo_lab import rundir
from ppo_lab.parts import loaded

if not loaded("matplotlib.pyplot") and "MPLBACKEND" not in os.environ:
    matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402 - after the backend is chosen

DPI = 110
# What `--format` may add beside a PNG: vector formats a paper takes as they are.
EXTRA_FORMATS = ("pdf", "svg")


def parse_formats(text: str | None) -> tuple[str, ...]:
    """`--format pdf,svg` -> ("pdf", "svg"); ValueError naming a format outside EXTRA_FORMATS."""
    formats = tuple(f.strip().lower().lstrip(".") for f in (text or "").split(",") if f.strip())
    bad = [f for f in formats if f not in (*EXTRA_FORMATS, "png")]
    if bad:
        raise ValueError(f"--format {text!r}: {', '.join(bad)} is not a format the lab writes; valid: "
                         f"{', '.join(EXTRA_FORMATS)} (comma-separated; the PNG is always written)")
    return tuple(f for f in formats if f != "png")


def save_figure(fig, path: Path, close: bool = False, formats: tuple[str, ...] = ()) -> Path:
    """Write `fig` to `path` (parent folders made), and beside it the same figure in each of
    `formats` (`curves.pdf` beside `curves.png`), optionally closing it; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    for fmt in formats:
        fig.savefig(path.with_suffix("." + fmt))
    if close:
        plt.close(fig)
    return path


def finish(fig, path: Path | None = None, formats: tuple[str, ...] = (), close: bool = False):
    """`fig` laid out (tight) and, where `path` is given, saved there (`save_figure`); returned,
    for a notebook that shows it."""
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path, close=close, formats=formats)
    return fig


def metrics_frame(path: Path):
    """metrics.csv at `path` as a pandas DataFrame with the same typing as `rundir.read_metrics`.
    pandas costs a third of a second of imports, so it is imported here, by a figure that needs
    it, and not by every tool that saves a figure (nor by `ppo_lab.rundir`, which every run imports)."""
    import pandas as pd

    header = rundir.read_header(path)
    if header is None:
        raise FileNotFoundError(f"{path.parent} has no {path.name} (not a run directory, or no chunk finished yet)")
    return pd.DataFrame.from_records(rundir.read_metrics(path), columns=header)
