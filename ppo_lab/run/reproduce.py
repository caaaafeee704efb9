"""`ppo-lab reproduce RUN_DIR [--updates K] [--out DIR]`: re-run a run's first K updates and compare.

Reads the run's config.yaml (a config written by an older lab completed as `ppo-lab evaluate`
reads it) and, for a run relaunched with allow_config_change=true, config_history.jsonl: each
span of updates is re-run with the config that trained it. Applies its `hardware` section before XLA's backend starts, builds the run afresh
and trains its first K updates (whole chunks of its own `train.chunk_updates`, so the compiled
program is the run's own) into a new directory (default `outputs/reproduce/<run>-<time>`):
config.yaml, metrics.csv (the first K updates), manifest.json. Then metrics.csv is compared
row by row with the run's (`ppo_lab/judging/reproduction.py`): it prints "identical", or the first
differing (update, seed, metric) with both values, the largest difference, and the manifest
fields that differ (another CPU, package or flag). Exit 0 when identical, 1 when not, 2 when the
run cannot be reproduced (no config, bad config). `--rtol R [--atol A]`: also exit 0 when every
difference is that small (a run recorded on another CPU), said as "close, not identical".
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import time
from pathlib import Path

import jax

from ppo_lab import rundir
from ppo_lab.judging.reproduction import compare_runs, format_comparison
from ppo_lab.errors import ConfigError
from ppo_lab.hardware import HardwareError, start_jax
from ppo_lab.ppo.parallel import make_mesh, put_replicas, replica_sharding
from ppo_lab.run import resume
from ppo_lab.run.build import build
from ppo_lab.run.loop import Replicas, Session
from ppo_lab.run.manifest import write_run_manifest

log = logging.getLogger(__name__)


def rerun(run_dir: Path, updates: int, out_dir: Path) -> int:
    """Train the first `updates` updates of `run_dir` into `out_dir`, each span of updates with
    the config that trained it (`rundir.config_spans`: config.yaml, with the changes
    config_history.jsonl records undone for the updates before them), the state carried from
    one span into the next as a relaunch carries it through its checkpoint; returns how many ran."""
    spans = [(start, rundir.validated_config(raw)) for start, raw in rundir.config_spans(run_dir)]
    spans = [(start, cfg) for start, cfg in spans if start < updates]
    if any(cfg.pbt is not None for _, cfg in spans):  # its members' exploit steps are not re-run here (yet)
        raise ConfigError("pbt.population", spans[0][1].pbt.population, "0: ppo-lab reproduce re-runs runs without a population")
    devices = start_jax(spans[0][1].hardware)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows, state = [], None
    for i, (start, cfg) in enumerate(spans):
        end = spans[i + 1][0] if i + 1 < len(spans) else None
        state, session, span_rows = _rerun_span(cfg, devices, out_dir, state, start, end, updates)
        rows += span_rows
    last = spans[-1][1]
    write_run_manifest(out_dir, last, session.comp.layout, devices)
    rundir.write_config(out_dir, last.resolved)  # after manifest.json, which says the format (as a run writes them)
    rundir.append_config_history(out_dir, [e for e in rundir.read_config_history(run_dir) if e["from_update"] < updates])
    rows = [r for r in rows if r["update"] <= updates]
    rundir.MetricsCSV(out_dir / rundir.METRICS).append(rows)
    return min(updates, session.update)


def _rerun_span(cfg, devices, out_dir: Path, state, start: int, end: int | None, updates: int):
    """Updates `start`.. of one span with its config, from `state` (None: a fresh init), until
    the span's `end` (the next span's start) or, in the last span, the whole chunk that reaches
    `updates`. Returns (the state on the host, the session, its metrics rows)."""
    comp = build(cfg, len(devices))
    mesh = make_mesh(comp.layout, devices)
    chunk = comp.trainer.chunk_updates
    if state is None:
        state, resumed = resume.restore(resume.Plan(source=None, own=False), comp, cfg, mesh)
    else:  # as a relaunch resumes: the state as its checkpoint holds it, laid out on this mesh
        state, resumed = put_replicas(state, replica_sharding(mesh)), resume.Resumed(start_update=start)
    stop = start + math.ceil((updates - start) / chunk) * chunk  # whole chunks
    if end is not None:
        if (end - start) % chunk and end != comp.trainer.num_updates:
            raise ConfigError("train.chunk_updates", chunk, f"a size that divides the {end - start} updates from "
                              f"{start} to {end} (the span one config trained): they cannot be re-run in whole chunks")
        stop = min(stop, end)
    session = Session(cfg, comp, out_dir, resumed)
    session.num_updates = min(comp.trainer.num_updates, stop)
    replicas = session.replicas = Replicas(comp.trainer, mesh, state, comp.hypers.sharded(replica_sharding(mesh)),
                                           resumed.start_update, session.num_updates, chunk)
    session.start_loop()
    rows = []
    while replicas.update < replicas.num_updates:  # the run's own loop, without its recorders and stops
        rows += session.take(*replicas.next_chunk())
    return jax.device_get(replicas.state), session, rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Re-run a run's first updates from its config and compare metrics.csv row by row.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--updates", type=int, default=5, help="how many updates to re-run and compare (default 5)")
    parser.add_argument("--out", type=Path, default=None, help="where the reproduction goes (default outputs/reproduce/<run>-<time>)")
    parser.add_argument("--rtol", type=float, default=None,
                        help="also accept differences within this relative tolerance (e.g. 1e-3 for a run from another CPU)")
    parser.add_argument("--atol", type=float, default=0.0, help="with --rtol: an absolute tolerance added to it (default 0)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="[%(levelname)s] %(message)s")
    if args.updates < 1:
        parser.error("--updates must be at least 1")
    if (args.rtol is not None and args.rtol < 0) or args.atol < 0:
        parser.error("--rtol and --atol must be at least 0")
    if not (args.run_dir / rundir.METRICS).exists():
        print(f"ppo-lab reproduce: {args.run_dir} has no {rundir.METRICS} to compare with", file=sys.stderr)
        return 2
    out = args.out or Path("outputs") / "reproduce" / f"{args.run_dir.resolve().name}-{time.strftime('%Y-%m-%d_%H-%M-%S')}"
    try:
        ran = rerun(args.run_dir, args.updates, out)
    except (ConfigError, HardwareError, FileNotFoundError) as exc:
        print(f"ppo-lab reproduce: {args.run_dir}: {exc}", file=sys.stderr)
        return 2
    result = compare_runs(args.run_dir, out, ran)
    print(format_comparison(result, args.run_dir, out))
    if result.identical:
        return 0
    if args.rtol is not None and result.within(args.rtol, args.atol):
        print(f"close, not identical: every difference within rtol={args.rtol:g}, atol={args.atol:g}")
        return 0
    return 1
