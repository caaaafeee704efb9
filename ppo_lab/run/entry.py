"""Every launch, from a composed config to the host loop: `train_cells(cfgs, run_dirs)`, and
`train(cfg, run_dir) -> RunSummary` (launch.py is `@hydra.main` over it; tests compose a config
with Hydra's compose API and call it in-process).

A launch trains cells. A run is a launch of one cell, a population (`pbt.*`) a cell's option;
a group of a grid (hydra/launcher=vmap, launching/vmap_groups.py) is a launch of several cells
that differ only in traced hyperparameters (`config.traced_keys()`) and `seed`, trained by one
compiled program. Every cell goes the same way:

    validate -> skip when it completed before -> lock its run dir -> its loggers' stores answer
    -> (jax started with the hardware settings; every process the same config) -> build
    -> plan its resume (the config refusal) -> a diverged run relaunched unchanged refused
    -> restore its state
    then, per start update, one program: lower the chunk (a population's fitness metrics are
    checked against it, before anything is written) -> each cell's start (`_start`) ->
    compile -> the memory of the whole program checked -> `loop.drive` over every cell's run

An error a user can cause (USER_ERRORS) fails its cell alone, before anything compiles or is
written to its run dir; `train` raises it (launch.py: `error: ...`, exit 2).

A group's cell c, seed s, is replica c x num_seeds + s: its PRNG keys are those of seed s in a
run of its own (`ppo.parallel.replica_keys`), its hyperparameters its own config's (ppo/hypers.py),
so its numbers are those of its run alone up to the float rounding of a wider batch. Its replicas
lie over the devices as a run's seeds do (a split of one seed's envs is a run's alone). On the host
each cell is an ordinary run (`loop.Session`): run dir, config.yaml, resume, metrics.csv,
recorders, checkpoints, stop conditions, evaluation, summary.json (with `vmap_group`). The cells
checkpoint together, so a killed group resumes every cell from one update; cells that resume
from different updates train in one program per start update. A cell that stops early finishes
as its own run would; its replicas go on unseen until the program ends.

Several processes (docs/multihost.md): every process trains the same cells over the global
mesh; process 0 alone writes their run dirs and holds their locks. The processes agree on the
cells (`_agreed`: one that fails in any process fails in all) so their collectives match.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import jax
import numpy as np
from omegaconf import DictConfig, OmegaConf

from ppo_lab import rundir
from ppo_lab.config import RunConfig, validate
from ppo_lab.errors import ConfigError, RunDirFormatError
from ppo_lab.hardware import HardwareError, process_index_before_start, start_jax
from ppo_lab.ppo.parallel import choose_layout, make_mesh, put_replicas, replica_sharding, to_host
from ppo_lab.run import processes, resume
from ppo_lab.run.build import Components, build, starting_at
from ppo_lab.run.divergence import check_relaunch
from ppo_lab.run.evaluate import episode_runner
from ppo_lab.run.loop import LoweredChunk, Replicas, Session, drive, finish, rounded_budget
from ppo_lab.run.manifest import write_run_manifest
from ppo_lab.run.memory import ChunkTooLarge, check_fits
from ppo_lab.run.population import Population
from ppo_lab.run.recorders import RunContext, choose_recorders
from ppo_lab.run.recorders.reachability import StoreUnreachable, check_stores
from ppo_lab.run.resume import ResumeError
from ppo_lab.run.shared_program import shared_program_key
from ppo_lab.rundir import lock
from ppo_lab.rundir.checkpoints import CheckpointError
from ppo_lab.rundir.run_summary import RunSummary, lab_versions, slurm_job_id

log = logging.getLogger(__name__)

# ChunkTooLarge comes after compiling, before the first step (summary.json says failed: memory).
# CheckpointError: no checkpoint verifies, or one does not fit this config's state.
# RunDirFormatError: the run dir (or resume=OTHER_RUN) is of another format (rundir/run_format.py).
# StoreUnreachable: a logger's tracking store did not answer (logger.<name>.on_unreachable=error).
# RunDirLocked: another live run holds the run dir's lock.
USER_ERRORS = (ConfigError, HardwareError, ResumeError, ChunkTooLarge, CheckpointError, RunDirFormatError, StoreUnreachable,
               lock.RunDirLocked)


def train(cfg: Mapping, run_dir: Path) -> RunSummary:
    """Train (or resume, or skip if it completed before) one run, a population or not, in
    `run_dir`: a launch of one cell. Its error, if it failed, is raised."""
    [result] = train_cells([cfg], [run_dir])
    if isinstance(result, BaseException):
        raise result
    return result


@dataclass(eq=False)
class Cell:
    """One run of a launch, from its validated config to its summary."""
    index: int  # its place in the caller's lists
    cfg: RunConfig
    run_dir: Path
    lock: Any  # the run dir's lock, held until the launch ends
    loggers_disabled: list  # a store unreachable at start (logger.<name>.on_unreachable=warn)
    comp: Components | None = None
    plan: resume.Plan | None = None
    mesh: Any = None  # its own layout's (a group's program has its own)
    state: Any = None  # its restored state (host arrays in a group) until the program holds it
    resumed: resume.Resumed | None = None
    population: Population | None = None
    session: Any = None  # loop.Session, from its start


def train_cells(cfgs: list[Mapping], run_dirs: list[Path]) -> list[RunSummary | BaseException]:
    """Train (or resume, or skip when completed) each run `cfgs[i]` in `run_dirs[i]`; several
    cells share one program. Returns, in order, each run's summary or the exception that ended
    it: a bad config or a refused resume fails that cell alone, before anything compiles.
    SystemExit and KeyboardInterrupt (a signal, a SLURM requeue) are raised once every cell has
    checkpointed."""
    cells: list[Cell] = []
    try:
        return _train(cfgs, [Path(d) for d in run_dirs], cells)
    except Exception as exc:
        processes.end_after_failure(exc)  # several processes: end this one now (the others' collectives fail)
        raise
    finally:  # every exit: completed, stopped, failed, a signal
        for cell in cells:
            cell.lock.release()


def _train(cfgs: list[Mapping], run_dirs: list[Path], cells: list[Cell]) -> list:
    grid = len(cfgs) > 1
    results: list = [None] * len(cfgs)
    for index, (cfg, run_dir) in enumerate(zip(cfgs, run_dirs)):
        try:
            cell = _checked(index, cfg, run_dir, grid, results)
        except USER_ERRORS as exc:
            results[index] = exc
            continue
        if cell is not None:
            cells.append(cell)
    if not cells:
        return results
    if len({shared_program_key(c.cfg.resolved) for c in cells}) > 1:  # the launcher groups by this key
        raise ValueError(f"train_cells: the {len(cells)} runs do not share one program (they differ beyond the "
                         f"traced keys and seed)")
    devices = start_jax(cells[0].cfg.hardware)  # before anything starts XLA's backend (building the env may)
    ready, trainer = [], None
    for cell in _agreed(cells, results):
        try:
            processes.check_same_config(cell.cfg.resolved, cell.cfg.hardware.init_timeout_s)  # several processes
            trainer = _prepare(cell, devices, grid, trainer)
            ready.append(cell)
        except USER_ERRORS as exc:
            results[cell.index] = exc
    ready = _agreed(ready, results)
    for start in sorted({c.resumed.start_update for c in ready}):
        _train_program([c for c in ready if c.resumed.start_update == start], devices, grid, results)
    return results


def _checked(index: int, cfg: Mapping, run_dir: Path, grid: bool, results: list) -> Cell | None:
    """The cell, validated, its run dir locked (None when it completed before: its summary is
    its result). Each cell's run dir is locked as a run of its own would be."""
    # A composed DictConfig (interpolations resolved) or a plain dict (the caller's left as it is), as plain dicts.
    plain = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else copy.deepcopy(dict(cfg))
    run_cfg = validate(plain)  # every section, before anything starts or is written
    done = resume.completed_summary(run_dir, run_cfg)  # a relaunched sweep skips finished runs
    if done is not None:
        results[index] = done
        return None
    if grid:
        check_grid_cell(run_cfg)
    # The run dir's lock (rundir/lock.py), before any compile or write, or RunDirLocked naming its
    # live holder; process 0 of a multi-process run holds it for all of them.
    held = lock.acquire(run_dir, lock.stale_after_s(run_cfg.checkpoint.every_min),
                        process_index=process_index_before_start(run_cfg.hardware))
    try:
        disabled = []
        if not run_cfg.benchmark:  # a benchmark records to no logger
            # Each remote tracking store answers within its timeout, or the run stops (exit 2) or
            # goes on without that logger: seconds before building, never minutes of retries.
            loggers, disabled = check_stores(run_cfg.logger)
            run_cfg = dataclasses.replace(run_cfg, logger=loggers)
    except BaseException:
        held.release()
        raise
    return Cell(index, run_cfg, run_dir, held, disabled)


