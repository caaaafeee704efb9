"""`train_group(cfgs, run_dirs)`: grid cells that differ only in traced hyperparameters
(`config.TRACED_PPO_KEYS`) and `seed`, trained by one compiled program (hydra/launcher=vmap).

    cells: validate, skip completed, build, plan + restore (each as its own run would) ->
    by start update: stack the cells' states (replicas = cells x seeds, cell-major) ->
    compile one chunk for them all, memory checked for the whole group ->
    loop { run chunk; each cell takes its replicas' metrics: rows, recorders; checkpoint all
    cells together when due; a cell whose stop condition holds finishes } -> each cell finishes

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
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import jax
import numpy as np

from ppo_lab import rundir
from ppo_lab.config import RunConfig, shared_program_key, validate
from ppo_lab.errors import ConfigError
from ppo_lab.hardware import start_jax
from ppo_lab.ppo.parallel import choose_layout, make_mesh, replica_sharding, sharded_chunk, start_update_arg
from ppo_lab.run import resume
from ppo_lab.run.build import Components, build
from ppo_lab.run.completed import completed_summary
from ppo_lab.run.entry import USER_ERRORS, resolve
from ppo_lab.run.evaluate import episode_runner
from ppo_lab.run.loop import Session, exit_if_requeued, finish, record_failure, start_recorders
from ppo_lab.run.memory import ChunkTooLarge, check_fits
from ppo_lab.run.recorders import RunContext, choose_recorders
from ppo_lab.run.recorders.reachability import check_stores
from ppo_lab.run.stopping import StopConditions, StopSignals
from ppo_lab.run.summary import start_summary

log = logging.getLogger(__name__)


@dataclass
class Cell:
    """One run of the group, from validation to its summary."""
    index: int  # its place in the caller's lists
    cfg: RunConfig
    run_dir: Path
    loggers_disabled: list
    comp: Components | None = None
    state: Any = None  # host arrays [seeds, ...] until the group's state is stacked
    resumed: resume.Resumed | None = None
    plan: resume.Plan | None = None
    session: Session | None = None
    summary: dict = field(default_factory=dict)
    recorders: list = field(default_factory=list)
    stops: StopConditions | None = None


def train_group(cfgs: list[Mapping], run_dirs: list[Path]) -> list:
    """Train (or resume, or skip when completed) each run `cfgs[i]` in `run_dirs[i]`, all in
    one program. Returns, in order, each run's summary or the exception that ended it: a bad
    config or a refused resume fails that cell alone, before anything compiles. SystemExit and
    KeyboardInterrupt (a signal, a SLURM requeue) are raised once every cell has checkpointed."""
    results: list = [None] * len(cfgs)
    cells = []
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
    ready, trainer = [], None
    for cell in cells:
        try:
            trainer = _prepare(cell, devices, trainer)
            ready.append(cell)
        except USER_ERRORS as exc:
            results[cell.index] = exc
    for start in sorted({c.resumed.start_update for c in ready}):
        _train_together([c for c in ready if c.resumed.start_update == start], devices, results)
    return results


def _checked(index: int, cfg: Mapping, run_dir: Path, results: list) -> Cell | None:
    """The cell's validated config (None when it completed before: its summary is its result)."""
    resolved = resolve(cfg)
    done = completed_summary(run_dir, resolved)  # a relaunched sweep skips finished runs
    if done is not None:
        results[index] = done
        return None
    run_cfg = validate(resolved)
    if run_cfg.hardware.layout == "envs":
        raise ConfigError("hardware.layout", "envs", "auto, seeds or single with hydra/launcher=vmap (a group lays "
                                                     "its replicas out as seeds; hydra/launcher=basic splits one seed's envs)")
    disabled = []
    if not run_cfg.benchmark:
        loggers, disabled = check_stores(run_cfg.logger)
        run_cfg = dataclasses.replace(run_cfg, logger=loggers)
    return Cell(index, run_cfg, run_dir, disabled)


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
    mesh = make_mesh(cell.comp.layout, devices)
    state, cell.resumed = resume.restore(cell.plan, cell.comp, cell.cfg, mesh)
    cell.state = jax.device_get(state)
    return cell.comp.trainer


def _stack(trees: list):
    return jax.tree.map(lambda *xs: np.concatenate([np.asarray(x) for x in xs]), *trees)


def _train_together(cells: list[Cell], devices, results: list) -> None:
    """One program for `cells` (all at the same start update): compile, loop, finish each."""
    first = cells[0]
    seeds = first.cfg.num_seeds
    replicas = len(cells) * seeds
    layout = choose_layout(replicas, first.comp.ppo, len(devices), "seeds")
    mesh = make_mesh(layout, devices)
    sharding = replica_sharding(mesh)
    state = jax.device_put(_stack([c.state for c in cells]), sharding)
    hypers = _stack([c.comp.hypers for c in cells]).sharded(sharding)
    group = {"cells": len(cells), "replicas": replicas, "layout": layout.as_dict()}
    log.info("vmap group: %d cells x %d seeds = %d replicas over %d device(s), from update %d", len(cells), seeds,
             replicas, layout.num_devices, first.resumed.start_update)

    started = []
    for position, cell in enumerate(cells):
        try:
            _start(cell, position, group, devices)
            started.append(cell)
        except Exception as exc:  # noqa: BLE001 - a logger that cannot start fails its cell alone
            results[cell.index] = exc
    cells = started
    if not cells:
        return

    t0 = time.perf_counter()
    compiled = sharded_chunk(first.comp.trainer.chunk, mesh).lower(state, start_update_arg(0), hypers).compile()
    compile_s = time.perf_counter() - t0
    log.info("compiled one chunk of %d updates for %d replicas in %.1f s", first.comp.trainer.chunk_updates, replicas,
             compile_s)
    hw, ppo = first.cfg.hardware, first.comp.ppo
    try:
        need = check_fits(compiled, list(mesh.devices.flat), hw.memory_limit_gb, num_seeds=seeds, num_envs=ppo.num_envs,
                          num_minibatches=ppo.num_minibatches, precision=hw.precision, group_cells=len(cells))
    except ChunkTooLarge as exc:
        for cell in cells:
            cell.summary.update(status="failed", stop_reason="memory", error=str(exc))
            finish(cell.summary, cell.session, cell.recorders, devices)
            results[cell.index] = exc
        return
    if need is not None:
        group["chunk_memory_mb_per_replica"] = round(need.total * layout.num_devices / replicas / 2**20, 2)
    # One evaluation program for every cell: same env, network and eval settings (the program key).
    runner = None if first.cfg.benchmark else episode_runner(first.cfg, first.comp.env, first.comp.env_params,
                                                              first.comp.network)
    for cell in cells:
        cell.session.eval_runner = runner
        cell.summary["compile_s"] = round(compile_s, 3)
        cell.summary["vmap_group"] = dict(group, cell=cell.summary["vmap_group"]["cell"])
        cell.session.loop_start = time.monotonic()
    _loop(cells, compiled, state, hypers, seeds, devices, results)


