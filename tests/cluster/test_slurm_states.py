"""What a job's SLURM state means to the lab (rundir/slurm_jobs.py), on the real cluster of
slurm_up.sh: a requeued job is neither done nor failed; an array task sacct does not list is
waited on for a bounded time, then reported unknown by its job id. (PREEMPTED needs a cluster
that preempts; this one has no preemption configured: test_rundir.py has it from sacct lines.)

    bash tests/cluster/slurm_up.sh && python -m pytest -m cluster tests/cluster/test_slurm_states.py
"""

from __future__ import annotations


import pytest

from ppo_lab.rundir import slurm_jobs
from slurm_helpers import cluster, run, wait_until  # noqa: F401 - cluster: the skip-unless-ready fixture

pytestmark = pytest.mark.cluster


def sbatch(tmp_path, *args: str) -> str:
    out = run("sbatch", "--parsable", f"--output={tmp_path}/%j.out", "--cpus-per-task=1", *args)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().split(";")[0]


def sweep_with(tmp_path, job_ids: list[str]):
    slurm_jobs.write_jobs(tmp_path, {"launcher": "slurm", "wait": False,
                                     "jobs": {str(i): {"num": i, "job_id": j, "state": "PENDING"} for i, j in enumerate(job_ids)}})
    return tmp_path


def test_an_unlisted_array_task_is_reported_unknown_after_a_bounded_wait(cluster, tmp_path):
    array = sbatch(tmp_path, "--array=0-1", "--wrap", "true")
    sweep = sweep_with(tmp_path, [f"{array}_0", f"{array}_1", f"{array}_7"])  # task 7 does not exist
    # slurmdbd lists a new array a second or more after sbatch, and for a moment lists a task
    # that has just run under the array's bare id (seen: `101|COMPLETED` before `101_0`): the
    # default bound (minutes) rides that out. The test's short bound is for task 7 alone, so
    # the real tasks are let finish first.
    real = [f"{array}_0", f"{array}_1"]
    # Up to 2 min: on a loaded node the array can queue behind the previous test's job.
    wait_until(lambda: slurm_jobs.sacct_states(real) == dict.fromkeys(real, "COMPLETED"), 120, "the array to complete")
    gave_up = slurm_jobs.wait_for_jobs([sweep], timeout_s=60, poll_s=0.5, limbo_s=3)
    # Returned: given up on task 7 by the limbo rule (limbo_s), not a TimeoutError at the bound.
    assert gave_up == {f"{array}_7": "unknown: not listed by sacct"}
    states = slurm_jobs.sacct_states([f"{array}_0", f"{array}_1", f"{array}_7"])
    assert states == {f"{array}_0": "COMPLETED", f"{array}_1": "COMPLETED"}


def test_a_requeued_job_is_neither_done_nor_failed(cluster, tmp_path):
    job = sbatch(tmp_path, "--requeue", "--wrap", "sleep 60")
    try:
        wait_until(lambda: slurm_jobs.sacct_states([job]).get(job) == "RUNNING", 30, f"job {job} RUNNING")
        assert run("scontrol", "requeue", job).returncode == 0
        state = wait_until(lambda: (s := slurm_jobs.sacct_states([job]).get(job)) != "RUNNING" and s, 30, "a requeue state")
        assert state.split()[0] in {"REQUEUED", "PENDING", "RUNNING"}, state
        assert not slurm_jobs.final_state(state) and not slurm_jobs.failed_state(state)
        sweep = sweep_with(tmp_path, [job])
        assert slurm_jobs.jobs_by_number(sweep)[0]["state"] == slurm_jobs.sacct_states([job])[job]
        with pytest.raises(TimeoutError, match=job):  # still waited on: not done
            slurm_jobs.wait_for_jobs([sweep], timeout_s=1, poll_s=0.5, limbo_s=1)
    finally:
        run("scancel", job)
    state = wait_until(lambda: (s := slurm_jobs.sacct_states([job]).get(job)) and slurm_jobs.final_state(s) and s, 30,
                       "CANCELLED")
    assert state.startswith("CANCELLED") and slurm_jobs.failed_state(state)
