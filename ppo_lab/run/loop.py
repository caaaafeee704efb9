"""The host loop of one run: chunks, rows to the recorders, checkpoints, stop conditions.

    components (built once by the caller) -> resume or init (run/resume.py) -> compile one chunk ->
    [evaluation along training at update 0] ->
    loop { run chunk; pull metrics once; rows to every recorder; evaluation along training when
           due (run/along.py); checkpoint when due; stop? } ->
    finish: final checkpoint -> evaluation -> summary (`rundir.RunSummary`) to every recorder

What is recorded where (metrics.csv, summary.json, loggers, progress, health warnings, or
benchmark.json in benchmark mode) is the choice of recorders (run/recorders/), not of this loop.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from pathlib import Path

import jax

from ppo_lab import rundir
from ppo_lab.config import RunConfig
from ppo_lab.ppo.parallel import put_replicas, replicated, sharded_chunk, start_update_arg, to_host
from ppo_lab.ppo.train import env_params_argument
from ppo_lab.run import checkpoint, divergence, failure, processes, resume
from ppo_lab.run.along import AlongTraining
from ppo_lab.run.build import Components
from ppo_lab.run.divergence import Divergence
from ppo_lab.run.evaluate import evaluate_seeds, params_per_seed, unevaluated
from ppo_lab.run.population import Population
from ppo_lab.run.recorders.console import ProgressRecorder, print_closing_summary
from ppo_lab.run.stopping import EarlyStopping, RecentReturns, StopConditions, StopSignals
from ppo_lab.run.memory import device_memory_mb, peak_host_memory_mb
from ppo_lab.rundir.run_summary import RunSummary, slurm_job_id

log = logging.getLogger(__name__)


def rows_from_chunk(metrics: dict, comp: Components, cfg: RunConfig, first_update: int, count: int, wall_s: float, sps: float) -> list[dict]:
    """One row per (update, seed) from a chunk's stacked metrics ([replica, K, ...])."""
    batch = comp.ppo.batch_size
    replicas = comp.layout.seed_replicas(cfg.num_seeds)
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


def rounded_budget(cfg: RunConfig, comp: Components) -> str:
    """Said once, in the run's first line: the steps actually trained when ppo.total_timesteps
    is not a whole number of batches (training runs whole updates: it is rounded down)."""
    asked, batch = cfg.ppo.total_timesteps, comp.ppo.batch_size
    steps = comp.trainer.num_updates * batch
    if steps == asked:
        return ""
    return f" = {steps:,} steps per seed (ppo.total_timesteps={asked:,} rounded down to whole batches of {batch:,})"


class LoweredChunk:
    """The trainer's chunk traced and lowered for `state` and `hypers` on `mesh`, not compiled
    yet: what it logs is known (`metric_names`) before XLA spends seconds on it and before the
    run writes anything, so a config that names a metric the run does not log is refused first.
    The run's update count is an argument of the program (`Trainer.chunk`), like the first
    update, and so are the env's params when they are data (`env_params_argument`)."""

    def __init__(self, trainer, mesh, state, hypers):
        t0 = time.perf_counter()
        # several processes: the update counters as global arrays, replicated on the mesh
        self.start_arg = partial(start_update_arg, mesh=mesh if processes.several() else None)
        self.num_updates_arg = self.start_arg(trainer.num_updates)
        self.env_params_arg = jax.tree.map(partial(replicated, mesh), env_params_argument(trainer.env, trainer.env_params))
        self.lowered = sharded_chunk(trainer.chunk, mesh).lower(state, self.start_arg(0), hypers, *self.constant_args)
        self.seconds = time.perf_counter() - t0

    @property
    def constant_args(self) -> tuple:
        """The arguments after the hyperparameters, the same at every call."""
        return self.num_updates_arg, self.env_params_arg

    def metric_names(self, action_names) -> list[str]:
        """The metrics.csv columns the chunk's metrics become (`rows_from_chunk`)."""
        _, metrics = self.lowered.out_info
        names = [n for n in metrics if n != "actions" and not n.startswith("_")] + ([f"actions/{a}" for a in action_names] if "actions" in metrics else [])
        return sorted(names + ["perf/sps"])


