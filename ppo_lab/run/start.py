"""The host side of a run's start, for every cell of a launch (run/entry.py): a run alone, a
population, each cell of a vmap group.

    start_session    before compiling: config.yaml, manifest.json, the `loop.Session` with the
                     rows a resumed run keeps, the summary at start, the recorders started
    check_memory     after compiling, before the first step: the chunk against the devices'
                     memory; a chunk that cannot fit ends every run it trains (failed: memory)

In a run of several processes process 0 alone writes the run dir (config.yaml, manifest.json,
the recorders' files).
"""

from __future__ import annotations

from pathlib import Path

from ppo_lab import rundir
from ppo_lab.config import RunConfig
from ppo_lab.run import processes, resume
from ppo_lab.run.build import Components
from ppo_lab.run.loop import Replicas, Session, finish
from ppo_lab.run.manifest import write_run_manifest
from ppo_lab.run.memory import ChunkMemory, ChunkTooLarge, check_fits
from ppo_lab.run.population import Population
from ppo_lab.run.recorders import RunContext, choose_recorders
from ppo_lab.rundir.run_summary import RunSummary, lab_versions, slurm_job_id


def start_session(cfg: RunConfig, comp: Components, run_dir: Path, devices, plan: resume.Plan, resumed: resume.Resumed, *,
                  loggers_disabled: list | None = None, population: Population | None = None,
                  vmap_group: dict | None = None) -> Session:
    """Set one run up on the host before its program compiles: config.yaml and manifest.json,
    its `Session` (the rows a resumed run keeps, in its windowed return), summary.json's
    fields at start and its recorders started. `population`: a population run's members;
    `vmap_group`: the summary's `vmap_group` of a group's cell (in it before a recorder starts).
    A recorder that cannot start (a logger) raises, its failure in the summary."""
    run_dir = Path(run_dir)
    if processes.writes():
        run_dir.mkdir(parents=True, exist_ok=True)
    # manifest.json first: it says the run dir's format, so no run dir of this lab holds a
    # config.yaml without it (`rundir.check_format`)
    write_run_manifest(run_dir, cfg, comp.layout.as_dict(), devices[: comp.layout.num_devices])
    if processes.writes():
        rundir.write_config(run_dir, cfg.resolved)
    session = Session(cfg, comp, run_dir, resumed)
    session.population = population
    session.recent.add(processes.kept_rows(lambda: resume.keep_rows(plan, resumed, run_dir, cfg.train.return_window),
                                           run_dir, cfg.train.return_window, resumed.source is not None))
    session.summary = summary_at_start(cfg, comp, devices, resumed, loggers_disabled)
    session.summary.vmap_group = dict(vmap_group) if vmap_group is not None else None
    session.recorders = choose_recorders(cfg) if processes.writes() else []
    start_recorders(session.recorders, RunContext(run_dir, cfg, session.summary, resumed.start_update,
                                                  session.num_updates, comp.ppo.batch_size, session.recent.mean),
                    session.summary)
    return session


def summary_at_start(cfg: RunConfig, comp: Components, devices, resumed: resume.Resumed,
                     loggers_disabled: list | None) -> RunSummary:
    """The summary at start (status running): what the run is, where it resumed from, the
    loggers left out (a store unreachable at start; one that fails mid-run is added then)."""
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
        versions=lab_versions(), loggers_disabled=list(loggers_disabled or []), action_names=list(comp.action_names))


def start_recorders(recorders: list, ctx: RunContext, summary: RunSummary) -> None:
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


def check_memory(program: Replicas, sessions: list[Session], mesh, devices, *, group: bool = False) -> ChunkMemory | None:
    """The compiled chunk of `program` against the memory of this process's devices, before the
    first step: numbers and knobs, not RESOURCE_EXHAUSTED. `sessions`: the runs it trains (one,
    or with `group` a vmap group's cells, which share every setting the check reads). A chunk that cannot fit
    finishes each run as failed (stop_reason memory) and raises ChunkTooLarge; else its memory
    (None where the backend has no analysis)."""
    first = sessions[0]
    hw, ppo = first.cfg.hardware, first.comp.ppo
    try:
        return check_fits(program.compiled, processes.local(mesh.devices.flat), hw.memory_limit_gb,
                          num_seeds=first.cfg.num_seeds, num_envs=ppo.num_envs, num_minibatches=ppo.num_minibatches,
                          precision=hw.precision, group_cells=len(sessions) if group else None)
    except ChunkTooLarge as exc:
        for session in sessions:
            session.summary.end("failed", "memory", str(exc))
            finish(session, devices)
        raise
