"""The files of a sweep directory: Hydra's `multirun.yaml` and each job's
`.hydra/overrides.yaml` (read here), `aggregate.csv` and `runs.csv` (written here), and
jobs.json, the jobs a submitit launcher submitted (number, scheduler id, overrides, state;
what the states mean and how to ask SLURM for them: `ppo_lab.rundir.slurm_jobs`)."""

from __future__ import annotations

import csv
import io
import math
import os
from pathlib import Path

from omegaconf import OmegaConf

from ppo_lab.rundir.atomic import read_json, write_json_atomic, write_text_atomic
from ppo_lab.rundir.paths import CONFIG, HYDRA_OVERRIDES, JOBS, METRICS, MULTIRUN, SUMMARY

RUN_FILES = {SUMMARY, METRICS, CONFIG}
# Folders a run dir holds that are no runs (a W&B run has its own config.yaml).
NOT_RUNS = {"checkpoints", "wandb", "tb", "mlruns", "__pycache__"}


def read_overrides(run_dir: Path) -> list[str]:
    """The override strings Hydra recorded for a job ([] when it recorded none)."""
    path = Path(run_dir) / HYDRA_OVERRIDES
    return [str(x) for x in OmegaConf.to_container(OmegaConf.load(path))] if path.exists() else []


def read_multirun(sweep_dir: Path):
    """The sweep's full config (`multirun.yaml`, Hydra node included), or None."""
    path = Path(sweep_dir) / MULTIRUN
    return OmegaConf.load(path) if path.exists() else None


def find_sweep_roots(root: Path) -> list[Path]:
    """The sweep dirs under `root` (itself included): folders with a multirun.yaml."""
    return sorted({p.parent for p in Path(root).rglob(MULTIRUN)})


def find_run_dirs(root: Path) -> list[Path]:
    """The run dirs under `root` (itself included): folders holding summary.json, metrics.csv,
    config.yaml or `.hydra/overrides.yaml` (a job Hydra started, trained or not, running or
    done), a sweep dir (multirun.yaml) excepted; loggers' and checkpoint folders and hidden ones
    are not searched. Sorted by parent folder, then job number (2 before 10), then name."""
    found = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if d not in NOT_RUNS and not d.startswith("."))
        here = Path(folder)
        if MULTIRUN not in files and (RUN_FILES & set(files) or (here / HYDRA_OVERRIDES).exists()):
            found.append(here)
    return sorted(found, key=lambda p: (str(p.parent), int(p.name) if p.name.isdigit() else math.inf, p.name))


def write_table(path: Path, rows: list[dict], columns: list[str]) -> None:
    """A CSV table (aggregate.csv, runs.csv): `columns` first, then any other key a row has
    (sorted, blank in rows without it: never dropped); NaN as blank; atomic."""
    columns = list(columns) + sorted({k for r in rows for k in r} - set(columns))
    buf = io.StringIO(newline="")
    writer = csv.DictWriter(buf, fieldnames=columns)
    writer.writeheader()
    for r in rows:
        writer.writerow({k: ("" if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()})
    write_text_atomic(Path(path), buf.getvalue())


def read_jobs(sweep_dir: Path) -> dict:
    """The sweep's jobs.json ({} when its launcher wrote none): `launcher`, `wait`, `jobs`
    (job number as a string -> {num, job_id, overrides, state, outcome, error})."""
    return read_json(Path(sweep_dir) / JOBS, default={})


def write_jobs(sweep_dir: Path, record: dict) -> None:
    write_json_atomic(Path(sweep_dir) / JOBS, record)


def find_jobs_files(root: Path) -> list[Path]:
    """The sweep dirs under `root` (itself included) that hold a jobs.json."""
    return sorted({p.parent for p in Path(root).rglob(JOBS)})
