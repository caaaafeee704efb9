"""jobs.json: the jobs a sweep launcher submitted (number, scheduler id, overrides, state).

Only the file here; what the states mean and how to ask SLURM for them is in
`ppo_lab.rundir.slurm_jobs`.
"""

from __future__ import annotations

from pathlib import Path

from ppo_lab.rundir.atomic import read_json, write_json_atomic
from ppo_lab.rundir.paths import JOBS


def read_jobs(sweep_dir: Path) -> dict:
    """The sweep's record ({} when its launcher wrote none): `launcher`, `wait`, `jobs`
    (job number as a string -> {num, job_id, overrides, state, outcome, error})."""
    return read_json(Path(sweep_dir) / JOBS, default={})


def write_jobs(sweep_dir: Path, record: dict) -> None:
    write_json_atomic(Path(sweep_dir) / JOBS, record)


def find_jobs_files(root: Path) -> list[Path]:
    """The sweep dirs under `root` (itself included) that hold a jobs.json."""
    return sorted({p.parent for p in Path(root).rglob(JOBS)})