def _start(cell: Cell, position: int, group: dict, devices) -> None:
    """What `loop.run` does for a run before compiling: config.yaml, kept rows, recorders."""
    cfg, comp, resumed = cell.cfg, cell.comp, cell.resumed
    cell.run_dir.mkdir(parents=True, exist_ok=True)
    rundir.write_config(cell.run_dir, cfg.resolved)
    cell.session = Session(cfg, comp, cell.run_dir, None, resumed)
    cell.session.recent.add(resume.keep_rows(cell.plan, resumed, cell.run_dir, cfg.train.return_window))
    cell.summary = start_summary(cfg, comp, devices, resumed, cell.loggers_disabled)
    cell.summary["vmap_group"] = dict(group, cell=position)
    cell.recorders = choose_recorders(cfg)
    start_recorders(cell.recorders, RunContext(cell.run_dir, cfg, cell.summary, resumed.start_update,
                                               cell.session.num_updates, comp.ppo.batch_size,
                                               cell.session.recent.mean), cell.summary)
    cell.state = None  # from now on a slice of the group's state


def _loop(cells: list[Cell], compiled, state, hypers, seeds: int, devices, results: list) -> None:
    """Chunks until the budget is used or every cell has stopped; each cell finished as a run."""
    first = cells[0]
    num_updates, chunk_updates = first.session.num_updates, first.comp.trainer.chunk_updates
    update = first.session.update
    mine = {id(c): slice(p * seeds, (p + 1) * seeds) for p, c in enumerate(cells)}
    current = {"state": state}

    def sync(cell: Cell) -> None:  # the cell's replicas of the group's state (for a checkpoint, evaluation)
        part = mine[id(cell)]
        cell.session.state = jax.tree.map(lambda x: x[part], current["state"])

    signals = StopSignals()
    for cell in cells:
        cell.stops = StopConditions(cell.run_dir, cell.cfg.train.duration_min, cell.session.early, signals,
                                    elapsed_s=cell.resumed.prior_wall)
    active = list(cells)
    every_s = first.cfg.checkpoint_every_min * 60
    last_checkpoint = time.monotonic()
    try:
        with signals.installed():
            in_flight = compiled(state, start_update_arg(update), hypers)
            while active and update < num_updates:
                t0 = time.perf_counter()
                new_state, metrics = in_flight
                count = min(chunk_updates, num_updates - update)
                following = update + count
                # Dispatched before this chunk's metrics are pulled: the device works while the host writes.
                in_flight = compiled(new_state, start_update_arg(following), hypers) if following < num_updates else None
                metrics = jax.device_get(metrics)
                elapsed = time.perf_counter() - t0
                current["state"], update = new_state, following
                for cell in active:
                    part = mine[id(cell)]
                    rows = cell.session.take(None, {k: v[part] for k, v in metrics.items()}, count, elapsed)
                    for recorder in cell.recorders:
                        recorder.log_rows(rows)
                if time.monotonic() - last_checkpoint >= every_s:
                    for cell in active:  # together: a killed group resumes every cell from one update
                        sync(cell)
                        cell.session.save_checkpoint()
                    last_checkpoint = time.monotonic()
                for cell in list(active):
                    stop = cell.stops.check(cell.session.recent.mean())
                    if stop is not None and update < num_updates:
                        log.warning("%s: stopping at update %d/%d: %s", cell.run_dir, update, num_updates, stop[1])
                        exit_if_requeued(stop[0], signals, cell.session)
                        sync(cell)
                        results[cell.index] = _conclude(cell, *stop, devices)
                        active.remove(cell)
            for cell in list(active):
                sync(cell)
                results[cell.index] = _conclude(cell, "completed", "total_timesteps reached", devices)
                active.remove(cell)
    except BaseException as exc:
        for cell in active:
            sync(cell)
            record_failure(exc, cell.session, cell.summary, signals)
            finish(cell.summary, cell.session, cell.recorders, devices)
            results[cell.index] = exc
        if not isinstance(exc, Exception):
            raise  # a signal or a requeue: every cell has checkpointed and said so


def _conclude(cell: Cell, status: str, reason: str, devices) -> dict:
    """The end of one cell's run: its last checkpoint, evaluation and summary."""
    cell.session.save_checkpoint()
    cell.summary.update(status=status, stop_reason=reason, eval=cell.session.evaluate())
    return finish(cell.summary, cell.session, cell.recorders, devices)