def check_grid_cell(cfg: RunConfig) -> None:
    """What a cell of a group cannot be: a split of one seed's envs, a population."""
    if cfg.hardware.layout == "envs":
        raise ConfigError("hardware.layout", "envs", "auto, seeds or single with hydra/launcher=vmap (a group lays "
                                                     "its replicas out as seeds; hydra/launcher=basic splits one seed's envs)")
    if cfg.pbt is not None:
        raise ConfigError("pbt.population", cfg.pbt.population, "0 with hydra/launcher=vmap (a population is "
                                                                "one run: hydra/launcher=basic)")


def _agreed(cells: list[Cell], results: list) -> list[Cell]:
    """The cells every process goes on with, the same in all (their collectives must match): a
    cell that failed in any process (its run dir locked: process 0 alone takes the locks) fails
    in all. One process: `cells` as they are."""
    if not processes.several():
        return cells
    failed = processes.agree([int(results[i] is not None) for i in range(len(results))])
    kept = []
    for cell in cells:
        if failed[cell.index]:
            results[cell.index] = results[cell.index] or RuntimeError(
                f"{cell.run_dir}: failed in another process of this run (its error is in that process's log)")
        else:
            kept.append(cell)
    return kept


def _prepare(cell: Cell, devices, grid: bool, trainer):
    """Build the cell (a group's cell as a run of its seeds alone: layout seeds), plan its
    resume (the config refusal) and restore its state (a group's to the host). A group's cells
    share the first cell's `trainer` (the same functions: its init compiles once), each with its
    own hyperparameters. Returns the trainer."""
    cfg = cell.cfg
    if grid:
        cfg = dataclasses.replace(cfg, hardware=dataclasses.replace(cfg.hardware, layout="seeds"))
    cell.comp = build(cfg, len(devices))  # env-specific config errors surface here
    if trainer is not None:
        cell.comp = dataclasses.replace(cell.comp, trainer=trainer)
    if not grid:  # several processes: every one must hold replicas (a group checks its program's layout)
        processes.check_layout(cell.comp.layout, len(devices), "pbt.population" if cell.cfg.pbt is not None else "num_seeds")
    cell.plan = resume.plan(cell.cfg, cell.run_dir)  # a refused resume or config change stops here, nothing written
    check_relaunch(cell.plan, cell.run_dir)  # a diverged run relaunched unchanged: refused alike
    if cell.cfg.pbt is not None:
        cell.population = Population(cell.cfg, cell.run_dir)
        cell.comp = cell.population.into(cell.comp)  # the members' drawn values for a fresh init
    cell.mesh = make_mesh(cell.comp.layout, devices)
    cell.state, cell.resumed = resume.restore(cell.plan, cell.comp, cell.cfg, cell.mesh)
    if grid:  # several processes: a collective, every cell in every process alike
        cell.state = to_host(cell.state)
    return cell.comp.trainer


