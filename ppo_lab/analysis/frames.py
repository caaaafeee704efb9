"""metrics.csv as a pandas DataFrame, for plots and notebooks.

Here and not in `ppo_lab.rundir`, which every run imports: pandas costs a third of a second of
imports, and only the analysis that draws or tabulates a run's curves needs it.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ppo_lab import rundir


def metrics_frame(path: Path) -> pd.DataFrame:
    """metrics.csv at `path` as a DataFrame with the same typing as `rundir.read_metrics`."""
    header = rundir.read_header(path)
    if header is None:
        raise FileNotFoundError(f"{path.parent} has no {path.name} (not a run directory, or no chunk finished yet)")
    return pd.DataFrame.from_records(rundir.read_metrics(path), columns=header)
