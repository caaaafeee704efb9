"""`train(cfg, run_dir) -> RunSummary`: one run, from a composed config to its summary.

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
import logging
from pathlib import Path
from typing import Mapping

from omegaconf import DictConfig, OmegaConf

from ppo_lab.config import RunConfig, validate
from ppo_lab.errors import ConfigError
from ppo_lab.hardware import HardwareError, process_index_before_start, start_jax
from ppo_lab.ppo.parallel import make_mesh, replica_sharding
from ppo_lab.run import divergence, processes, resume
from ppo_lab.run.build import Components, build
from ppo_lab.run.completed import completed_summary
from ppo_lab.run.loop import LoweredChunk, Replicas, drive, rounded_budget
from ppo_lab.run.memory import ChunkTooLarge
from ppo_lab.run.population import Population
from ppo_lab.run.processes import check_same_config, end_after_failure
from ppo_lab.run.recorders.reachability import StoreUnreachable, check_stores
from ppo_lab.run.resume import ResumeError
from ppo_lab.run.start import check_memory, lock_run_dir, start_session
from ppo_lab.rundir import lock
from ppo_lab.rundir.checkpoint_format import CheckpointError
from ppo_lab.rundir.run_summary import RunSummary

log = logging.getLogger(__name__)

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


def train(cfg: Mapping, run_dir: Path) -> RunSummary:
    """Train (or resume, or skip if a relaunched sweep already completed it) one run in `run_dir`."""
    run_cfg = validate(resolve(cfg))  # every section, before anything starts or is written
    done = completed_summary(run_dir, run_cfg)  # a relaunched sweep skips finished runs
    if done is not None:
        return done
    try:
        # process 0 of a multi-process run holds the lock for all of them
        with lock_run_dir(run_dir, run_cfg, process_index_before_start(run_cfg.hardware)):  # before any compile or write
            return _train(run_cfg, run_dir)
    except USER_ERRORS:
        raise
    except Exception as exc:
        end_after_failure(exc)  # several processes: ends this one now (a lost peer would hold its shutdown)
        raise


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


def run(cfg: RunConfig, comp: Components, run_dir: Path, devices, loggers_disabled: list | None = None) -> RunSummary:
    """Train (or resume) one run, a population or not, in `run_dir` with the components `build`
    made; returns the summary. `loggers_disabled`: loggers left out because their store was
    unreachable at start (summary.json)."""
    run_dir = Path(run_dir)
    log.info(
        "run %s | env=%s reward=%s | seeds %s | layout %s over %d device(s) | batch %d x %d, %d updates%s",
        run_dir, cfg.env.name, cfg.reward.name, cfg.seeds, comp.layout.mode, comp.layout.num_devices,
        comp.ppo.num_envs, comp.ppo.num_steps, comp.trainer.num_updates, rounded_budget(cfg, comp),
    )
    processes.check_layout(comp.layout, len(devices), "pbt.population" if cfg.pbt is not None else "num_seeds")
    mesh = make_mesh(comp.layout, devices)
    plan = resume.plan(cfg, run_dir)  # a refused resume or config change stops here, nothing written
    divergence.check_relaunch(plan, run_dir)  # a diverged run relaunched unchanged: refused alike
    population = Population(cfg, run_dir) if cfg.pbt is not None else None
    comp = population.into(comp) if population else comp  # the members' drawn values for a fresh init
    state, resumed = resume.restore(plan, comp, cfg, mesh)
    lowered = LoweredChunk(comp.trainer, mesh, state, comp.hypers.sharded(replica_sharding(mesh)))
    if population:  # pbt.fitness and pbt.constraints name metrics the run logs: else refused here, before compiling or writing
        population.check_fitness(lowered.metric_names(comp.action_names))
    if processes.writes():  # one writer per run dir: process 0 of a multi-process run
        run_dir.mkdir(parents=True, exist_ok=True)
    if population:  # the population at the checkpoint; pbt.jsonl cut back to it
        population.resume(resumed)
        comp = population.into(comp)
    session = start_session(cfg, comp, run_dir, devices, plan, resumed, loggers_disabled=loggers_disabled,
                            population=population)
    session.replicas = Replicas(comp.trainer, mesh, state, comp.hypers.sharded(replica_sharding(mesh)),
                                resumed.start_update, session.num_updates, comp.trainer.chunk_updates, lowered)
    gather_s = population.compile_gather(session.replicas.state) if population else 0.0
    session.summary.compile_s = round(session.replicas.compile_s + gather_s, 3)
    session.replicas.hold_every = cfg.pbt.interval_updates if population else None
    check_memory(session.replicas, [session], mesh, devices)
    session.start_loop()
    drive(session.replicas, [session], devices, reraise=True)
    return session.summary