class Replicas:
    """The replicas one compiled chunk trains (a run's seeds, a vmap group's cells x seeds,
    next a population's members) and their learner state: the one place that state lives.
    `next_chunk` runs the program one chunk further.

    Pipelined: the next chunk is dispatched (JAX runs it asynchronously) before this one's
    metrics are pulled, so the device computes while the host writes rows, checkpoints and
    checks stop conditions. A run that stops drops the chunk in flight: `state` is always the
    state after the last chunk whose metrics were returned (what a checkpoint saves), exactly
    as without pipelining."""

    def __init__(self, trainer, mesh, state, hypers, start_update: int, num_updates: int, chunk_updates: int,
                 lowered: "LoweredChunk | None" = None):
        """`num_updates`: where this loop stops (the run's end, or a reproduction's first updates);
        the schedules anneal over the trainer's own count whatever it is."""
        lowered = lowered or LoweredChunk(trainer, mesh, state, hypers)
        t0 = time.perf_counter()
        self.hypers = hypers
        self.start_arg, self.constant_args = lowered.start_arg, lowered.constant_args
        self.compiled = lowered.lowered.compile()
        self.compile_s = lowered.seconds + time.perf_counter() - t0
        log.info("compiled one chunk of %d updates for %d replicas in %.1f s", chunk_updates,
                 jax.tree.leaves(state)[0].shape[0], self.compile_s)
        self.state, self.update = state, start_update
        self.num_updates, self.chunk_updates = num_updates, chunk_updates
        self.in_flight = None  # (state, metrics) of the chunk dispatched after `self.state`
        # No chunk dispatched past a multiple of these: a population's steps, evaluations along training.
        self.hold_every: tuple[int, ...] = ()
        self.host = None  # several processes: (update, host copy of `state`) once gathered

    def next_chunk(self) -> tuple[dict, int, float]:
        """Run one chunk: its metrics (host arrays [replica, K, ...]), its update count, its wall time."""
        t0 = time.perf_counter()
        if self.in_flight is None:
            self.in_flight = self.compiled(self.state, self.start_arg(self.update), self.hypers, *self.constant_args)
        new_state, metrics = self.in_flight
        if processes.several():  # gathered before the next chunk is dispatched: a collective queued behind it would wait for it
            metrics = to_host(metrics)
        count = min(self.chunk_updates, self.num_updates - self.update)
        following = self.update + count
        held = any(following % every == 0 for every in self.hold_every)
        self.in_flight = (self.compiled(new_state, self.start_arg(following), self.hypers, *self.constant_args)
                          if following < self.num_updates and not held else None)
        metrics = jax.device_get(metrics)
        self.state, self.update = new_state, following
        return metrics, count, time.perf_counter() - t0

    def swap(self, state, hypers) -> None:
        """New state (on the devices) and hyperparameters (host arrays, the same on every
        process) between chunks (a population's step; none in flight), laid out over the
        devices as the old ones: the program is not compiled again."""
        assert self.in_flight is None, "a chunk is in flight"
        self.state = jax.tree.map(lambda new, old: jax.device_put(new, old.sharding), state, self.state)
        self.hypers = put_replicas(hypers, jax.tree.leaves(self.hypers)[0].sharding)
        self.host = None

    def advance_anchors(self) -> None:
        """After an evaluation along training: the policy anchors' `previous` is the current
        policy (the same arrays: nothing computed or copied; none in flight)."""
        assert self.in_flight is None, "a chunk is in flight"
        anchors = self.state.policy_anchors
        self.state = self.state.replace(policy_anchors=anchors.replace(previous=self.state.params))
        self.host = None

    def part(self, replicas: slice | None):
        """The state of `replicas` (None: all of them, as they are). Several processes: host
        copies, every replica on every process (a collective: all processes call it together)."""
        if not processes.several():
            state = self.state
        else:  # one gather per update, whichever run (a grid's cell) asks first
            if self.host is None or self.host[0] != self.update:
                self.host = (self.update, to_host(self.state))
            state = self.host[1]
        return state if replicas is None else jax.tree.map(lambda x: x[replicas], state)