def _stacked(trees: list):
    """The cells' trees along the replica axis, cell-major (one cell's as it is)."""
    if len(trees) == 1:
        return trees[0]
    return jax.tree.map(lambda *xs: np.concatenate([np.asarray(x) for x in xs]), *trees)


def _fail(cells: list[Cell], results: list, exc: BaseException) -> None:
    for cell in cells:
        results[cell.index] = exc


def _train_program(cells: list[Cell], devices, grid: bool, results: list) -> None:
    """One program for `cells` (all at the same start update): lower, start each cell's run,
    compile, check the memory, then the host loop (`loop.drive`); each cell finished as a run."""
    first = cells[0]
    try:
        layout, mesh, state, group = _program_layout(cells, devices, grid)
    except ConfigError as exc:
        return _fail(cells, results, exc)
    for cell in cells:
        log.info("run %s | env=%s reward=%s | seeds %s | layout %s over %d device(s) | batch %d x %d, %d updates%s",
                 cell.run_dir, cell.cfg.env.name, cell.cfg.reward.name, cell.cfg.seeds, layout.mode, layout.num_devices,
                 cell.comp.ppo.num_envs, cell.comp.ppo.num_steps, cell.comp.trainer.num_updates,
                 rounded_budget(cell.cfg, cell.comp))
    sharding = replica_sharding(mesh)
    trainer = starting_at(first.comp, first.cfg, first.resumed.start_update).trainer  # chunks end where they must
    lowered = LoweredChunk(trainer, mesh, state, _stacked([c.comp.hypers for c in cells]).sharded(sharding))
    started = []
    for position, cell in enumerate(cells):
        try:  # each cell set up as a run of its own (process 0 alone writes its run dir)
            _start(cell, lowered, devices, None if group is None else dict(group, cell=position))
            started.append(cell)
        except Exception as exc:  # noqa: BLE001 - a cell that cannot start (a logger) fails alone
            results[cell.index] = exc
    started = _agreed(started, results)  # a logger starts in process 0 alone
    if not started:
        return None
    # A population's members take the checkpoint's values (`_start`): hyperparameters stacked after.
    program = Replicas(trainer, mesh, state, _stacked([c.comp.hypers for c in cells]).sharded(sharding),
                       first.resumed.start_update, started[0].session.num_updates, trainer.chunk_updates, lowered)
    _drive(program, cells, started, mesh, devices, group, results)
    return None


