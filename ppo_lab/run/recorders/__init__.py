"""Where a run's rows and summary go: the recorders, the run directory's files among them, and
the optional loggers.

A recorder is told three things by the host loop (run/loop.py):
`start(ctx)` once before the first chunk, `log_rows(rows)` after every chunk (one dict per
(update, seed), the metric names of docs/architecture.md) and `finish(summary)` once at the end, also after a
failure. metrics.csv, summary.json, benchmark.json, the progress display and the health
warnings are recorders, and so is each optional logger; `choose_recorders` picks them, so
benchmark mode is a different choice of recorders, not a branch in the loop.

`logger=[csv,wandb,tensorboard]` picks the optional loggers; the keys under `logger` are the
names. Each `conf/logger/<name>.yaml` names its factory (`_target_`, loaded by
`ppo_lab.parts`): `make_logger(run_dir, cfg, options)` returning an object with `log_rows` and
`finish`. Adding one is a module plus one YAML file; W&B, TensorBoard and MLflow share
`per_seed.PerSeedLogger` (one store run per seed, each update once across resumes).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ppo_lab import parts, rundir
from ppo_lab.judging.health import HealthWarnings
from ppo_lab.config import LoggerSpec
from ppo_lab.errors import ConfigError
from ppo_lab.run.recorders.console import ProgressRecorder
from ppo_lab.rundir.run_summary import RunSummary

log = logging.getLogger(__name__)

@dataclass
class RunContext:
    """What a recorder may need to know when the run starts."""
    run_dir: Path
    cfg: Any  # RunConfig
    summary: RunSummary  # the summary as it stands at start (status running)
    start_update: int
    num_updates: int
    batch_size: int
    windowed_return: Callable[[], float]  # the windowed mean return the stop rules see


class Recorder:
    """What the host loop tells a recorder; each step does nothing unless a recorder says
    otherwise. (The progress display and the health warnings have all three and are recorders
    by their shape alone.)"""

    def start(self, ctx: RunContext) -> None:
        pass

    def log_rows(self, rows: list[dict]) -> None:
        pass

    def finish(self, summary: RunSummary) -> None:
        pass


class MetricsFile(Recorder):
    """metrics.csv: every row, flushed each chunk (resume has already cut it back)."""

    def start(self, ctx) -> None:
        self.csv = rundir.MetricsCSV(ctx.run_dir / rundir.METRICS)

    def log_rows(self, rows: list[dict]) -> None:
        self.csv.append(rows)


class SummaryFile(Recorder):
    """summary.json: written with status running at start, complete at the end."""

    def start(self, ctx) -> None:
        self.run_dir = ctx.run_dir
        rundir.write_summary(self.run_dir, ctx.summary)

    def finish(self, summary: RunSummary) -> None:
        rundir.write_summary(self.run_dir, summary)
        log.info("%s after %d updates (%s); results: %s", summary.status, summary.updates, summary.stop_reason,
                 self.run_dir / rundir.SUMMARY)


class BenchmarkFile(Recorder):
    """benchmark.json: throughput, compile time and memory of a benchmark=true run."""

    def start(self, ctx) -> None:
        self.run_dir = ctx.run_dir

    def finish(self, summary: RunSummary) -> None:
        config = rundir.read_config(self.run_dir) if (self.run_dir / rundir.CONFIG).exists() else None
        path = rundir.write_benchmark(self.run_dir, summary, config)
        log.info("benchmark: %.0f steps/s, compile %.1f s -> %s", summary.sps or 0, summary.compile_s or 0, path)


def make_logger(spec: LoggerSpec, run_dir: Path, cfg):
    """Logger `spec` started for this run (its factory opens its files or its store)."""
    return parts.call(f"logger.{spec.name}._target_", spec.target, Path(run_dir), cfg, dict(spec.options))


class LoggerRecorder(Recorder):
    """One optional logger as a recorder. Built at start, so a logger that cannot start fails
    the run before the first compile (the loop records it in summary.json), unless its
    `on_unreachable` is warn: then the run goes on without it.

    Mid-run, a logger is a guest: one that fails to take a chunk's rows (its store went away,
    its disk is full) is disabled with a warning and listed in summary.json's
    `loggers_disabled`; training, metrics.csv and checkpoints go on. Its store's requests are
    bounded by `connect_timeout_s` (mlflow_recorder.py), so a failure costs at most that."""

    def __init__(self, spec: LoggerSpec):
        self.spec, self.name, self.logger = spec, spec.name, None
        self.summary = RunSummary()
        self.update = 0

    def start(self, ctx: RunContext) -> None:
        self.summary, self.update = ctx.summary, ctx.start_update
        try:
            self.logger = make_logger(self.spec, ctx.run_dir, ctx.cfg)
        except ConfigError:
            raise
        except Exception as exc:
            if self.spec.options.get("on_unreachable") != "warn":
                raise
            self._disable(exc, "start")

    def log_rows(self, rows: list[dict]) -> None:
        if self.logger is None:
            return
        try:
            self.logger.log_rows(rows)
        except Exception as exc:  # noqa: BLE001 - a logger's failure must not cost the run
            self._disable(exc, f"update {max((int(r['update']) for r in rows), default=self.update)}")

    def finish(self, summary: RunSummary) -> None:
        if self.logger is None:
            return
        try:
            self.logger.finish(summary)
        except Exception:  # noqa: BLE001 - one logger's failure must not hide the result
            log.exception("logger %s failed to finish", self.name)

    def _disable(self, exc: Exception, when: str) -> None:
        error = f"{type(exc).__name__}: {exc}"[:2000]
        log.warning("logger %s disabled at %s: %s; training and the run directory's files go on without it",
                    self.name, when, error)
        self.summary.loggers_disabled.append({"logger": self.name, "error": error, "when": when})
        abandon = getattr(self.logger, "abandon", None)
        self.logger = None
        if abandon is not None:
            try:
                abandon()
            except Exception:  # noqa: BLE001 - it failed already; let go of it quietly
                pass


def choose_recorders(cfg) -> list[Recorder]:
    """Training: metrics.csv, summary.json, the loggers, progress, health. Benchmark: progress,
    health and benchmark.json only (a measurement, not a result: no run files, no loggers)."""
    if cfg.benchmark:
        return [ProgressRecorder(), HealthWarnings(cfg.health), BenchmarkFile()]
    loggers = [LoggerRecorder(spec) for spec in cfg.logger.values() if spec.target]
    return [SummaryFile(), MetricsFile(), *loggers, ProgressRecorder(), HealthWarnings(cfg.health)]
