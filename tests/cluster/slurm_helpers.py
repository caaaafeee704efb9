"""What the cluster tests share: running SLURM commands, the skip-unless-ready check, waiting."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

# Node states in which a job can still start (or queue) on this 2-core node. `completing`: the
# node is cleaning up after the previous test's job (seconds on a loaded machine); a job queues.
READY_STATES = {"idle", "mixed", "allocated", "completing"}


def run(*cmd: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def cluster_not_ready_reason() -> str | None:
    """None when the cluster takes jobs and keeps accounts, else why the cluster tests skip."""
    if shutil.which("sinfo") is None or shutil.which("sacct") is None:
        return "no SLURM client here: run `bash tests/cluster/slurm_up.sh` first"
    try:
        out = run("sinfo", "-h", "-o", "%T", timeout=15)
    except subprocess.TimeoutExpired:
        return "sinfo did not answer in 15 s (slurmctld down?): run `bash tests/cluster/slurm_up.sh`"
    states = {s.strip().rstrip("*~#") for s in out.stdout.split()}
    if out.returncode != 0 or not states & READY_STATES:
        return f"SLURM node not ready ({(out.stdout or out.stderr).strip()[:100]}): run `bash tests/cluster/slurm_up.sh`"
    if run("sacct", "-n", "-X", "-S", "now", timeout=15).returncode != 0:
        return "sacct fails (no accounting): run `bash tests/cluster/slurm_up.sh`"
    return None


def wait_until(pred, timeout_s: float, what: str, poll_s: float = 0.2):
    """Poll `pred` until it returns something truthy (returned), or fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


@pytest.fixture(scope="module")
def cluster() -> None:
    """Skip the module's tests, saying why, unless the local cluster takes jobs (imported by
    each cluster test module: pytest finds a fixture in the module's namespace)."""
    reason = cluster_not_ready_reason()
    if reason:
        pytest.skip(reason)
