"""The lab's Hydra app: `ppo-lab train [group=option ...] [key=value ...]`, and `python launch.py`
in a checkout, which is the same app.

All the work is `ppo_lab.run.entry.train(cfg, run_dir)`; this module adds Hydra (the config from
the config groups, the run dir) and the exit code. It lives in the package, not in a script, so an
installed lab trains from any folder. Importing the lab imports jax but does not start XLA's
backend: `train` applies the `hardware` group (`ppo_lab.hardware.start_jax`) before that.
Reached through `launching.train_command.main`, which refuses a misspelled key first.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from ppo_lab import rundir
from ppo_lab.config_keys import CONF_DIR
from ppo_lab.errors import SweepStopped
from ppo_lab.judging.objective import job_result
from ppo_lab.launching.command_line import config_source, fail, lab_error, overrides_of
from ppo_lab.launching.help import help_text
from ppo_lab.run.divergence import EXIT_DIVERGED, RunDiverged
from ppo_lab.run.entry import USER_ERRORS, train
from ppo_lab.run.failure import traceback_to_log_files
from ppo_lab.run.recorders.console import resume_command
from ppo_lab.run.resume import in_multirun


def _forget_empty_run_dir(run_dir: Path) -> None:
    """After a user error, remove the run dir Hydra just made if it holds no result, so a
    bad command line leaves nothing that looks like a run (never touches an existing run)."""
    if rundir.has_run_files(run_dir):
        return
    try:
        only_hydra = all(p.name == ".hydra" or p.suffix == ".log" for p in run_dir.iterdir())
    except FileNotFoundError:  # the other processes of a multi-process run stop alike: one removed it first
        return
    if only_hydra:
        logging.shutdown()
        shutil.rmtree(run_dir, ignore_errors=True)


# The exit code a script that launches a run reads (README, "Exit codes"): its summary.json
# `status` by this table. A stop on request (Ctrl+C, SIGTERM, the STOP file) is no completion:
# 130, as a shell reports a command ended by Ctrl+C (128 + SIGINT), so `launch.py ... && next-step`
# does not go on after a stop. A sweep (-m) exits 0 once its jobs ran: each job's status is in its
# summary.json and the aggregate; a signal that stopped one of its jobs stops it too (130).
COMPLETED = 0  # the budget or train.target_return reached, or train.duration_min used (timed_out)
FAILED = 1  # an error while training (summary.json's `error`), or any other Python error
REFUSED = 2  # bad input, a refused relaunch, a locked run dir: nothing trained or written
DIVERGED = EXIT_DIVERGED  # a non-finite loss or parameter stopped the run (summary.json's status `diverged`)
STOPPED = 130  # stopped on request: a signal or the STOP file; resumable from its checkpoint
BY_STATUS = {"completed": COMPLETED, "timed_out": COMPLETED, "failed": FAILED, "diverged": DIVERGED, "stopped": STOPPED}

# The status of the run this process trained (not a sweep's), for the exit code `launch` ends with.
_ended: list[str] = []


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> rundir.RunSummary | float | None:
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        summary = train(cfg, run_dir)
    except USER_ERRORS as exc:  # bad config, missing hardware, a refused resume: nothing written
        print(f"error: {exc}", file=sys.stderr, flush=True)  # once: no log line repeating it
        if in_multirun():
            exc.lab_reported = True  # said once, here, naming this job's error
            raise  # Hydra records this job as failed and the sweep goes on; the aggregate names it
        _forget_empty_run_dir(run_dir)
        sys.exit(_exit_code(exc))
    except OSError as exc:
        if rundir.write_failure(exc) is None or in_multirun():
            raise  # not a write of the run's files; or a sweep's job, which Hydra records as failed
        _say_write_failure(exc, run_dir)
    if not in_multirun():  # the exit code says how it ended (a sweep goes on: each job's status is its summary's)
        _ended.append(summary.status)
    else:
        SweepStopped.after(summary)  # but not past a Ctrl+C or SIGTERM
    return job_result(summary, cfg)  # the objective when a sweeper asks for one


def _say_write_failure(exc: OSError, run_dir: Path) -> None:
    """A full disk, a permission or a read-only file system met while writing the run's files:
    one line and the resume command (the closing summary says both when it got that far), the
    traceback only in launch.log; exit 1, as for any error."""
    traceback_to_log_files("the run failed writing its files", exc)
    if not getattr(exc, "closing_summary_printed", False):
        print(f"error: {rundir.write_failure(exc)}", file=sys.stderr, flush=True)
        print(f"resume (continues from the last checkpoint): {resume_command(run_dir)}", file=sys.stderr, flush=True)
    sys.exit(1)


def _exit_code(exc: BaseException) -> int:
    """2 for a refused command (config, hardware, resume), EXIT_DIVERGED for a relaunch of a
    run that diverged (README, "Exit codes")."""
    return DIVERGED if isinstance(exc, RunDiverged) else REFUSED


def launch(argv: list[str]) -> None:
    """`main` on the command line `argv` (Hydra's, as `python launch.py` takes it), with the lab's
    errors in one form (a key or group typo was refused before the lab loaded); what Hydra or a
    job still refuses is printed once as `error:`, exit 2."""
    if "--help" in argv or "-h" in argv:  # ours, for people; Hydra's own is --hydra-help
        print(help_text(overrides_of(argv), *config_source(argv)))
        return
    # Hydra's own report (its wording, exit 1) is skipped: it re-raises, and we say it our way.
    # Any other error keeps Python's traceback and exit 1.
    os.environ.setdefault("HYDRA_FULL_ERROR", "1")
    sys.argv = [sys.argv[0], *argv]  # what Hydra parses
    try:
        main()
    except SweepStopped as stop:  # the job's closing summary said how to resume the sweep
        print(f"stopped: {stop}", file=sys.stderr, flush=True)
        sys.exit(STOPPED)
    except KeyboardInterrupt:  # a second Ctrl+C: the run checkpointed and said how it ended; no traceback
        print("stopped at once (Ctrl+C again): the last complete chunk is checkpointed; "
              f"resume: {resume_command() or 'relaunch into the run directory'}", file=sys.stderr, flush=True)
        sys.exit(STOPPED)
    except USER_ERRORS as exc:
        if getattr(exc, "lab_reported", False):
            sys.exit(_exit_code(exc))
        fail(exc)
    except Exception as exc:
        message = lab_error(exc, argv)
        if message is None:
            raise
        fail(message)
    code = BY_STATUS.get(_ended[-1], FAILED) if _ended else COMPLETED  # an unknown status: FAILED
    if code:
        sys.exit(code)