class Session:
    """One run on the host across chunks: its replicas (a slice of a `Replicas`, all of it for
    a run alone), update counter, timing, windowed return, recorders, stop conditions and
    summary. A benchmark session neither checkpoints nor evaluates."""

    def __init__(self, cfg: RunConfig, comp: Components, run_dir: Path, resumed: resume.Resumed):
        self.cfg, self.comp, self.run_dir = cfg, comp, run_dir
        self.keeps_results = not cfg.benchmark
        self.update, self.num_updates = resumed.start_update, comp.trainer.num_updates
        self.prior_wall = self.train_wall = resumed.prior_wall
        self.recent = RecentReturns(cfg.train.return_window)
        self.early = EarlyStopping(cfg.train.target_return, cfg.train.patience)
        self.early.restore(resumed.early_stopping)
        self.steps, self.seconds = 0, 0.0  # env steps and loop wall time of this session (for sps)
        self.replicas: Replicas | None = None
        self.population: Population | None = None  # a population run's members (run/population.py)
        self.part: slice | None = None  # this run's replicas in `self.replicas` (None: all)
        self.eval_runner = None  # evaluate.episode_runner shared with other runs (a vmap group), or None
        self.summary = RunSummary()  # its start's (run/entry.py) before the loop
        self.recorders: list = []
        self.stops: StopConditions | None = None
        self.error: BaseException | None = None  # what ended the run, if not its own end
        self.divergence = Divergence(cfg.seeds)  # its seeds that went non-finite (run/divergence.py)
        self.rows_recorded = True  # every recorder took the last chunk's rows (else no checkpoint of it)
        self.loop_start = time.monotonic()
        self.paused_s = 0.0  # of the loop's time since `loop_start`, what evaluations along training took
        self.along = AlongTraining(cfg, comp, run_dir) if cfg.eval.along and self.keeps_results else None

    @property
    def state(self):
        """This run's learner state (its replicas of the program's)."""
        return self.replicas.part(self.part)

    def start_loop(self) -> None:
        # Training wall time = prior sessions + this loop from here on (host work included,
        # evaluations along training not).
        self.loop_start, self.paused_s = time.monotonic(), 0.0

    def loop_seconds(self) -> float:
        return time.monotonic() - self.loop_start - self.paused_s

    def take(self, metrics: dict, count: int, elapsed: float) -> list[dict]:
        """Account for a chunk of `count` updates that took `elapsed` s; its rows from `metrics`
        (host arrays [this run's replicas, K, ...]), a diverged seed's ending where it diverged."""
        steps = count * self.comp.ppo.batch_size * self.cfg.num_seeds
        # sps: env steps over the loop's wall time, host work between chunks included.
        self.steps, self.seconds = self.steps + steps, self.loop_seconds()
        self.train_wall = self.prior_wall + self.loop_seconds()
        metrics = dict(metrics)
        self.rows_recorded = False
        for entry in self.divergence.observe(metrics, self.update, count, self.comp.layout.seed_replicas(self.cfg.num_seeds)):
            log.warning("%s: seed %d diverged at update %d: %s is not finite; it stops counting (the finite state it "
                        "started that chunk from is kept)", self.run_dir, entry["seed"], entry["update"], entry["metric"])
        rows = self.divergence.keep(rows_from_chunk(metrics, self.comp, self.cfg, self.update, count, self.train_wall,
                                                    steps / elapsed))
        self.update += count
        if self.population is not None:
            self.population.annotate(rows)
        self.recent.add(rows)
        return rows

    def save_checkpoint(self) -> None:
        if not self.keeps_results or self.update == 0:
            return
        state = self.state  # gathered to every process in a multi-process run; process 0 writes
        if not processes.writes():
            return
        checkpoint.save(self.run_dir / rundir.CHECKPOINTS, state, {
            "update": self.update, "timesteps": self.update * self.comp.ppo.batch_size, "wall_s": self.train_wall,
            "layout": self.comp.layout.as_dict(), "seeds": self.cfg.seeds, "early_stopping": self.early.state(),
            "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
            **({"pbt": self.population.state()} if self.population is not None else {}),
        })

    def evaluate(self) -> dict:
        if not self.keeps_results:
            return {}
        cfg, comp, state = self.cfg, self.comp, self.state
        if not processes.writes():  # process 0 evaluates every seed; the others only gathered the state
            return {}
        if self.divergence.everyone:  # nothing that counts to evaluate
            return unevaluated(cfg.num_seeds)
        log.info("evaluating (sampled and greedy, %d episodes per seed each; episode_return: %s)", cfg.eval.episodes,
                 "greedy" if cfg.eval.deterministic else "sampled")
        return self.divergence.masked(evaluate_seeds(cfg, comp.env, comp.env_params, comp.network,
                                                     params_per_seed(state, comp.layout, cfg.num_seeds), run=self.eval_runner))


