"""The host loop of one run: chunks, rows to the recorders, checkpoints, stop conditions.

    components (built once by the caller) -> resume or init (run/resume.py) -> compile one chunk ->
    loop { run chunk; pull metrics once; rows to every recorder; checkpoint when due; stop? } ->
    finish: final checkpoint -> evaluation -> summary (run/summary.py) to every recorder

What is recorded where (metrics.csv, summary.json, loggers, progress, health warnings, or
benchmark.json in benchmark mode) is the choice of recorders (run/recorders/), not of this loop.
"""

from __future__ import annotations

import logging
import time
import traceback
from pathlib import Path

import jax

from ppo_lab import rundir
from ppo_lab.config import RunConfig
from ppo_lab.ppo.parallel import make_mesh, replica_sharding, sharded_chunk, start_update_arg
from ppo_lab.run import checkpoint, resume
from ppo_lab.run.build import Components
from ppo_lab.run.evaluate import evaluate_seeds, params_per_seed
from ppo_lab.run.memory import ChunkTooLarge, check_fits
from ppo_lab.run.recorders import RunContext, choose_recorders
from ppo_lab.run.stopping import EarlyStopping, RecentReturns, StopConditions, StopSignals
from ppo_lab.run.summary import end_fields, slurm_job_id, start_summary

log = logging.getLogger(__name__)


def rows_from_chunk(metrics: dict, comp: Components, cfg: RunConfig, first_update: int, count: int, wall_s: float, sps: float) -> list[dict]:
    """One row per (update, seed) from a chunk's stacked metrics ([replica, K, ...])."""
    batch = comp.ppo.batch_size
    replicas = range(cfg.num_seeds) if comp.layout.mode == "seeds" else [0]
    rows = []
    for k in range(count):
        update = first_update + k + 1
        for replica, seed in zip(replicas, cfg.seeds):
            row = {"update": update, "seed": seed, "timesteps": update * batch, "wall_s": round(wall_s, 3), "perf/sps": sps}
            for name, value in metrics.items():
                value = value[replica, k]
                if name == "actions":
                    row.update({f"actions/{a}": float(v) for a, v in zip(comp.action_names, value)})
                else:
                    row[name] = float(value)
            rows.append(row)
    return rows


