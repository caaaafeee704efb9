"""The run-directory recorders: metrics.csv, summary.json, and benchmark.json instead of both."""

from __future__ import annotations

import logging

from ppo_lab import rundir
from ppo_lab.rundir.run_summary import RunSummary

log = logging.getLogger(__name__)


class MetricsFile:
    """metrics.csv: every row, flushed each chunk (resume has already cut it back)."""

    def start(self, ctx) -> None:
        self.csv = rundir.MetricsCSV(ctx.run_dir / rundir.METRICS)

    def log_rows(self, rows: list[dict]) -> None:
        self.csv.append(rows)

    def finish(self, summary: RunSummary) -> None:
        pass


class SummaryFile:
    """summary.json: written with status running at start, complete at the end."""

    def start(self, ctx) -> None:
        self.run_dir = ctx.run_dir
        rundir.write_summary(self.run_dir, ctx.summary)

    def log_rows(self, rows: list[dict]) -> None:
        pass

    def finish(self, summary: RunSummary) -> None:
        rundir.write_summary(self.run_dir, summary)
        log.info("%s after %d updates (%s); results: %s", summary.status, summary.updates, summary.stop_reason,
                 self.run_dir / rundir.SUMMARY)


class BenchmarkFile:
    """benchmark.json: throughput, compile time and memory of a benchmark=true run."""

    def start(self, ctx) -> None:
        self.run_dir = ctx.run_dir

    def log_rows(self, rows: list[dict]) -> None:
        pass

    def finish(self, summary: RunSummary) -> None:
        config = rundir.read_config(self.run_dir) if (self.run_dir / rundir.CONFIG).exists() else None
        path = rundir.write_benchmark(self.run_dir, summary, config)
        log.info("benchmark: %.0f steps/s, compile %.1f s -> %s", summary.sps or 0, summary.compile_s or 0, path)