def end_progress(recorders: list) -> None:
    for recorder in recorders:
        if isinstance(recorder, ProgressRecorder):
            recorder.finish()


def drive(replicas: Replicas, sessions: list[Session], devices) -> None:
    """The host loop, for a run and for a group of runs sharing one program alike: chunks until
    the budget is used or every run has stopped; each chunk's rows to each run's recorders,
    checkpoints when due (every run together: a killed group resumes every run from one
    update), stop conditions per run. Each run ends as a run: final checkpoint, evaluation,
    summary (`conclude`). On an error or a signal every run still going checkpoints and says
    why it ended; a signal or an exit is raised again, an error is not (each run's summary and
    `Session.error` hold it)."""
    active = list(sessions)
    signals = StopSignals()
    for session in sessions:
        session.stops = StopConditions(session.run_dir, session.cfg.train.duration_min, session.early, signals,
                                       elapsed_s=session.prior_wall)
    every_s = sessions[0].cfg.checkpoint.every_min * 60
    last_checkpoint = time.monotonic()
    try:
        with signals.installed():
            evaluate_along(replicas, active)  # update 0's, or one a failure cut short
            while active and replicas.update < replicas.num_updates:
                metrics, count, elapsed = replicas.next_chunk()
                for session in list(active):
                    part = session.part if session.part is not None else slice(None)
                    rows = session.take({k: v[part] for k, v in metrics.items()}, count, elapsed)
                    for recorder in session.recorders:
                        recorder.log_rows(rows)
                    session.rows_recorded = True
                    if session.divergence.everyone:  # every seed went non-finite: this run ends here
                        conclude(session, divergence.STATUS,
                                 divergence.diverged_reason(session.divergence.listed(), session.cfg.ppo), signals, devices)
                        active.remove(session)
                evaluate_along(replicas, active)
                population_steps(replicas, active)
                # decided together in a run of several processes (processes.decide)
                due, stops = processes.decide(time.monotonic() - last_checkpoint >= every_s,
                                              [session.stops.check(session.recent.mean()) for session in active], signals)
                if due:
                    for session in active:
                        session.save_checkpoint()
                    last_checkpoint = time.monotonic()
                for session, stop in zip(list(active), stops):
                    if stop is not None and replicas.update < replicas.num_updates:
                        log.warning("%s: stopping at update %d/%d: %s", session.run_dir, session.update,
                                    session.num_updates, stop[1])
                        conclude(session, *stop, signals, devices)
                        active.remove(session)
            while active:
                conclude(active[0], "completed", "total_timesteps reached", signals, devices)
                active.pop(0)
    except BaseException as exc:
        if processes.several() and isinstance(exc, Exception):
            log.error("%s", processes.lost_process_note(exc))
        for session in active:
            session.error = exc
            record_failure(exc, session, signals)
            finish(session, devices)
        if not isinstance(exc, Exception):
            raise


def evaluate_along(replicas: Replicas, sessions: list[Session]) -> None:
    """Evaluation along training of each run due at this update (run/along.py), then the
    program's policy anchors moved to it. Until all of it is done no checkpoint is taken (a
    failure in between resumes from the one before, and evaluates again); its time is not
    training's."""
    due = [s for s in sessions if s.along is not None and s.along.due(replicas.update, replicas.num_updates)]
    if not due:
        return
    t0 = time.monotonic()
    for session in due:
        session.rows_recorded = False
    for session in due:
        state = session.state  # gathered in every process (a collective); process 0 evaluates and writes
        if processes.writes():
            session.along.evaluate(state, session.update, session.train_wall, session.divergence)
    replicas.advance_anchors()
    elapsed = time.monotonic() - t0
    for session in sessions:
        session.paused_s += elapsed
    for session in due:
        session.along.seconds += elapsed
        session.rows_recorded = True