def _program_layout(cells: list[Cell], devices, grid: bool):
    """(layout, mesh, state on it, the summary's `vmap_group` or None) of the program that
    trains `cells`: a run's own; a group's replicas = cells x seeds laid out as seeds."""
    first = cells[0]
    if not grid:
        return first.comp.layout, first.mesh, first.state, None
    seeds = first.cfg.num_seeds
    layout = choose_layout(len(cells) * seeds, first.comp.ppo, len(devices), "seeds")
    processes.check_layout(layout, len(devices), "cells x num_seeds")  # several processes: every one holds replicas
    mesh = make_mesh(layout, devices)
    state = put_replicas(_stacked([c.state for c in cells]), replica_sharding(mesh))
    for cell in cells:
        cell.state = None  # from now on the program holds the state
    log.info("vmap group: %d cells x %d seeds = %d replicas over %d device(s), from update %d", len(cells), seeds,
             len(cells) * seeds, layout.num_devices, first.resumed.start_update)
    return layout, mesh, state, {"cells": len(cells), "replicas": len(cells) * seeds, "layout": layout.as_dict()}


def _start(cell: Cell, lowered: LoweredChunk, devices, vmap_group: dict | None) -> None:
    """One cell's run set up on the host before its program compiles: a population's fitness
    metrics checked against what the chunk logs (else refused, before anything is written) and
    its members taken from the checkpoint (pbt.jsonl cut back to it); manifest.json and
    config.yaml; its `loop.Session` (the rows a resumed run keeps, in its windowed return), with
    summary.json's fields at start (`vmap_group`: a group's cell's, there before a recorder
    starts) and its recorders started. A recorder that cannot start (a logger) raises, its
    failure in the summary. Process 0 alone writes the run dir."""
    cfg, run_dir, resumed = cell.cfg, cell.run_dir, cell.resumed
    if cell.population is not None:
        cell.population.check_fitness(lowered.metric_names(cell.comp.action_names))
    if processes.writes():  # one writer per run dir: process 0 of a multi-process run
        run_dir.mkdir(parents=True, exist_ok=True)
    if cell.population is not None:
        cell.population.resume(resumed)
        cell.comp = cell.population.into(cell.comp)
    comp = cell.comp
    if processes.writes():
        # manifest.json first: it says the run dir's format, so no run dir of this lab holds a
        # config.yaml without it (`rundir.check_format`)
        write_run_manifest(run_dir, cfg, comp.layout, devices)
        rundir.write_config(run_dir, cfg.resolved)
    session = Session(cfg, comp, run_dir, resumed)
    session.population = cell.population
    session.recent.add(processes.kept_rows(lambda: resume.keep_rows(cell.plan, resumed, run_dir, cfg.train.return_window),
                                           run_dir, cfg.train.return_window, resumed.source is not None))
    session.summary = _summary_at_start(cell, devices)
    session.summary.vmap_group = vmap_group
    session.recorders = choose_recorders(cfg) if processes.writes() else []
    _start_recorders(session.recorders, RunContext(run_dir, cfg, session.summary, resumed.start_update,
                                                   session.num_updates, comp.ppo.batch_size, session.recent.mean),
                     session.summary)
    cell.session = session


