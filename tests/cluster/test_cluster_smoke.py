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
import shutil
import subprocess
import time

import pytest

submitit = pytest.importorskip("submitit")

pytestmark = pytest.mark.cluster

PARTITION = "debug"
# Node states in which a job can still start on this 2-core node.
READY_STATES = {"idle", "mixed"}


def _run(*cmd: str, timeout: float = 15) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def _cluster_ready_reason() -> str | None:
    """None when the cluster can take a job, else why the tests skip."""
    if shutil.which("sinfo") is None:
        return "sinfo not found: no SLURM here (run tests/cluster/slurm_up.sh)"
    try:
        out = _run("sinfo", "-h", "-o", "%T")
    except subprocess.TimeoutExpired:
        return "sinfo did not answer in 15 s (slurmctld down? run tests/cluster/slurm_up.sh)"
    states = {s.strip().rstrip("*~#") for s in out.stdout.split()}
    if out.returncode != 0 or not states & READY_STATES:
        detail = (out.stdout.strip() or out.stderr.strip() or "no output")[:200]
        return f"SLURM node not idle ({detail}); run tests/cluster/slurm_up.sh"
    return None


@pytest.fixture(scope="module")
def cluster() -> None:
    reason = _cluster_ready_reason()
    if reason:
        pytest.skip(reason)


def _executor(folder) -> "submitit.AutoExecutor":
    ex = submitit.AutoExecutor(folder=str(folder / "%j"), cluster="slurm")
    ex.update_parameters(timeout_min=5, slurm_partition=PARTITION, cpus_per_task=1)
    return ex


def _sacct_state(job_id: str) -> str:
    out = _run("sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State")
    assert out.returncode == 0, f"sacct failed: {out.stderr}"
    lines = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _wait_until(pred, timeout_s: float, what: str, poll_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")


@pytest.mark.timeout(120)
def test_submitit_job_completes_and_is_accounted(cluster, tmp_path):
    job = _executor(tmp_path).submit(os.getenv, "SLURM_JOB_ID")
    # The callable ran inside the SLURM job it was submitted as.
    assert job.result() == job.job_id
    state = _wait_until(
        lambda: (s := _sacct_state(job.job_id)) == "COMPLETED" and s,
        timeout_s=30,
        what=f"sacct to show job {job.job_id} COMPLETED",
    )
    assert state == "COMPLETED"


@pytest.mark.timeout(120)
def test_cancelled_job_raises_instead_of_hanging(cluster, tmp_path):
    job = _executor(tmp_path).submit(time.sleep, 600)
    _wait_until(
        lambda: _run("squeue", "-h", "-j", job.job_id, "-o", "%T").stdout.strip() == "RUNNING",
        timeout_s=30,
        what=f"job {job.job_id} to start running",
    )
    t0 = time.monotonic()
    assert _run("scancel", job.job_id).returncode == 0
    # job.done() polls sacct; bounded here so a broken accounting setup fails, not hangs.
    _wait_until(job.done, timeout_s=60, what=f"submitit to see job {job.job_id} end", poll_s=0.5)
    done_s = time.monotonic() - t0
    # result() then waits submitit's fixed results timeout (~15 s) for a pickle that never comes.
    with pytest.raises(submitit.core.utils.UncompletedJobError):
        job.result()
    detected_s = time.monotonic() - t0
    assert _sacct_state(job.job_id).startswith("CANCELLED")
    print(f"\ncancel of job {job.job_id}: done() after {done_s:.1f}s, result() raised after {detected_s:.1f}s")
