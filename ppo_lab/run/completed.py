"""A relaunch skips a run that already completed with the same resolved config: a sweep's
finished jobs, and a single run launched again into its finished run dir (said, exit 0, in
seconds: nothing is built or compiled). A config that differs goes on as before: refused when it
changes what is trained, unless allow_config_change=true (a raised ppo.total_timesteps then
trains the run further); a change of bookkeeping alone (evaluation, loggers) resumes from the
final checkpoint and evaluates again."""

from __future__ import annotations

import logging
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import OmegaConf

from ppo_lab import rundir
from ppo_lab.config import RunConfig
from ppo_lab.rundir.run_summary import RunSummary
from ppo_lab.resolvers import scaled as _scaled  # noqa: F401 - registers ${ppo_lab.scaled:...} for resolving

log = logging.getLogger(__name__)


# What differs between the processes of one run (process 0 saved its own), and between two
# launches of the same run: where they meet (a SLURM job's port follows its job id) and how
# long they wait. None of it changes what is trained.
MEETING_KEYS = ("process_id", "coordinator_address", "init_timeout_s")


# Keys that say how a launch starts, not what a run is: a completed run relaunched without
# them (or with them) is the same run.
LAUNCH_KEYS = ("allow_config_change", "resume")


def _same_run(config: dict) -> dict:
    """A config less its LAUNCH_KEYS, the MEETING_KEYS of its `hardware` and where compiled
    programs are cached."""
    hardware = {k: v for k, v in (config.get("hardware") or {}).items()
                if k not in MEETING_KEYS and k != "compilation_cache_dir"}
    return {**{k: v for k, v in config.items() if k not in LAUNCH_KEYS}, "hardware": hardware}


def _multirun() -> bool:
    try:
        return HydraConfig.get().mode == RunMode.MULTIRUN
    except ValueError:  # not inside a Hydra app: a run called in-process, as launch.py runs one
        return False


def completed_summary(run_dir: Path, cfg: RunConfig) -> RunSummary | None:
    """The summary of `run_dir` if it already completed with this exact resolved config (a
    relaunch), else None (train, or resume from a checkpoint). A run dir of another format is
    refused (`rundir.check_format`), completed or not."""
    rundir.check_format(run_dir)
    if cfg.benchmark and not _multirun():  # a measurement is taken afresh each launch
        return None
    if not ((Path(run_dir) / rundir.SUMMARY).exists() and (Path(run_dir) / rundir.CONFIG).exists()):
        return None
    try:
        summary = rundir.read_summary(run_dir)
        saved = rundir.read_config(run_dir)
    except Exception as exc:  # noqa: BLE001 - unreadable: train again, never crash here
        log.warning("cannot read %s (%s): running it again", run_dir, exc)
        return None
    if summary is None or summary.status != "completed":
        return None
    now = OmegaConf.to_container(OmegaConf.create(dict(cfg.resolved)), resolve=True)
    if _same_run(saved) != _same_run(now):
        log.warning("%s completed before with a different config: running it again in place", run_dir)
        return None
    log.info("SKIPPING %s: already completed with the same config (updates %s)", run_dir, summary.updates)
    if _multirun():
        print(f"skipped (already completed): {run_dir}", flush=True)
    else:
        print(f"{run_dir} is complete ({summary.stop_reason or 'completed'}, {summary.updates} updates "
              f"per seed): nothing to train. Its results are in {rundir.SUMMARY}; to train it further, raise "
              f"ppo.total_timesteps and add allow_config_change=true.", flush=True)
    summary.skipped = True
    return summary
