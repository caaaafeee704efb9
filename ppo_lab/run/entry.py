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
from pathlib import Path
from typing import Mapping

from omegaconf import DictConfig, OmegaConf

from ppo_lab.config import validate
from ppo_lab.errors import ConfigError
from ppo_lab.hardware import HardwareError, start_jax
from ppo_lab.run.build import build
from ppo_lab.run.completed import completed_summary
from ppo_lab.run.loop import run
from ppo_lab.run.memory import ChunkTooLarge
from ppo_lab.run.resume import ResumeError

# ChunkTooLarge comes after compiling, before the first step (summary.json says failed: memory).
USER_ERRORS = (ConfigError, HardwareError, ResumeError, ChunkTooLarge)


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
    devices = start_jax(run_cfg.hardware)  # before anything starts XLA's backend (building the env may)
    components = build(run_cfg, len(devices))  # once; env-specific config errors surface here
    return run(run_cfg, components, run_dir, devices)