class Session:
    """The loop's state across chunks: learner state, update counter, timing, windowed return.
    A benchmark session neither checkpoints nor evaluates."""

    def __init__(self, cfg: RunConfig, comp: Components, run_dir: Path, state, resumed: resume.Resumed):
        self.cfg, self.comp, self.run_dir, self.state = cfg, comp, run_dir, state
        self.keeps_results = not cfg.benchmark
        self.update, self.num_updates = resumed.start_update, comp.trainer.num_updates
        self.prior_wall = self.train_wall = resumed.prior_wall
        self.recent = RecentReturns(cfg.train.return_window)
        self.early = EarlyStopping(cfg.train.target_return, cfg.train.patience)
        self.early.restore(resumed.early_stopping)
        self.steps, self.seconds = 0, 0.0  # env steps and loop wall time of this session (for sps)
        self.compiled = None
        self.in_flight = None  # (state, metrics) of the chunk dispatched after `self.state`
        self.eval_runner = None  # evaluate.episode_runner shared with other runs (a vmap group), or None

    def compile(self, mesh) -> float:
        t0 = time.perf_counter()
        self.hypers = self.comp.hypers.sharded(replica_sharding(mesh))
        self.compiled = sharded_chunk(self.comp.trainer.chunk, mesh).lower(self.state, start_update_arg(0), self.hypers).compile()
        compile_s = time.perf_counter() - t0
        log.info("compiled a chunk of %d updates in %.1f s", self.comp.trainer.chunk_updates, compile_s)
        hw, ppo = self.cfg.hardware, self.comp.ppo  # before the first step: numbers and knobs, not RESOURCE_EXHAUSTED
        check_fits(self.compiled, list(mesh.devices.flat), hw.memory_limit_gb, num_seeds=self.cfg.num_seeds,
                   num_envs=ppo.num_envs, num_minibatches=ppo.num_minibatches, precision=hw.precision)
        # Training wall time = prior sessions + this loop from here on (host work included).
        self.loop_start = time.monotonic()
        return compile_s

    def chunk(self) -> list[dict]:
        """Run one chunk, pull its metrics to the host once, return its rows.

        Pipelined: the next chunk is dispatched (JAX runs it asynchronously) before this one's
        metrics are pulled, so the device computes while the host writes rows, checkpoints and
        checks stop conditions. A run that stops drops the chunk in flight: `self.state` is
        always the state after the last chunk whose rows were returned (what a checkpoint
        saves), exactly as without pipelining."""
        t0 = time.perf_counter()
        if self.in_flight is None:
            self.in_flight = self.compiled(self.state, start_update_arg(self.update), self.hypers)
        new_state, metrics = self.in_flight
        count = min(self.comp.trainer.chunk_updates, self.num_updates - self.update)
        next_update = self.update + count
        self.in_flight = self.compiled(new_state, start_update_arg(next_update), self.hypers) if next_update < self.num_updates else None
        metrics = jax.device_get(metrics)
        return self.take(new_state, metrics, count, time.perf_counter() - t0)

    def take(self, new_state, metrics: dict, count: int, elapsed: float) -> list[dict]:
        """Account for a chunk of `count` updates that took `elapsed` s and left `new_state`;
        its rows from `metrics` (host arrays [this run's replicas, K, ...]). A run of a group
        (run/group.py) is handed its replicas' metrics, the group's state held elsewhere."""
        steps = count * self.comp.ppo.batch_size * self.cfg.num_seeds
        # sps: env steps over the loop's wall time, host work between chunks included.
        self.steps, self.seconds = self.steps + steps, time.monotonic() - self.loop_start
        self.train_wall = self.prior_wall + time.monotonic() - self.loop_start
        rows = rows_from_chunk(metrics, self.comp, self.cfg, self.update, count, self.train_wall, steps / elapsed)
        self.state, self.update = new_state, self.update + count
        self.recent.add(rows)
        return rows

    def save_checkpoint(self) -> None:
        if not self.keeps_results or self.update == 0:
            return
        checkpoint.save(self.run_dir / rundir.CHECKPOINTS, self.state, {
            "update": self.update, "timesteps": self.update * self.comp.ppo.batch_size, "wall_s": self.train_wall,
            "layout": self.comp.layout.as_dict(), "seeds": self.cfg.seeds, "early_stopping": self.early.state(),
            "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        })

    def evaluate(self) -> dict:
        if not self.keeps_results:
            return {}
        cfg, comp = self.cfg, self.comp
        log.info("evaluating (%s, %d episodes per seed)", "deterministic" if cfg.eval.deterministic else "sampled", cfg.eval.episodes)
        return evaluate_seeds(cfg, comp.env, comp.env_params, comp.network, params_per_seed(self.state, comp.layout, cfg.num_seeds),
                              run=self.eval_runner)


def run(cfg: RunConfig, comp: Components, run_dir: Path, devices, loggers_disabled: list | None = None) -> dict:
    """Train (or resume) one run in `run_dir` with the components `build` made; returns the summary.
    `loggers_disabled`: loggers left out because their store was unreachable at start (summary.json)."""
    run_dir = Path(run_dir)
    log.info(
        "run %s | env=%s reward=%s | seeds %s | layout %s over %d device(s) | batch %d x %d, %d updates",
        run_dir, cfg.env.name, cfg.reward.name, cfg.seeds, comp.layout.mode, comp.layout.num_devices,
        comp.ppo.num_envs, comp.ppo.num_steps, comp.trainer.num_updates,
    )
    mesh = make_mesh(comp.layout, devices)
    plan = resume.plan(cfg, run_dir)  # a refused resume or config change stops here, nothing written
    state, resumed = resume.restore(plan, comp, cfg, mesh)
    run_dir.mkdir(parents=True, exist_ok=True)
    rundir.write_config(run_dir, cfg.resolved)
    session = Session(cfg, comp, run_dir, state, resumed)
    session.recent.add(resume.keep_rows(plan, resumed, run_dir, cfg.train.return_window))

    summary = start_summary(cfg, comp, devices, resumed, loggers_disabled)
    recorders = choose_recorders(cfg)
    start_recorders(recorders, RunContext(run_dir, cfg, summary, resumed.start_update, session.num_updates, comp.ppo.batch_size,
                                 session.recent.mean), summary)
    try:
        summary["compile_s"] = round(session.compile(mesh), 3)
    except ChunkTooLarge as exc:
        summary.update(status="failed", stop_reason="memory", error=str(exc))
        finish(summary, session, recorders, devices)
        raise

    signals = StopSignals()
    stops = StopConditions(run_dir, cfg.train.duration_min, session.early, signals, elapsed_s=resumed.prior_wall)
    try:
        with signals.installed():
            status, reason = _loop(session, recorders, stops)
            exit_if_requeued(status, signals, session)
            session.save_checkpoint()
            summary.update(status=status, stop_reason=reason, eval=session.evaluate())
    except BaseException as exc:
        record_failure(exc, session, summary, signals)
        finish(summary, session, recorders, devices)
        raise
    return finish(summary, session, recorders, devices)


def start_recorders(recorders: list, ctx: RunContext, summary: dict) -> None:
    """Start every recorder; one that cannot start (a logger) fails the run, said in summary.json."""
    started = []
    try:
        for recorder in recorders:
            recorder.start(ctx)
            started.append(recorder)
    except Exception as exc:
        summary.update(status="failed", stop_reason="logger", error=f"{type(exc).__name__}: {exc}")
        for recorder in started:
            recorder.finish(summary)
        raise


def _loop(session: Session, recorders: list, stops: StopConditions) -> tuple[str, str]:
    """Chunks until the budget is used or a stop condition holds: (status, stop_reason)."""
    every_s = session.cfg.checkpoint_every_min * 60
    last_checkpoint = time.monotonic()
    while session.update < session.num_updates:
        rows = session.chunk()
        for recorder in recorders:
            recorder.log_rows(rows)
        if time.monotonic() - last_checkpoint >= every_s:
            session.save_checkpoint()
            last_checkpoint = time.monotonic()
        stop = stops.check(session.recent.mean())
        if stop is not None and session.update < session.num_updates:
            log.warning("stopping at update %d/%d: %s", session.update, session.num_updates, stop[1])
            return stop
    return "completed", "total_timesteps reached"


def exit_if_requeued(status: str, signals: StopSignals, session: Session) -> None:
    """SLURM sends SIGTERM when it requeues, preempts or cancels a job. Exit without a result
    (the caller checkpoints the last chunk, status stopped): submitit then waits for the
    requeued job, which resumes here, instead of taking this half-run as the job's result.
    No evaluation: KillWait is short."""
    if status == "stopped" and signals.received == "SIGTERM" and slurm_job_id():
        raise SystemExit(f"SIGTERM in SLURM job {slurm_job_id()}: checkpointed at update {session.update}, exiting for requeue")


def record_failure(exc: BaseException, session: Session, summary: dict, signals: StopSignals) -> None:
    """Keep what the last complete chunk reached (a requeued job resumes from it) and say why
    the run ended: stopped (a signal, an exit) or failed (an error, in summary.json)."""
    try:
        session.save_checkpoint()
    except Exception:  # noqa: BLE001 - never hide the original error
        log.exception("could not save a checkpoint after the failure")
    preempted = isinstance(exc, (SystemExit, KeyboardInterrupt))
    summary.update(status="stopped" if preempted else "failed",
                   stop_reason=f"signal {signals.received}" if preempted and signals.received else type(exc).__name__,
                   error=None if preempted else "".join(traceback.format_exception_only(exc)).strip())


def finish(summary: dict, session: Session, recorders: list, devices) -> dict:
    summary.update(end_fields(update=session.update, batch_size=session.comp.ppo.batch_size, wall_s=session.train_wall,
                              steps=session.steps, seconds=session.seconds, final=session.recent.final(session.cfg.seeds),
                              devices=devices))
    for recorder in recorders:
        recorder.finish(summary)
    for name, values in (summary.get("eval") or {}).items():
        log.info("eval/%s per seed: %s", name, ", ".join(f"{v:.3f}" for v in values))
    return summary
