"""SLURM job bookkeeping shared by the launchers and the analysis: what a job's state means,
sacct's view of the jobs in a sweep's jobs.json, and waiting for them to end.

The file itself is read and written by `ppo_lab.rundir.jobs`. No Hydra plugin code and no
jax here: `ppo-lab aggregate` imports this in a plain shell.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Sequence

from ppo_lab.rundir.jobs import find_jobs_files, read_jobs, write_jobs

__all__ = ["FINAL_STATES", "FAILED_STATES", "final_state", "failed_state", "sacct_states", "jobs_by_number",
           "pending_jobs", "wait_for_jobs", "read_jobs", "write_jobs", "submitted_without_waiting"]

# sacct states after which a job will not run again (a REQUEUED job will).
FINAL_STATES = {
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
    "DEADLINE", "PREEMPTED", "REVOKED", "SPECIAL_EXIT",
}
# Final states in which the job did not finish its work.
FAILED_STATES = {"CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED"}


def _first_word(state: str | None) -> str:
    # sacct writes e.g. "CANCELLED by 1000": the state is the first word.
    return state.split()[0] if state and state.split() else ""


def final_state(state: str | None) -> bool:
    return _first_word(state) in FINAL_STATES


def failed_state(state: str | None) -> bool:
    return _first_word(state) in FAILED_STATES


def sacct_states(job_ids: Sequence[str]) -> dict[str, str]:
    """Current sacct state of each job id (array ids like 12_3 included); {} without sacct."""
    if not job_ids:
        return {}
    try:
        out = subprocess.run(
            ["sacct", "-n", "-X", "-P", "-o", "JobID,State", "-j", ",".join(sorted({j.split("_")[0] for j in job_ids}))],
            capture_output=True, text=True, timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    states = {}
    for line in out.stdout.splitlines():
        if "|" in line:
            jid, state = line.split("|", 1)
            states[jid.strip()] = state.strip()
    # An array written as 12_[0-3] while pending: give each task that state.
    for jid in job_ids:
        if jid not in states:
            base = jid.split("_")[0]
            pending = [s for k, s in states.items() if k.startswith(base + "_[")]
            if pending:
                states[jid] = pending[0]
    return {j: states[j] for j in job_ids if j in states}


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


def pending_jobs(dirs: Sequence[Path]) -> list[str]:
    """"<job id> (<state>)" of every SLURM job in the dirs' jobs.json files not in a final state."""
    pending = []
    for root in sorted({r for d in dirs for r in find_jobs_files(d)}):
        record = read_jobs(root)
        if record.get("launcher") != "slurm":
            continue
        ids = [j["job_id"] for j in record.get("jobs", {}).values()]
        states = sacct_states(ids)
        pending += [f"{jid} ({states.get(jid, 'unknown')})" for jid in ids if not final_state(states.get(jid))]
    return pending


def wait_for_jobs(dirs: Sequence[Path], timeout_s: float | None = None, poll_s: float = 5.0) -> None:
    """Block until every job listed in the dirs' jobs.json files is in a final sacct state."""
    t0 = time.monotonic()
    while pending := pending_jobs(dirs):
        if timeout_s is not None and time.monotonic() - t0 > timeout_s:
            raise TimeoutError(f"jobs still not finished after {timeout_s:.0f} s: {', '.join(pending)}")
        print(f"waiting for {len(pending)} job(s): {', '.join(pending[:8])}{' ...' if len(pending) > 8 else ''}", flush=True)
        time.sleep(poll_s)


def submitted_without_waiting(sweep_dir: Path) -> bool:
    """Whether the sweep's jobs were submitted with `hydra.launcher.wait=false`."""
    return read_jobs(sweep_dir).get("wait") is False
