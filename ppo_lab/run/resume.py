"""Resume: skip a completed run, find the source, check its config, restore the state, keep
the metric rows.

    completed_summary(...)  a relaunch skips a run that completed with the same resolved config:
                            a sweep's finished jobs, and a single run launched again into its
                            finished run dir (said, exit 0, in seconds: nothing is built or
                            compiled); one whose config differs goes on as below (a change of
                            bookkeeping alone, evaluation or loggers, resumes from the final
                            checkpoint and evaluates again)
    plan(cfg, run_dir)      this run's own checkpoint first (a requeued job), else resume=PATH;
                            either of another format refused (`rundir.check_format`); the
                            config compared key by key (jax-free, before anything is written)
    restore(plan, ...)      the learner state: fresh, or the newest checkpoint that verifies loaded
                            into a template (damaged ones moved to checkpoints/damaged/; none
                            verifies: exit 2, or checkpoint.if_all_damaged=start_over)
    keep_rows(plan, ...)    metrics.csv and evals.csv cut back to (or copied up to) the
                            checkpoint's update, and the allowed config changes appended to
                            config_history.jsonl

A run directory holds one config: a relaunch (or resume=OTHER_RUN) whose config differs in a
key that changes what is trained is refused, naming every such key, unless
allow_config_change=true; then the change is recorded in config_history.jsonl.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import OmegaConf

from ppo_lab import rundir
from ppo_lab.config import ALLOWED, FIXED, FREE, RunConfig, field_at
from ppo_lab.ppo.parallel import init_replicas, put_replicas, replica_sharding, replica_template
from ppo_lab.run import checkpoint, processes
from ppo_lab.rundir.checkpoints import NoValidCheckpoint, none_valid_note, remember_none_valid, set_aside_attempt
from ppo_lab.rundir.config_file import UNSET
from ppo_lab.rundir.run_summary import RunSummary
from ppo_lab.resolvers import scaled as _scaled  # noqa: F401 - registers ${ppo_lab.scaled:...} for resolving

log = logging.getLogger(__name__)

ALLOW_KEY = "allow_config_change"
# How each key may change on a relaunch is the `resume` mark on its field (`on_resume`):
# FIXED (its change makes a checkpoint unusable: refused even with allow_config_change=true),
# FREE (changes nothing trained) or ALLOWED (with allow_config_change=true, recorded).


def on_resume(dotted: str) -> str:
    """How a dotted key may change on a relaunch: the `resume` mark of the most specific field
    (or section) on its way that has one, else ALLOWED."""
    marks = [f.metadata["resume"] for f in field_at(dotted)[2] if "resume" in f.metadata]
    return marks[-1] if marks else ALLOWED


def as_saved(cfg: RunConfig) -> dict:
    """The run's resolved config as config.yaml holds it."""
    return OmegaConf.to_container(OmegaConf.create(dict(cfg.resolved)), resolve=True)


# What differs between the processes of one run (process 0 saved its own), and between two
# launches of the same run: where they meet (a SLURM job's port follows its job id) and how
# long they wait. None of it changes what is trained.
MEETING_KEYS = ("process_id", "coordinator_address", "init_timeout_s")
# Keys that say how a launch starts, not what a run is: a completed run relaunched without
# them (or with them) is the same run.
LAUNCH_KEYS = (ALLOW_KEY, "resume")


def _same_run(config: dict) -> dict:
    """A config less its LAUNCH_KEYS, the MEETING_KEYS of its `hardware` and where compiled
    programs are cached."""
    hardware = {k: v for k, v in (config.get("hardware") or {}).items()
                if k not in MEETING_KEYS and k != "compilation_cache_dir"}
    return {**{k: v for k, v in config.items() if k not in LAUNCH_KEYS}, "hardware": hardware}


def in_multirun() -> bool:
    try:
        return HydraConfig.get().mode == RunMode.MULTIRUN
    except ValueError:  # not inside a Hydra app: a run called in-process, as launch.py runs one
        return False


