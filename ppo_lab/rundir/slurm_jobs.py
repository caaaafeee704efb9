"""SLURM job bookkeeping shared by the launchers and the analysis: what a job's state means,
sacct's view of the jobs in a sweep's jobs.json, and waiting for them to end.

submitit does the SLURM part: its watcher (`SlurmInfoWatcher`) makes the one batched sacct
call, parses its lines (array ranges such as `12_[0-3%2]` included) and judges which states
are done (`is_done`: PREEMPTED and REQUEUED are not, the job is being requeued). The lab adds:
a few more transient states submitit does not list, which done states mean the job failed,
and a bound on waiting for a job that sacct does not list (yet) or that stays PREEMPTED
(a cluster that preempts without requeueing): after `LIMBO_S` it is reported, not waited on.

The file itself is read and written by `ppo_lab.rundir.sweep_files`. No Hydra plugin code and no
jax here: `ppo-lab aggregate` imports this in a plain shell.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Sequence

from submitit.slurm.slurm import SlurmInfoWatcher

from ppo_lab.rundir.sweep_files import find_jobs_files, read_jobs, write_jobs

__all__ = ["FAILED_STATES", "KILLED_STATES", "LIMBO_S", "final_state", "failed_state", "sacct_states", "jobs_by_number",
           "wait_for_jobs", "read_jobs", "write_jobs", "submitted_without_waiting"]

# Not done, beyond submitit's list (READY, PENDING, RUNNING, UNKNOWN, REQUEUED, COMPLETING,
# PREEMPTED): states a job passes through on its way to running again or ending.
TRANSIENT_STATES = {"CONFIGURING", "RESIZING", "SUSPENDED", "REQUEUE_HOLD", "REQUEUE_FED", "SIGNALING",
                    "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD"}
# Done states in which the job did not finish its work.
FAILED_STATES = {"CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}
# Of those, the ones in which SLURM stopped the job: its process wrote no result (FAILED is left
# out: a Python error in the job is written as its result, which may land a moment after the state).
KILLED_STATES = FAILED_STATES - {"FAILED"}
# States that may never change: a task sacct does not list (yet), a preemption not requeued.
LIMBO_STATES = {"UNKNOWN", "PREEMPTED"}
# How long a job may stay in a limbo state before it is reported rather than waited on: longer
# than submitit's requeue after a preemption and sacct's delay in listing a new array task.
LIMBO_S = 300.0
SACCT_TIMEOUT_S = 30


class _BoundedWatcher(SlurmInfoWatcher):
    """submitit's watcher with its sacct call bounded in time (a hung slurmdbd must not hang
    `ppo-lab aggregate --wait`); a call that times out is bypassed by submitit, with a warning."""

    def _make_command(self) -> list[str] | None:
        command = super()._make_command()
        if command is None or shutil.which("timeout") is None:
            return command
        return ["timeout", str(SACCT_TIMEOUT_S), *command]


class _OneState(SlurmInfoWatcher):
    """submitit's watcher asked about one state string: its `is_done` holds the judgement."""

    def __init__(self, state: str):
        super().__init__()
        self.state = state

    def get_state(self, job_id: str, mode: str = "standard") -> str:
        return self.state


def _first_word(state: str | None) -> str:
    # sacct writes e.g. "CANCELLED by 1000": the state is the first word.
    return state.split()[0].upper() if state and state.split() else ""


def final_state(state: str | None) -> bool:
    """Whether a job in this sacct state will not run again (None, unlisted: not known yet)."""
    word = _first_word(state)
    return bool(word) and word not in TRANSIENT_STATES and _OneState(word).is_done("-", mode="cache")


def failed_state(state: str | None) -> bool:
    return _first_word(state) in FAILED_STATES


def sacct_states(job_ids: Sequence[str]) -> dict[str, str]:
    """The sacct state of each job id sacct lists (array ids like 12_3 included); {} without
    sacct. One batched call through submitit's watcher (which warns and goes on if it fails)."""
    if not job_ids:
        return {}
    watcher = _BoundedWatcher()
    for job_id in job_ids:
        watcher.register_job(str(job_id))
    watcher.update()
    infos = {j: watcher.get_info(str(j), mode="cache") for j in job_ids}
    return {j: info["State"] for j, info in infos.items() if info.get("State")}


def jobs_by_number(sweep_dir: Path, refresh: bool = True) -> dict[int, dict]:
    """The jobs of a sweep's jobs.json by job number; with `refresh`, the state of every SLURM
    job not yet final is asked of sacct (the file keeps what the launcher last saw)."""
    record = read_jobs(sweep_dir)
    jobs = {int(k): v for k, v in (record.get("jobs") or {}).items()}
    pending = [j["job_id"] for j in jobs.values() if not final_state(j.get("state"))]
    if refresh and pending and record.get("launcher") == "slurm":
        states = sacct_states(pending)
        for job in jobs.values():
            job["state"] = states.get(job["job_id"], job.get("state"))
    return jobs


def _slurm_job_ids(dirs: Sequence[Path]) -> list[str]:
    ids = []
    for root in sorted({r for d in dirs for r in find_jobs_files(d)}):
        record = read_jobs(root)
        if record.get("launcher") == "slurm":
            ids += [j["job_id"] for j in record.get("jobs", {}).values()]
    return list(dict.fromkeys(ids))


def wait_for_jobs(dirs: Sequence[Path], timeout_s: float | None = None, poll_s: float = 5.0,
                  limbo_s: float = LIMBO_S) -> dict[str, str]:
    """Block until every SLURM job listed in the dirs' jobs.json files is in a final sacct
    state, or has been unlisted / PREEMPTED for `limbo_s`. Returns those last ones, job id ->
    what is known ("unknown: not listed by sacct" or the state), also printed by job id."""
    ids = _slurm_job_ids(dirs)
    t0 = time.monotonic()
    in_limbo: dict[str, float] = {}  # job id -> when it was first seen in a limbo state (unlisted, PREEMPTED)
    while True:
        states = sacct_states(ids)
        now = time.monotonic()
        for j in ids:
            if _first_word(states.get(j) or "UNKNOWN") in LIMBO_STATES:
                in_limbo.setdefault(j, now)
            else:
                in_limbo.pop(j, None)
        gave_up = {j: states.get(j, "unknown: not listed by sacct") for j in ids
                   if not final_state(states.get(j)) and now - in_limbo.get(j, now) > limbo_s}
        pending = [f"{j} ({states.get(j, 'not listed by sacct yet')})" for j in ids
                   if not final_state(states.get(j)) and j not in gave_up]
        if not pending:
            break
        if timeout_s is not None and now - t0 > timeout_s:
            raise TimeoutError(f"jobs still not finished after {timeout_s:.0f} s: {', '.join(pending)}")
        print(f"waiting for {len(pending)} job(s): {', '.join(pending[:8])}{' ...' if len(pending) > 8 else ''}", flush=True)
        time.sleep(poll_s)
    for job_id, state in gave_up.items():
        print(f"stopped waiting for job {job_id} after {limbo_s:.0f} s: {state}; its runs count as not finished",
              flush=True)
    return gave_up


def submitted_without_waiting(sweep_dir: Path) -> bool:
    """Whether the sweep's jobs were submitted with `hydra.launcher.wait=false`."""
    return read_jobs(sweep_dir).get("wait") is False
