"""The host loop of one run: chunks, metrics, checkpoints, stop conditions, evaluation.

    cfg -> build env/network/trainer -> init or resume -> compile one chunk ->
    loop { run chunk; pull metrics once; write rows; warn; checkpoint when due; stop? } ->
    final checkpoint -> evaluation -> summary.json
"""

from __future__ import annotations

import logging
import math
import os
import platform
import resource
import time
import traceback
from collections import deque
from pathlib import Path

import jax
import numpy as np

from ppo_lab import rundir
from ppo_lab.run import checkpoint
from ppo_lab.rundir.atomic import write_json_atomic
from ppo_lab.run.build import Components, build
from ppo_lab.config import RunConfig
from ppo_lab.run.evaluate import evaluate_seeds, params_per_seed
from ppo_lab.run.health import health_warnings
from ppo_lab.run.recorders import make_loggers
from ppo_lab.run.recorders.console import Progress
from ppo_lab.ppo.parallel import init_replicas, make_mesh, replica_sharding, replica_template, sharded_chunk, start_update_arg
from ppo_lab.run.stopping import EarlyStopping, StopConditions, StopSignals

log = logging.getLogger(__name__)

# Keys whose change makes a checkpoint unusable (shapes or meaning of the saved state).
RESUME_MUST_MATCH = ("seed", "num_seeds", "env", "reward", "network", "ppo.num_envs", "ppo.num_steps")


class ResumeError(RuntimeError):
    pass


def slurm_job_id() -> str | None:
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return os.environ.get("SLURM_JOB_ID")


def versions() -> dict:
    import flax
    import optax

    import ppo_lab

    return {"jax": jax.__version__, "flax": flax.__version__, "optax": optax.__version__, "ppo_lab": ppo_lab.__version__, "python": platform.python_version()}


def _get(d: dict, dotted: str):
    for part in dotted.split("."):
        d = d.get(part) if isinstance(d, dict) else None
    return d


def check_resume_compatible(saved: dict, resolved: dict, source: Path) -> None:
    for key in RESUME_MUST_MATCH:
        if _get(saved, key) != _get(resolved, key):
            raise ResumeError(
                f"cannot resume from {source}: {key} was {_get(saved, key)!r} there and is {_get(resolved, key)!r} now. "
                f"Use a new run directory, or the same {key}."
            )


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


class RecentReturns:
    """Windowed mean of train/mean_episode_return over the last W updates (all seeds)."""

    def __init__(self, window: int):
        self.by_update: deque = deque(maxlen=window)
        self.last_rows: dict[int, deque] = {}
        self.window = window

    def add(self, rows: list[dict]) -> None:
        by_update: dict[int, list] = {}
        for row in rows:
            by_update.setdefault(row["update"], []).append(row)
            self.last_rows.setdefault(row["seed"], deque(maxlen=self.window)).append(row)
        for update in sorted(by_update):
            self.by_update.append([r.get("train/mean_episode_return", math.nan) for r in by_update[update]])

    def mean(self) -> float:
        values = [v for vs in self.by_update for v in vs if v is not None and not math.isnan(v)]
        return float(np.mean(values)) if values else math.nan

    def final(self, seeds: list[int]) -> dict[str, list[float]]:
        """Per metric, one value per seed: the nan-mean over the last W updates."""
        names = sorted({k for rows in self.last_rows.values() for r in rows for k in r} - set(rundir.KEY_COLUMNS))
        out = {}
        for name in names:
            values = []
            for seed in seeds:
                xs = [r.get(name) for r in self.last_rows.get(seed, [])]
                xs = [float(x) for x in xs if x not in (None, "") and not math.isnan(float(x))]
                values.append(float(np.mean(xs)) if xs else None)
            out[name] = values
        return out