def population_steps(replicas: Replicas, sessions: list[Session]) -> None:
    """A population's exploit/explore step when one is due (run/population.py): after the
    chunk's rows, before a checkpoint, so a checkpoint holds the state after the step."""
    for session in sessions:
        if session.population is not None and session.population.due(replicas.update, replicas.num_updates):
            t0 = time.perf_counter()
            replicas.swap(*session.population.step(replicas.update, replicas.state, session.divergence))
            session.population.step_s += time.perf_counter() - t0


def conclude(session: Session, status: str, reason: str, signals: StopSignals, devices) -> None:
    """The end of one run: its last checkpoint, evaluation and summary (none of it when SLURM
    requeues the job: it resumes from the checkpoint)."""
    end_progress(session.recorders)  # the bar ends once, before evaluation (its time is not training's)
    exit_if_requeued(status, signals, session)
    session.save_checkpoint()
    t0 = time.monotonic()
    evaluation = session.evaluate()
    session.summary.end(status, reason)
    session.summary.eval = evaluation
    session.summary.eval_s = round(time.monotonic() - t0, 3) if session.keeps_results else None
    finish(session, devices)


def exit_if_requeued(status: str, signals: StopSignals, session: Session) -> None:
    """SLURM sends SIGTERM when it requeues, preempts or cancels a job. Exit without a result
    (the caller checkpoints the last chunk, status stopped): submitit then waits for the
    requeued job, which resumes here, instead of taking this half-run as the job's result.
    No evaluation: KillWait is short."""
    if status == "stopped" and signals.received == "SIGTERM" and slurm_job_id():
        raise SystemExit(f"SIGTERM in SLURM job {slurm_job_id()}: checkpointed at update {session.update}, exiting for requeue")


def record_failure(exc: BaseException, session: Session, signals: StopSignals) -> None:
    """Keep what the last complete chunk reached (a requeued job resumes from it) and say why
    the run ended: stopped (a signal, an exit) or failed (an error, in summary.json). A chunk
    whose rows were not all written (metrics.csv on a full disk) is not checkpointed: a resume
    goes on from the checkpoint before it, and metrics.csv has no gap."""
    try:
        if session.rows_recorded:
            session.save_checkpoint()
        else:
            log.warning("%s: not checkpointing update %d: its rows were not all written", session.run_dir, session.update)
    except Exception as again:  # noqa: BLE001 - never hide the original error
        failure.report("could not save a checkpoint after the failure", again)
    preempted = isinstance(exc, (SystemExit, KeyboardInterrupt))
    session.summary.end("stopped" if preempted else "failed",
                f"signal {signals.received}" if preempted and signals.received else type(exc).__name__,
                None if preempted else failure.one_line(exc))


def finish(session: Session, devices) -> None:
    """What the end of a run adds to its summary (counters, this session's throughput, final
    metrics, memory), then every recorder's last word and the closing lines."""
    summary = session.summary
    if session.population is not None and processes.writes():  # read back from pbt.jsonl, which process 0 writes
        summary.pbt = session.population.summary(session.update, session.divergence.listed())
    summary.updates, summary.timesteps = session.update, session.update * session.comp.ppo.batch_size
    summary.wall_s = round(session.train_wall, 3)
    summary.sps = round(session.steps / session.seconds, 1) if session.seconds > 0 else None
    summary.along_eval_s = round(session.along.seconds, 3) if session.along is not None else None
    summary.final = session.divergence.masked(session.recent.final(session.cfg.seeds))
    summary.peak_host_memory_mb, summary.device_memory_mb = round(peak_host_memory_mb(), 1), device_memory_mb(devices)
    summary.diverged = session.divergence.listed()
    end_progress(session.recorders)  # before the recorders' last lines (a failure ends it here)
    for recorder in session.recorders:
        try:
            recorder.finish(summary)
        except Exception as again:  # noqa: BLE001 - never hide the original error
            if session.error is None:
                raise
            # after a failure (a full disk) each recorder still gets its turn, and the summary is printed
            failure.report(f"{type(recorder).__name__} could not finish after the failure", again)
    # The per-seed values are in summary.json; the console ends with what a user needs.
    if processes.writes():
        print_closing_summary(summary, session.run_dir, session.cfg)
        if session.error is not None:
            session.error.closing_summary_printed = True  # launch.py: the error and resume command are said
