"""Reading a page's records: each record (`ppo-lab record`) a run dir of its own, read as
`ppo-lab aggregate` reads run dirs (`analysis/sweep.py`)."""

from __future__ import annotations

from pathlib import Path

from ppo_lab import rundir
from ppo_lab.analysis.sweep import Run, Unit, collect, load_run


def run(root: Path, record: str) -> Run:
    """The record at `record` (relative to the root), refused unless it completed."""
    found = load_run(root / record)
    if found.status != "completed":
        raise ValueError(f"{record}: {found.status}: a page renders completed runs only")
    return found


def benchmark(root: Path, record: str) -> dict:
    """A benchmark run's record (`benchmark=true`): its benchmark.json, refused unless it completed."""
    found = rundir.read_benchmark(root / record)
    if found.get("status") != "completed":
        raise ValueError(f"{record}: {found.get('status')}: a page renders completed runs only")
    return found


def command(found: Run) -> str:
    """The launch's overrides, Hydra's own left out, as a page's commands write them."""
    return " ".join(f"{k}={v}" for k, v in found.overrides.items() if not k.startswith("hydra"))


def units(root: Path, record: str) -> list[Unit]:
    """Every used (run, seed) under `record`, with its criteria (`analysis/criteria.py`)."""
    return [u for u in collect([root / record]).units if u.used]