def peak_host_memory_mb() -> float:
    """This process's peak resident memory. VmHWM, not ru_maxrss: a child process inherits
    its parent's ru_maxrss on Linux, so a launched run would report its launcher's peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def device_memory_mb(devices) -> float | None:
    peaks = []
    for d in devices:
        try:
            stats = d.memory_stats()
        except Exception:  # backends without memory stats (CPU)
            stats = None
        if stats and "peak_bytes_in_use" in stats:
            peaks.append(stats["peak_bytes_in_use"] / 2**20)
    return float(sum(peaks)) if peaks else None


def run(cfg: RunConfig, run_dir: Path, resolved: dict, devices) -> dict:
    """Train (or resume) one run in `run_dir`; returns the summary it wrote."""
    run_dir = Path(run_dir)
    comp = build(cfg, len(devices))
    log.info(
        "run %s | env=%s reward=%s | seeds %s | layout %s over %d device(s) | batch %d x %d, %d updates",
        run_dir, cfg.env["name"], cfg.reward.get("name"), cfg.seeds, comp.layout.mode, comp.layout.num_devices,
        comp.ppo.num_envs, comp.ppo.num_steps, comp.trainer.num_updates,
    )
    mesh = make_mesh(comp.layout, devices)
    ckpt_dir = run_dir / rundir.CHECKPOINTS
    metrics_csv = rundir.MetricsCSV(run_dir / rundir.METRICS)

    # --- resume: our own checkpoint first (a requeued job), else resume=PATH -------------
    source = None
    if checkpoint.list_checkpoints(ckpt_dir):
        source = run_dir
    elif cfg.resume:
        source = Path(cfg.resume)
        if not checkpoint.list_checkpoints(source / rundir.CHECKPOINTS):
            raise ResumeError(f"resume={cfg.resume}: no complete checkpoint in {source / rundir.CHECKPOINTS}")
    if source is not None and not cfg.benchmark:
        check_resume_compatible(rundir.read_config(source), resolved, source)

    rundir.write_config(run_dir, resolved)
    resuming = source is not None and not cfg.benchmark
    start_update, prior_wall, meta = 0, 0.0, {}
    early = EarlyStopping(cfg.train.target_return, cfg.train.patience)
    recent = RecentReturns(cfg.train.return_window)
    if not resuming:
        state = init_replicas(comp.trainer.init, comp.layout, cfg.seeds, mesh)
    else:
        template = replica_template(comp.trainer.init, comp.layout, cfg.seeds, mesh)
        host_state, meta = checkpoint.load(source / rundir.CHECKPOINTS, template)
        saved_layout = meta.get("layout") or {}
        # Seed layouts do not depend on the device count; a split of one seed's envs does.
        if "envs" in (saved_layout.get("mode"), comp.layout.mode) and saved_layout != comp.layout.as_dict():
            raise ResumeError(f"cannot resume from {source}: saved with device layout {saved_layout}, this run has {comp.layout.as_dict()}")
        state = jax.device_put(host_state, replica_sharding(mesh))
        start_update, prior_wall = int(meta["update"]), float(meta.get("wall_s", 0.0))
        early.restore(meta.get("early_stopping"))
        if source == run_dir:
            dropped = metrics_csv.truncate_after(start_update)
            log.info("RESUMING from this run's checkpoint at update %d (dropped %d metric rows written after it)", start_update, dropped)
        else:
            rundir.copy_rows_until(source / rundir.METRICS, run_dir / rundir.METRICS, start_update)
            metrics_csv = rundir.MetricsCSV(run_dir / rundir.METRICS)
            log.info("RESUMING from %s at update %d", source, start_update)
        recent.add(rundir.read_recent_rows(run_dir / rundir.METRICS, cfg.train.return_window))

    num_updates = comp.trainer.num_updates
    summary = {
        "status": "running", "stop_reason": None, "experiment": cfg.experiment, "env": cfg.env["name"],
        "reward": cfg.reward.get("name"), "seeds": cfg.seeds, "updates": start_update,
        "timesteps": start_update * comp.ppo.batch_size, "total_updates": num_updates,
        "wall_s": prior_wall, "compile_s": None, "sps": None, "final": {}, "eval": {},
        "resumed_from": start_update if resuming else None,
        "resume_source": str(source) if source is not None and source != run_dir else None,
        "slurm_job_id": slurm_job_id(), "layout": comp.layout.as_dict(),
        "devices": [str(d) for d in devices[: comp.layout.num_devices]], "ppo_effective": {
            "num_minibatches": comp.ppo.num_minibatches, "update_epochs": comp.ppo.update_epochs},
        "versions": versions(), "error": None,
    }
    if not cfg.benchmark:
        rundir.update_summary(run_dir, summary)
    try:
        loggers = [] if cfg.benchmark else make_loggers(run_dir, cfg, resolved)
    except Exception as exc:
        if not cfg.benchmark:  # say so in the run dir, not only on the console
            rundir.update_summary(run_dir, {"status": "failed", "stop_reason": "logger", "error": f"{type(exc).__name__}: {exc}"})
        raise

    t_compile = time.perf_counter()
    compiled = sharded_chunk(comp.trainer.chunk, mesh).lower(state, start_update_arg(0)).compile()
    compile_s = time.perf_counter() - t_compile
    summary["compile_s"] = round(compile_s, 3)
    chunk_len = comp.trainer.chunk_updates
    log.info("compiled a chunk of %d updates in %.1f s", chunk_len, compile_s)

    signals = StopSignals()
    stops = StopConditions(run_dir, cfg.train.duration_min, early, signals, elapsed_s=prior_wall)
    progress = Progress(num_updates * comp.ppo.batch_size, start_update * comp.ppo.batch_size)
    update, status, reason = start_update, "completed", "total_timesteps reached"
    train_wall = prior_wall
    loop_start = time.monotonic()  # training wall time = prior runs + this loop (host work included)
    last_ckpt = loop_start
    steps_this_session, time_this_session = 0, 0.0

    def save_checkpoint():
        if cfg.benchmark or update == 0:
            return
        checkpoint.save(ckpt_dir, state, {
            "update": update, "timesteps": update * comp.ppo.batch_size, "wall_s": train_wall,
            "layout": comp.layout.as_dict(), "seeds": cfg.seeds, "early_stopping": early.state(),
            "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        })

    try:
        with signals.installed():
            while update < num_updates:
                t0 = time.perf_counter()
                new_state, metrics = compiled(state, start_update_arg(update))
                metrics = jax.device_get(metrics)
                elapsed = time.perf_counter() - t0
                count = min(chunk_len, num_updates - update)
                sps = count * comp.ppo.batch_size * cfg.num_seeds / elapsed
                steps_this_session += count * comp.ppo.batch_size * cfg.num_seeds
                time_this_session += elapsed
                train_wall = prior_wall + time.monotonic() - loop_start
                rows = rows_from_chunk(metrics, comp, cfg, update, count, train_wall, sps)
                if not cfg.benchmark:
                    metrics_csv.append(rows)
                for logger in loggers:
                    logger.log_rows(rows)
                state, update = new_state, update + count
                recent.add(rows)
                for message in health_warnings(rows, cfg.health):
                    log.warning(message)
                last = rows[-cfg.num_seeds:]
                progress.update(
                    update=update, num_updates=num_updates, timesteps=update * comp.ppo.batch_size, sps=sps,
                    mean_return=recent.mean(), entropy=float(np.nanmean([r.get("train/entropy", math.nan) for r in last])),
                )
                if time.monotonic() - last_ckpt >= cfg.checkpoint_every_min * 60:
                    save_checkpoint()
                    last_ckpt = time.monotonic()
                stop = stops.check(recent.mean())
                if stop is not None and update < num_updates:
                    status, reason = stop
                    log.warning("stopping at update %d/%d: %s", update, num_updates, reason)
                    break
            progress.close()
            if status == "stopped" and signals.received == "SIGTERM" and slurm_job_id():
                # SLURM sends SIGTERM when it requeues, preempts or cancels a job. Exit without a
                # result (the except below checkpoints the last chunk, status stopped): submitit
                # then waits for the requeued job, which resumes here, instead of taking this
                # half-run as the job's result. No evaluation: KillWait is short.
                raise SystemExit(f"SIGTERM in SLURM job {slurm_job_id()}: checkpointed at update {update}, exiting for requeue")
            save_checkpoint()
            summary.update(status=status, stop_reason=reason)
            if not cfg.benchmark:
                log.info("evaluating (%s, %d episodes per seed)", "deterministic" if cfg.eval.deterministic else "sampled", cfg.eval.episodes)
                summary["eval"] = evaluate_seeds(cfg, comp.env, comp.env_params, comp.network, params_per_seed(state, comp.layout, cfg.num_seeds))
    except BaseException as exc:
        progress.close()
        # Keep what the last complete chunk reached; a requeued job resumes from it.
        try:
            save_checkpoint()
        except Exception:  # noqa: BLE001 - never hide the original error
            log.exception("could not save a checkpoint after the failure")
        preempted = isinstance(exc, (SystemExit, KeyboardInterrupt))
        summary.update(status="stopped" if preempted else "failed",
                       stop_reason=reason if preempted and signals.received else type(exc).__name__,
                       error=None if preempted else "".join(traceback.format_exception_only(exc)).strip())
        _finish(summary, cfg, run_dir, update, comp, recent, train_wall, steps_this_session, time_this_session, devices, loggers)
        raise
    return _finish(summary, cfg, run_dir, update, comp, recent, train_wall, steps_this_session, time_this_session, devices, loggers)


def _finish(summary, cfg, run_dir, update, comp, recent, train_wall, steps, seconds, devices, loggers) -> dict:
    summary.update(
        updates=update, timesteps=update * comp.ppo.batch_size, wall_s=round(train_wall, 3),
        sps=round(steps / seconds, 1) if seconds > 0 else None, final=recent.final(cfg.seeds),
        peak_host_memory_mb=round(peak_host_memory_mb(), 1), device_memory_mb=device_memory_mb(devices),
    )
    if cfg.benchmark:
        bench = {k: summary[k] for k in ("status", "stop_reason", "env", "reward", "seeds", "sps", "compile_s", "wall_s", "peak_host_memory_mb", "device_memory_mb", "updates", "timesteps", "layout", "devices", "versions", "final")}
        bench["config"] = rundir.read_config(run_dir) if (run_dir / rundir.CONFIG).exists() else None
        write_json_atomic(run_dir / "benchmark.json", bench)
        log.info("benchmark: %.0f steps/s, compile %.1f s -> %s", summary["sps"] or 0, summary["compile_s"] or 0, run_dir / "benchmark.json")
    else:
        rundir.update_summary(run_dir, summary)
    for logger in loggers:
        try:
            logger.finish(summary)
        except Exception:  # noqa: BLE001
            log.exception("logger %s failed to finish", type(logger).__name__)
    written = run_dir / ("benchmark.json" if cfg.benchmark else rundir.SUMMARY)
    log.info("%s after %d updates (%s); results: %s", summary["status"], update, summary["stop_reason"], written)
    if summary.get("eval"):
        for name, values in summary["eval"].items():
            log.info("eval/%s per seed: %s", name, ", ".join(f"{v:.3f}" for v in values))
    return summary