def completed_summary(run_dir: Path, cfg: RunConfig) -> RunSummary | None:
    """The summary of `run_dir` if it already completed with this exact resolved config (a
    relaunch), else None (train, or resume from a checkpoint). A run dir of another format is
    refused (`rundir.check_format`), completed or not."""
    rundir.check_format(run_dir)
    if cfg.benchmark and not in_multirun():  # a measurement is taken afresh each launch
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
    if _same_run(saved) != _same_run(as_saved(cfg)):
        log.warning("%s completed before with a different config: running it again in place", run_dir)
        return None
    log.info("SKIPPING %s: already completed with the same config (updates %s)", run_dir, summary.updates)
    if in_multirun():
        print(f"skipped (already completed): {run_dir}", flush=True)
    else:
        print(f"{run_dir} is complete ({summary.stop_reason or 'completed'}, {summary.updates} updates "
              f"per seed): nothing to train. Its results are in {rundir.SUMMARY}; to train it further, raise "
              f"ppo.total_timesteps and add allow_config_change=true.", flush=True)
    summary.skipped = True
    return summary


class ResumeError(RuntimeError):
    """A run cannot resume (no checkpoint, a config or layout that does not match)."""


def config_changes(saved: dict, now: dict) -> dict[str, tuple]:
    """Every key (dotted) that changes training and differs: key -> (saved, now)."""
    a, b = rundir.dotted_keys(saved), rundir.dotted_keys(now)
    return {k: (a.get(k, UNSET), b.get(k, UNSET)) for k in sorted(set(a) | set(b))
            if on_resume(k) != FREE and a.get(k, UNSET) != b.get(k, UNSET)}


@dataclass
class Plan:
    """Where this run starts from, decided before anything is written."""
    source: Path | None  # a run dir with a checkpoint to resume from, or None (fresh start)
    own: bool  # the source is this run's own dir (a relaunch or requeue)
    changes: dict = field(default_factory=dict)  # allowed config changes: key -> (before, after)


def check_config(saved: dict, now: dict, where: str, allow: bool) -> dict[str, tuple]:
    """The config changes between `saved` and `now`, refused (ResumeError) unless allowed."""
    changes = config_changes(saved, now)
    if not changes:
        return {}
    fixed = [k for k in changes if on_resume(k) == FIXED]
    if allow and not fixed:
        return changes
    lines = "\n".join(f"  {k}: {old!r} -> {new!r}" for k, (old, new) in changes.items())
    if fixed:
        hint = (f"{', '.join(fixed)} cannot change within a run (the checkpoint's shapes and meaning depend on them): "
                f"use a new run directory, or the same values.")
    else:
        hint = (f"Use a new run directory or the same values; to go on under the new config on purpose, add "
                f"{ALLOW_KEY}=true (the change is recorded in {rundir.CONFIG_HISTORY}).")
    raise ResumeError(f"{where} has another config; {len(changes)} key(s) that change training differ:\n{lines}\n{hint}")


def plan(cfg, run_dir: Path) -> Plan:
    """Find the source and check its config against this run's. Writes nothing, except
    with checkpoint.if_all_damaged=start_over after a launch that found no checkpoint verified
    (the earlier attempt's files are then moved aside, see `start_over`)."""
    run_dir = Path(run_dir)
    rundir.check_format(run_dir)  # a run dir of another format is refused, its files untouched
    if cfg.benchmark:
        return Plan(None, False)  # a measurement: always from scratch, never compared
    none_valid = none_valid_note(run_dir / rundir.CHECKPOINTS)
    if none_valid is not None and not rundir.list_checkpoints(run_dir / rundir.CHECKPOINTS):
        # An earlier launch set every checkpoint aside: starting fresh would silently drop its rows.
        if cfg.checkpoint.if_all_damaged != "start_over":
            raise NoValidCheckpoint(none_valid)
        start_over(run_dir, none_valid)
    if rundir.list_checkpoints(run_dir / rundir.CHECKPOINTS):
        source, own = run_dir, True
    elif cfg.resume:
        source, own = Path(cfg.resume), False
        rundir.check_format(source)
        if not rundir.list_checkpoints(source / rundir.CHECKPOINTS):
            raise ResumeError(f"resume={cfg.resume}: no complete checkpoint in {source / rundir.CHECKPOINTS}")
    else:
        source, own = None, False
    # Compare with the config the kept rows ran under: the source's, else this dir's own.
    reference = source if source is not None else run_dir
    if not (reference / rundir.CONFIG).exists():
        return Plan(source, own)

    where = f"the run directory {reference}" if reference == run_dir else f"resume={reference}"
    changes = check_config(rundir.read_config(reference), as_saved(cfg), where, cfg.allow_config_change)
    return Plan(source, own, changes)


@dataclass
class Resumed:
    """What the host loop takes over from the checkpoint (zeros for a fresh start)."""
    start_update: int = 0
    prior_wall: float = 0.0
    early_stopping: dict | None = None
    source: Path | None = None
    own: bool = False
    damaged: list = field(default_factory=list)  # "ckpt_<N>.json: why" of each checkpoint skipped as damaged
    pbt: dict | None = None  # a population's state at the checkpoint (run/population.py), or None


