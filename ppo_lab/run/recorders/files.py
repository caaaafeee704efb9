"""The run-directory recorders: metrics.csv, summary.json, and benchmark.json instead of both."""

from __future__ import annotations

import logging

from ppo_lab import rundir

log = logging.getLogger(__name__)

# summary.json fields a benchmark.json repeats (docs/architecture.md, "Contracts").
BENCHMARK_FIELDS = ("status", "stop_reason", "env", "reward", "seeds", "sps", "compile_s", "wall_s", "peak_host_memory_mb",
                    "device_memory_mb", "updates", "timesteps", "layout", "devices", "versions", "final")


class MetricsFile:
    """metrics.csv: every row, flushed each chunk (resume has already cut it back)."""

    def start(self, ctx) -> None:
        self.csv = rundir.MetricsCSV(ctx.run_dir / rundir.METRICS)

    def log_rows(self, rows: list[dict]) -> None:
        self.csv.append(rows)

    def finish(self, summary: dict) -> None:
        pass


class SummaryFile:
    """summary.json: written with status running at start, complete at the end."""

    def start(self, ctx) -> None:
        self.run_dir = ctx.run_dir
        rundir.update_summary(self.run_dir, ctx.summary)

    def log_rows(self, rows: list[dict]) -> None:
        pass

    def finish(self, summary: dict) -> None:
        rundir.update_summary(self.run_dir, summary)
        log.info("%s after %d updates (%s); results: %s", summary["status"], summary["updates"], summary["stop_reason"],
                 self.run_dir / rundir.SUMMARY)


class BenchmarkFile:
    """benchmark.json: throughput, compile time and memory of a benchmark=true run."""

    def start(self, ctx) -> None:
        self.run_dir = ctx.run_dir

    def log_rows(self, rows: list[dict]) -> None:
        pass

    def finish(self, summary: dict) -> None:
        bench = {k: summary.get(k) for k in BENCHMARK_FIELDS}
        bench["config"] = rundir.read_config(self.run_dir) if (self.run_dir / rundir.CONFIG).exists() else None
        path = rundir.write_benchmark(self.run_dir, bench)
        log.info("benchmark: %.0f steps/s, compile %.1f s -> %s", summary["sps"] or 0, summary["compile_s"] or 0, path)