def _summary_at_start(cell: Cell, devices) -> RunSummary:
    """The summary at start (status running): what the run is, where it resumed from, the
    loggers left out (a store unreachable at start; one that fails mid-run is added then)."""
    cfg, comp, resumed = cell.cfg, cell.comp, cell.resumed
    resumed_any = resumed.source is not None
    return RunSummary(
        experiment=cfg.experiment, env=cfg.env.name, reward=cfg.reward.name, seeds=list(cfg.seeds),
        updates=resumed.start_update, timesteps=resumed.start_update * comp.ppo.batch_size,
        total_updates=comp.trainer.num_updates, wall_s=resumed.prior_wall,
        resumed_from=resumed.start_update if resumed_any else None,
        resume_source=str(resumed.source) if resumed_any and not resumed.own else None,
        checkpoints_damaged=list(resumed.damaged), slurm_job_id=slurm_job_id(), layout=comp.layout.as_dict(),
        devices=[str(d) for d in devices[: comp.layout.num_devices]],
        ppo_effective={"num_minibatches": comp.ppo.num_minibatches, "update_epochs": comp.ppo.update_epochs},
        versions=lab_versions(), loggers_disabled=list(cell.loggers_disabled), action_names=list(comp.action_names))


def _start_recorders(recorders: list, ctx: RunContext, summary: RunSummary) -> None:
    """Start every recorder; one that cannot start (a logger) fails the run, said in summary.json."""
    started = []
    try:
        for recorder in recorders:
            recorder.start(ctx)
            started.append(recorder)
    except Exception as exc:
        summary.end("failed", "logger", f"{type(exc).__name__}: {exc}")
        for recorder in started:
            recorder.finish(summary)
        raise


def _drive(program: Replicas, cells: list[Cell], started: list[Cell], mesh, devices, group: dict | None,
           results: list) -> None:
    """The compiled `program` against the memory of this process's devices, before the first
    step (numbers and knobs, not RESOURCE_EXHAUSTED: a chunk that cannot fit fails every run it
    trains, stop_reason memory), then the host loop."""
    first = started[0]
    gather_s = first.population.compile_gather(program.state) if first.population is not None else 0.0
    # Chunks in flight stop at a population's steps and at evaluations along training.
    program.hold_every = tuple(every for every in (first.cfg.pbt.interval_updates if first.population is not None else 0,
                                                   first.cfg.eval.every_updates if not first.cfg.benchmark else 0) if every)
    hw, ppo = first.cfg.hardware, first.comp.ppo
    try:  # a group's cells share every setting the check reads
        need = check_fits(program.compiled, processes.local(mesh.devices.flat), hw.memory_limit_gb,
                          num_seeds=first.cfg.num_seeds, num_envs=ppo.num_envs, num_minibatches=ppo.num_minibatches,
                          precision=hw.precision, group_cells=len(started) if group is not None else None)
    except ChunkTooLarge as exc:
        for cell in started:
            cell.session.summary.end("failed", "memory", str(exc))
            finish(cell.session, devices)
        return _fail(started, results, exc)
    if group is not None and need is not None:
        group["chunk_memory_mb_per_replica"] = round(need.total * mesh.devices.size / group["replicas"] / 2**20, 2)
    # A group's cells share one evaluation program: same env, network and eval settings (the program key).
    runner = episode_runner(first.cfg, first.comp.env, first.comp.env_params, first.comp.network) \
        if group is not None and not first.cfg.benchmark else None
    seeds = first.cfg.num_seeds
    for position, cell in enumerate(cells):
        if cell not in started:
            continue
        session = cell.session
        session.replicas, session.eval_runner = program, runner
        session.part = slice(position * seeds, (position + 1) * seeds) if group is not None else None
        session.summary.compile_s = round(program.compile_s + gather_s, 3)
        session.summary.vmap_group = None if group is None else dict(group, cell=position)
        session.start_loop()
    drive(program, [c.session for c in started], devices)
    for cell in started:
        results[cell.index] = cell.session.error if cell.session.error is not None else cell.session.summary
    lost = next((c.session.error for c in started if isinstance(c.session.error, Exception)), None)
    if lost is not None:  # several processes: end now, each cell's summary written (a lost peer would hold the shutdown)
        processes.end_after_failure(lost)
    return None
