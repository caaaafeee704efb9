"""A relaunched sweep skips its runs that already completed with the same resolved config."""

from __future__ import annotations

import logging
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import OmegaConf

from ppo_lab import rundir
from ppo_lab.resolvers import scaled as _scaled  # noqa: F401 - registers ${ppo_lab.scaled:...} for resolving

log = logging.getLogger(__name__)


# What differs between the processes of one run (process 0 saved its own), and between two
# launches of the same run: where they meet (a SLURM job's port follows its job id) and how
# long they wait. None of it changes what is trained.
MEETING_KEYS = ("process_id", "coordinator_address", "init_timeout_s")


def _same_run(config: dict) -> dict:
    """A config less the MEETING_KEYS of its `hardware`."""
    hardware = {k: v for k, v in (config.get("hardware") or {}).items() if k not in MEETING_KEYS}
    return {**config, "hardware": hardware}


def completed_summary(run_dir: Path, resolved: dict) -> dict | None:
    """In a multirun, the summary of `run_dir` if it already completed with this exact
    resolved config (a relaunched sweep), else None (train, or resume from a checkpoint)."""
    try:
        if HydraConfig.get().mode != RunMode.MULTIRUN:
            return None
    except ValueError:  # not inside a Hydra app
        return None
    if not ((Path(run_dir) / rundir.SUMMARY).exists() and (Path(run_dir) / rundir.CONFIG).exists()):
        return None
    try:
        summary = rundir.read_summary(run_dir)
        saved = rundir.read_config(run_dir)
    except Exception as exc:  # noqa: BLE001 - unreadable: train again, never crash here
        log.warning("cannot read %s (%s): running it again", run_dir, exc)
        return None
    if summary.get("status") != "completed":
        return None
    now = OmegaConf.to_container(OmegaConf.create(resolved), resolve=True)
    if _same_run(saved) != _same_run(now):
        log.warning("%s completed before with a different config: running it again in place", run_dir)
        return None
    log.info("SKIPPING %s: already completed with the same config (updates %s)", run_dir, summary.get("updates"))
    print(f"skipped (already completed): {run_dir}", flush=True)
    return {**summary, "skipped": True}
