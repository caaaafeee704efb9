"""Smoke tests against the real single-node SLURM cluster of tests/cluster/slurm_up.sh.

Bring the cluster up first (``tests/cluster/slurm_up.sh``) and down afterwards
(``tests/cluster/slurm_down.sh``). Without ``sinfo`` or without a responsive node these tests
skip and say why. No environment variables are needed: the cluster's config lives at the
default ``/etc/slurm`` paths.

The callables submitted are importable by reference (``os.getenv``, ``time.sleep``), because
cloudpickle pickles functions of a test module by module name, which the job's Python could not
import.
"""

from __future__ import annotations

import os
import time

import pytest
from slurm_helpers import cluster, run, wait_until  # noqa: F401 - cluster: the skip-unless-ready fixture

submitit = pytest.importorskip("submitit")

pytestmark = pytest.mark.cluster

PARTITION = "debug"
def _executor(folder) -> "submitit.AutoExecutor":
    ex = submitit.AutoExecutor(folder=str(folder / "%j"), cluster="slurm")
    ex.update_parameters(timeout_min=5, slurm_partition=PARTITION, cpus_per_task=1)
    return ex


def _sacct_state(job_id: str) -> str:
    out = run("sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State")
    assert out.returncode == 0, f"sacct failed: {out.stderr}"
    lines = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    return lines[-1] if lines else ""


@pytest.mark.timeout(120)
def test_submitit_job_completes_and_is_accounted(cluster, tmp_path):
    job = _executor(tmp_path).submit(os.getenv, "SLURM_JOB_ID")
    # The callable ran inside the SLURM job it was submitted as.
    assert job.result() == job.job_id
    state = wait_until(
        lambda: (s := _sacct_state(job.job_id)) == "COMPLETED" and s,
        timeout_s=30,
        what=f"sacct to show job {job.job_id} COMPLETED",
    )
    assert state == "COMPLETED"


@pytest.mark.timeout(120)
def test_cancelled_job_raises_instead_of_hanging(cluster, tmp_path):
    job = _executor(tmp_path).submit(time.sleep, 600)
    wait_until(
        lambda: run("squeue", "-h", "-j", job.job_id, "-o", "%T").stdout.strip() == "RUNNING",
        timeout_s=30,
        what=f"job {job.job_id} to start running",
    )
    t0 = time.monotonic()
    assert run("scancel", job.job_id).returncode == 0
    # job.done() polls sacct; bounded here so a broken accounting setup fails, not hangs.
    wait_until(job.done, timeout_s=60, what=f"submitit to see job {job.job_id} end", poll_s=0.5)
    done_s = time.monotonic() - t0
    # result() then waits submitit's fixed results timeout (~15 s) for a pickle that never comes.
    with pytest.raises(submitit.core.utils.UncompletedJobError):
        job.result()
    detected_s = time.monotonic() - t0
    assert _sacct_state(job.job_id).startswith("CANCELLED")
    print(f"\ncancel of job {job.job_id}: done() after {done_s:.1f}s, result() raised after {detected_s:.1f}s")
