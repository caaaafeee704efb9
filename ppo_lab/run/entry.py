"""`train(cfg, run_dir) -> summary`: one run, from a composed config to its summary.

launch.py is `@hydra.main` over this; tests compose a config with Hydra's compose API and
call it in-process. The order matters: the config is validated first, the hardware settings
are applied before anything starts XLA's backend (hardware.start_jax), and the
env and network are built once, before any compile or write (env-specific config errors).

The errors a user can cause (USER_ERRORS) are raised before anything is written to the run
directory: launch.py prints them as `error: ...` and exits 2.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Mapping

from omegaconf import DictConfig, OmegaConf

from ppo_lab.config import validate
from ppo_lab.errors import ConfigError
from ppo_lab.hardware import HardwareError, process_index_before_start, start_jax
from ppo_lab.run.build import build
from ppo_lab.run.completed import completed_summary
from ppo_lab.run.loop import run
from ppo_lab.run.memory import ChunkTooLarge
from ppo_lab.run.processes import check_same_config, end_after_failure
from ppo_lab.run.recorders.reachability import StoreUnreachable, check_stores
from ppo_lab.run.resume import ResumeError
from ppo_lab.rundir import lock
from ppo_lab.rundir.checkpoint_format import CheckpointError

# ChunkTooLarge comes after compiling, before the first step (summary.json says failed: memory).
# CheckpointError: no checkpoint verifies, or one of a format that cannot be carried over.
# StoreUnreachable: a logger's tracking store did not answer (logger.<name>.on_unreachable=error).
# RunDirLocked: another live run holds the run dir's lock.
USER_ERRORS = (ConfigError, HardwareError, ResumeError, ChunkTooLarge, CheckpointError, StoreUnreachable, lock.RunDirLocked)


def resolve(cfg) -> dict:
    """A composed DictConfig (interpolations resolved) or a plain dict, as plain dicts."""
    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True)
    return copy.deepcopy(dict(cfg))


def train(cfg: Mapping, run_dir: Path) -> dict:
    """Train (or resume, or skip if a relaunched sweep already completed it) one run in `run_dir`."""
    resolved = resolve(cfg)
    done = completed_summary(run_dir, resolved)  # a relaunched sweep skips finished runs
    if done is not None:
        return done
    run_cfg = validate(resolved)  # every section, before anything starts or is written
    try:
        # process 0 of a multi-process run holds the lock for all of them
        with lock_run_dir(run_dir, run_cfg, process_index_before_start(run_cfg.hardware)):  # before any compile or write
            return _train(run_cfg, run_dir)
    except USER_ERRORS:
        raise
    except Exception as exc:
        end_after_failure(exc)  # several processes: ends this one now (a lost peer would hold its shutdown)
        raise


def lock_run_dir(run_dir: Path, run_cfg, process_index: int = 0):
    """The run dir's lock (rundir/lock.py), or RunDirLocked naming its live holder. A run of
    several processes passes its process index: process 0 holds the lock for all of them."""
    return lock.acquire(run_dir, lock.stale_after_s(run_cfg.checkpoint_every_min), process_index=process_index)


def _train(run_cfg, run_dir: Path) -> dict:
    disabled = []
    if not run_cfg.benchmark:  # a benchmark records to no logger
        # Each remote tracking store answers within its timeout, or the run stops (exit 2) or
        # goes on without that logger: seconds before building, never minutes of retries.
        loggers, disabled = check_stores(run_cfg.logger)
        run_cfg = dataclasses.replace(run_cfg, logger=loggers)
    devices = start_jax(run_cfg.hardware)  # before anything starts XLA's backend (building the env may)
    check_same_config(run_cfg.resolved, run_cfg.hardware.init_timeout_s)  # every process, the same run (else exit 2)
    components = build(run_cfg, len(devices))  # once; env-specific config errors surface here
    return run(run_cfg, components, run_dir, devices, loggers_disabled=disabled)
