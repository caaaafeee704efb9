"""`train_group(cfgs, run_dirs)`: grid cells that differ only in traced hyperparameters
(`config.traced_keys()`) and `seed`, trained by one compiled program (hydra/launcher=vmap).

    cells: validate, skip completed, build, plan + restore (each as its own run would) ->
    by start update: stack the cells' states (replicas = cells x seeds, cell-major) ->
    compile one chunk for them all (`loop.Replicas`: the group's state lives there), memory
    checked for the whole group -> the host loop of a run, `loop.drive`, over every cell's run
    (each takes its replicas' metrics: rows, recorders; all checkpoint together when due; a
    cell whose stop condition holds finishes) -> each cell finishes as a run

Cell c's seed s is replica c x num_seeds + s: its PRNG keys are those of seed s in a run of
its own (`ppo.parallel.replica_keys`), its hyperparameters its own config's (ppo/hypers.py),
so its numbers are those of its run alone, up to the float rounding of a batched program.
Replicas lie over the devices as a run's seeds do.

On the host every cell is an ordinary run (`loop.Session`): its run dir, config.yaml,
resume plan and config refusal, metrics.csv, recorders, checkpoints, stop conditions,
evaluation and summary.json. Aggregation, `ppo-lab watch`, resume and a relaunch that skips
completed runs see nothing different. The cells checkpoint together, so a killed group
resumes every cell from one update; cells that resume from different updates (one stopped
early, say) train in sub-groups by start update, one program each. A cell that stops early
finishes as its own run would; its replicas go on unseen until the group ends.

Several processes (docs/multihost.md): every process trains the same group over the global
mesh; process 0 alone writes the cells' run dirs and holds their locks. The processes agree on
the cells (`_agreed`: one that fails in any process fails in all) so their collectives match.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import jax
import numpy as np

from ppo_lab.config import RunConfig, shared_program_key, validate
from ppo_lab.errors import ConfigError
from ppo_lab.hardware import process_index_before_start, start_jax
from ppo_lab.ppo.parallel import choose_layout, make_mesh, put_replicas, replica_sharding, to_host
from ppo_lab.run import processes, resume
from ppo_lab.run.build import Components, build
from ppo_lab.run.completed import completed_summary
from ppo_lab.run.divergence import check_relaunch
from ppo_lab.run.entry import USER_ERRORS, resolve
from ppo_lab.run.evaluate import episode_runner
from ppo_lab.run.loop import Replicas, Session, drive
from ppo_lab.run.memory import ChunkTooLarge
from ppo_lab.run.recorders.reachability import check_stores
from ppo_lab.run.start import check_memory, lock_run_dir, start_session

log = logging.getLogger(__name__)


@dataclass
class Cell:
    """One run of the group, from validation to its summary."""
    index: int  # its place in the caller's lists
    cfg: RunConfig
    run_dir: Path
    loggers_disabled: list
    lock: Any = None  # the run dir's lock, held from validation to the end of train_group
    comp: Components | None = None
    restored: Any = None  # its restored state, host arrays [seeds, ...], until the group's program holds it
    resumed: resume.Resumed | None = None
    plan: resume.Plan | None = None
    session: Session | None = None  # from its start: its recorders, summary, its slice of the group's state


def train_group(cfgs: list[Mapping], run_dirs: list[Path]) -> list:
    """Train (or resume, or skip when completed) each run `cfgs[i]` in `run_dirs[i]`, all in
    one program. Returns, in order, each run's summary or the exception that ended it: a bad
    config or a refused resume fails that cell alone, before anything compiles. SystemExit and
    KeyboardInterrupt (a signal, a SLURM requeue) are raised once every cell has checkpointed."""
    cells: list[Cell] = []
    try:
        return _train_cells(cfgs, run_dirs, cells)
    except Exception as exc:
        processes.end_after_failure(exc)  # several processes: end this one now (the others' collectives fail)
        raise
    finally:  # every exit: completed, stopped, failed, a signal
        for cell in cells:
            cell.lock.release()


def _train_cells(cfgs: list[Mapping], run_dirs: list[Path], cells: list) -> list:
    results: list = [None] * len(cfgs)
    for index, (cfg, run_dir) in enumerate(zip(cfgs, run_dirs)):
        try:
            cell = _checked(index, cfg, Path(run_dir), results)
        except USER_ERRORS as exc:
            results[index] = exc
            continue
        if cell is not None:
            cells.append(cell)
    if not cells:
        return results
    keys = {shared_program_key(c.cfg.resolved) for c in cells}
    if len(keys) > 1:  # the launcher groups by this key: a caller that did not is a bug
        raise ValueError(f"train_group: the {len(cells)} runs do not share one program (they differ beyond "
                         f"the traced keys and seed)")
    devices = start_jax(cells[0].cfg.hardware)
    cells = _agreed(cells, results)
    for cell in cells:  # several processes: every process, the same runs (else exit 2 naming the keys)
        processes.check_same_config(cell.cfg.resolved, cell.cfg.hardware.init_timeout_s)
    ready, trainer = [], None
    for cell in cells:
        try:
            trainer = _prepare(cell, devices, trainer)
            ready.append(cell)
        except USER_ERRORS as exc:
            results[cell.index] = exc
    ready = _agreed(ready, results)
    for start in sorted({c.resumed.start_update for c in ready}):
        _train_together([c for c in ready if c.resumed.start_update == start], devices, results)
    return results


def _checked(index: int, cfg: Mapping, run_dir: Path, results: list) -> Cell | None:
    """The cell's validated config (None when it completed before: its summary is its result)."""
    run_cfg = validate(resolve(cfg))
    done = completed_summary(run_dir, run_cfg)  # a relaunched sweep skips finished runs
    if done is not None:
        results[index] = done
        return None
    if run_cfg.hardware.layout == "envs":
        raise ConfigError("hardware.layout", "envs", "auto, seeds or single with hydra/launcher=vmap (a group lays "
                                                     "its replicas out as seeds; hydra/launcher=basic splits one seed's envs)")
    if run_cfg.pbt is not None:
        raise ConfigError("pbt.population", run_cfg.pbt.population, "0 with hydra/launcher=vmap (a population is "
                                                                   "one run: hydra/launcher=basic)")
    disabled = []
    if not run_cfg.benchmark:
        loggers, disabled = check_stores(run_cfg.logger)
        run_cfg = dataclasses.replace(run_cfg, logger=loggers)
    # Each cell's run dir is locked as a run of its own would be (a locked one fails that cell alone).
    # (process 0 of a run of several processes holds it for all of them)
    return Cell(index, run_cfg, run_dir, disabled,
                lock=lock_run_dir(run_dir, run_cfg, process_index_before_start(run_cfg.hardware)))


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


