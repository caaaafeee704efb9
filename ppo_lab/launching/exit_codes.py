"""What `python launch.py`'s exit code says, for a script that launches a run (README, "Exit codes").

A run's end is its summary.json `status`; the code a script reads is this table's. A stop on
request (Ctrl+C, SIGTERM, the STOP file) is not a completion: 130, as a shell reports a command
ended by Ctrl+C (128 + SIGINT), so `launch.py ... && next-step` does not go on after a stop.
A sweep (-m) exits 0 once its jobs ran: each job's status is in its summary.json and the aggregate.
"""

from __future__ import annotations

from ppo_lab.run.divergence import EXIT_DIVERGED

COMPLETED = 0  # the budget or train.target_return reached, or train.duration_min used (timed_out)
FAILED = 1  # an error while training (summary.json's `error`), or any other Python error
REFUSED = 2  # bad input, a refused relaunch, a locked run dir: nothing trained or written
DIVERGED = EXIT_DIVERGED  # a non-finite loss or parameter stopped the run (summary.json's status `diverged`)
STOPPED = 130  # stopped on request: a signal or the STOP file; resumable from its checkpoint

BY_STATUS = {"completed": COMPLETED, "timed_out": COMPLETED, "failed": FAILED, "diverged": DIVERGED, "stopped": STOPPED}


def exit_code(status: str | None) -> int:
    """The exit code of a run that ended with summary.json's `status` (unknown: FAILED)."""
    return BY_STATUS.get(status, FAILED)