def start_over(run_dir: Path, why: str) -> None:
    """checkpoint.if_all_damaged=start_over: train from scratch in this run directory; the
    earlier attempt's files are kept in checkpoints/damaged/ (`set_aside_attempt`)."""
    folder = set_aside_attempt(run_dir, why)
    log.warning("checkpoint.if_all_damaged=start_over: no checkpoint of %s verifies; starting over from update 0 "
                "(the earlier attempt's files are in %s)", run_dir, folder)


def fresh_state(comp, cfg, mesh):
    """The replicas' state at update 0, from programs that take the update count and the env's
    params as arguments (`Trainer.init`), as the chunk does."""
    return init_replicas(comp.trainer.init, comp.layout, cfg.seeds, mesh, *comp.init_arguments())


def restore(p: Plan, comp, cfg, mesh):
    """(state, Resumed): a fresh init, or the source's latest checkpoint on this mesh."""
    if p.source is None:
        return fresh_state(comp, cfg, mesh), Resumed()
    template = replica_template(comp.trainer.init, comp.layout, cfg.seeds, mesh, *comp.init_arguments())
    try:  # the newest checkpoint that verifies; damaged ones of this run's own dir are moved aside
        # process 0 alone moves damaged ones aside (one writer per run dir)
        loaded = checkpoint.load_verified(p.source / rundir.CHECKPOINTS, template, set_aside_damaged=p.own and processes.writes())
    except NoValidCheckpoint as exc:
        if not p.own:
            raise
        if processes.writes():  # one writer per run dir; the others decide alike
            # Remembered: a relaunch must not take the now empty checkpoints/ for a fresh run.
            remember_none_valid(p.source / rundir.CHECKPOINTS, str(exc))
        if cfg.checkpoint.if_all_damaged != "start_over":
            raise
        if processes.writes():
            start_over(p.source, str(exc))
        return fresh_state(comp, cfg, mesh), Resumed()
    host_state, meta = loaded.state, loaded.meta
    saved_layout = meta.get("layout") or {}
    # Seed layouts do not depend on the device count; a split of one seed's envs does.
    if "envs" in (saved_layout.get("mode"), comp.layout.mode) and saved_layout != comp.layout.as_dict():
        raise ResumeError(f"cannot resume from {p.source}: saved with device layout {saved_layout}, "
                          f"this run has {comp.layout.as_dict()}")
    state = put_replicas(host_state, replica_sharding(mesh))
    resumed = Resumed(int(meta["update"]), float(meta.get("wall_s", 0.0)), meta.get("early_stopping"), p.source, p.own,
                      [str(exc) for exc in loaded.damaged], meta.get("pbt"))
    return state, resumed


def keep_rows(p: Plan, resumed: Resumed, run_dir: Path, window: int) -> list[dict]:
    """Make metrics.csv, evals.csv and config_history.jsonl hold what ran up to the start
    update; returns the last `window` rows per seed (for the windowed return and `final`)."""
    metrics = run_dir / rundir.METRICS
    history = []
    rundir.keep_evals(run_dir, resumed.start_update, resumed.source)
    if resumed.source is None:
        rundir.MetricsCSV(metrics).truncate_after(0)  # rows of an attempt that never checkpointed
    elif resumed.own:
        dropped = rundir.MetricsCSV(metrics).truncate_after(resumed.start_update)
        log.info("RESUMING from this run's checkpoint at update %d (dropped %d metric rows written after it)",
                 resumed.start_update, dropped)
    else:
        rundir.copy_rows_until(resumed.source / rundir.METRICS, metrics, resumed.start_update)
        history = [e for e in rundir.read_config_history(resumed.source) if e["from_update"] <= resumed.start_update]
        log.info("RESUMING from %s at update %d", resumed.source, resumed.start_update)
    if p.changes:
        history.append({
            "from_update": resumed.start_update, "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "source": str(resumed.source or run_dir), "changes": {k: list(v) for k, v in p.changes.items()},
        })
        log.warning("%s=true: from update %d on, this run trains with %s", ALLOW_KEY, resumed.start_update,
                    ", ".join(f"{k}={new!r} (was {old!r})" for k, (old, new) in p.changes.items()))
    if history:
        rundir.append_config_history(run_dir, history)
    return rundir.read_recent_rows(metrics, window) if resumed.source is not None else []