def _prepare(cell: Cell, devices, trainer):
    """Build the cell as a run of its seeds alone (its layout: seeds, whatever the device
    count), plan its resume (the config refusal) and restore its state to the host. Every
    cell uses the first cell's `trainer` (the same functions: its init compiles once), with
    its own hyperparameters. Returns the trainer."""
    hw = dataclasses.replace(cell.cfg.hardware, layout="seeds")
    cell.comp = build(dataclasses.replace(cell.cfg, hardware=hw), len(devices))
    if trainer is not None:
        cell.comp = dataclasses.replace(cell.comp, trainer=trainer)
    cell.plan = resume.plan(cell.cfg, cell.run_dir)
    check_relaunch(cell.plan, cell.run_dir)  # a diverged cell relaunched unchanged fails alone
    mesh = make_mesh(cell.comp.layout, devices)
    state, cell.resumed = resume.restore(cell.plan, cell.comp, cell.cfg, mesh)
    cell.restored = to_host(state)  # several processes: a collective, every cell in every process alike
    return cell.comp.trainer


def _stack(trees: list):
    return jax.tree.map(lambda *xs: np.concatenate([np.asarray(x) for x in xs]), *trees)


def _train_together(cells: list[Cell], devices, results: list) -> None:
    """One program for `cells` (all at the same start update): compile, then the host loop of
    a run (`loop.drive`) over every cell's run, each finished as a run."""
    first = cells[0]
    seeds = first.cfg.num_seeds
    replicas = len(cells) * seeds
    layout = choose_layout(replicas, first.comp.ppo, len(devices), "seeds")
    try:
        processes.check_layout(layout, len(devices), "cells x num_seeds")  # several processes: every one holds replicas
    except ConfigError as exc:
        for cell in cells:
            results[cell.index] = exc
        return
    mesh = make_mesh(layout, devices)
    sharding = replica_sharding(mesh)
    state = put_replicas(_stack([c.restored for c in cells]), sharding)
    hypers = _stack([c.comp.hypers for c in cells]).sharded(sharding)
    for cell in cells:
        cell.restored = None  # from now on the group's program holds the state
    group = {"cells": len(cells), "replicas": replicas, "layout": layout.as_dict()}
    log.info("vmap group: %d cells x %d seeds = %d replicas over %d device(s), from update %d", len(cells), seeds,
             replicas, layout.num_devices, first.resumed.start_update)
    started = []
    for position, cell in enumerate(cells):
        try:  # each cell set up as a run of its own (process 0 alone writes its run dir)
            cell.session = start_session(cell.cfg, cell.comp, cell.run_dir, devices, cell.plan, cell.resumed,
                                         loggers_disabled=cell.loggers_disabled, vmap_group=dict(group, cell=position))
            started.append(cell)
        except Exception as exc:  # noqa: BLE001 - a logger that cannot start fails its cell alone
            results[cell.index] = exc
    started = _agreed(started, results)  # a logger starts in process 0 alone
    if not started:
        return
    program = Replicas(first.comp.trainer, mesh, state, hypers, first.resumed.start_update,
                       first.session.num_updates, first.comp.trainer.chunk_updates)
    try:  # the whole group's memory, before the first step; a group that cannot fit fails every cell
        need = check_memory(program, [c.session for c in started], mesh, devices, group=True)
    except ChunkTooLarge as exc:
        for cell in started:
            results[cell.index] = exc
        return
    if need is not None:
        group["chunk_memory_mb_per_replica"] = round(need.total * layout.num_devices / replicas / 2**20, 2)
    # One evaluation program for every cell: same env, network and eval settings (the program key).
    runner = None if first.cfg.benchmark else episode_runner(first.cfg, first.comp.env, first.comp.env_params,
                                                              first.comp.network)
    for position, cell in enumerate(started):
        cell.session.replicas, cell.session.part = program, slice(position * seeds, (position + 1) * seeds)
        cell.session.eval_runner = runner
        cell.session.summary.compile_s = round(program.compile_s, 3)
        cell.session.summary.vmap_group = dict(group, cell=cell.session.summary.vmap_group["cell"])
        cell.session.start_loop()
    drive(program, [c.session for c in started], devices, reraise=False)
    for cell in started:
        results[cell.index] = cell.session.error if cell.session.error is not None else cell.session.summary
    lost = next((c.session.error for c in started if isinstance(c.session.error, Exception)), None)
    if lost is not None:  # several processes: end now, each cell's summary written (a lost peer would hold the shutdown)
        processes.end_after_failure(lost)
