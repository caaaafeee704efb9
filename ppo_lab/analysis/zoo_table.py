"""The zoo table's numbers: one row per env (task) from the runs under some sweep dirs, and
rliable's aggregates across the envs on normalised scores.

A task is the env id a run's config names (`rliable_report.task_of`), whatever sweep dir or
job its seeds came from: one env's seeds may be split over jobs, and envs over dirs (some
trained on a CPU, others on a GPU). A row holds the final greedy evaluation return
(`eval/episode_return`) over the task's used seeds: its mean with the interval
`estimators.mean_summary` gives, its IQM with a bootstrap interval; the steps per seed; the
wall time (training + compile + evaluation, summed over the task's runs); the hardware from
each run's manifest.json; the reference return and where it comes from (the env YAML's
`scores:` entry: `reference`, and `source` where the entry names one, else the YAML), and
whether the reference was reached: the mean is at or above it (the interval, which holds the
mean 95% of the time and so reaches far at few seeds, is beside it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ppo_lab import estimators as es
from ppo_lab import rundir
from ppo_lab.analysis import rliable_report as rr
from ppo_lab.analysis import sweep as sw
from ppo_lab.analysis.rliable_report import refs_from_env, task_of
from ppo_lab.judging.headline import RETURN, TRAIN_RETURN, declared_bounds
from ppo_lab.rundir.run_summary import RunSummary


@dataclass
class EnvRow:
    task: str
    seeds: list[int]
    returns: list[float]
    stats: dict                       # mean_summary of `returns`: mean, ci_low/high, iqm, iqm_ci_low/high
    steps_per_seed: list[int]         # distinct values over the task's runs
    wall_s: float                     # training + compile + evaluation, summed over the task's runs
    hardware: list[str]               # distinct, over the task's runs
    random: float | None
    reference: float | None
    source: str | None
    runs: list[Path] = field(default_factory=list)
    not_used: list[str] = field(default_factory=list)  # "seed S: status (reason)" of seeds left out

    @property
    def reached(self) -> bool | None:
        if self.reference is None or not self.returns:
            return None
        return bool(self.stats["mean"] >= self.reference)


def hardware_of(run_dir: Path) -> str:
    """What a run trained on, from its manifest.json: `1 x NVIDIA H100 80GB HBM3`, or the CPU's
    model and the XLA devices it was split into (`AMD EPYC, 2 CPU device(s)`)."""
    manifest = rundir.read_manifest(run_dir) or {}
    devices = manifest.get("devices") or {}
    kinds = devices.get("kinds") or {}
    if devices.get("platform") == "cpu":
        model = (manifest.get("cpu") or {}).get("model_name") or "CPU"
        return f"{model}, {sum(kinds.values())} CPU device(s)"
    return ", ".join(f"{n} x {kind}" for kind, n in kinds.items()) or "unknown"


def _run_seconds(summary: RunSummary) -> float:
    return sum(float(seconds or 0.0) for seconds in (summary.wall_s, summary.compile_s, summary.eval_s))


def _scores_entry(env: dict, task: str) -> tuple[float | None, float | None, str | None]:
    """(random, reference, source) of `task` in the env's `scores:`; the source defaults to the YAML."""
    refs = refs_from_env(env, task)
    if refs is None:
        return None, None, None
    return (*refs, env["scores"][task].get("source") or f"conf/env/{env.get('name')}.yaml")


def env_rows(col: sw.Collection) -> list[EnvRow]:
    """One row per task of `col`, in the order tasks first appear. A seed of a task found in two
    runs (the same env trained twice into different dirs) is refused: the table would count it twice."""
    rows: dict[str, EnvRow] = {}
    for run in col.runs:
        if not run.env:
            continue  # a job that left no config: named by `jobs_without_env`
        task = task_of(run.env)
        if task not in rows:
            rows[task] = EnvRow(task, [], [], {}, [], 0.0, [], *_scores_entry(run.env, task))
        row = rows[task]
        row.runs.append(run.path)
        if run.status in sw.USED_STATUSES:
            row.wall_s += _run_seconds(run.summary)
            for value, bucket in ((int(run.summary.timesteps), row.steps_per_seed),
                                  (hardware_of(run.path), row.hardware)):
                if value not in bucket:
                    bucket.append(value)
    seen: dict[tuple[str, int], Path] = {}
    for u in col.units:
        if not u.run.env:
            continue
        task = task_of(u.run.env)
        row = rows[task]
        if not u.used:
            row.not_used.append(f"seed {u.seed}: {u.status}" + (f" ({u.reason})" if u.reason else ""))
            continue
        if (task, u.seed) in seen:
            raise ValueError(f"{task} seed {u.seed} is in both {seen[(task, u.seed)]} and {u.run.path}: give the "
                             "dirs of one training of each env")
        seen[(task, u.seed)] = u.run.path
        value = u.values.get(RETURN, math.nan)
        if not math.isnan(value):
            row.seeds.append(u.seed)
            row.returns.append(value)
    for task, row in rows.items():
        env = next(r.env for r in col.runs if r.env and task_of(r.env) == task)
        row.stats = es.mean_summary(row.returns, RETURN, bounds=declared_bounds(env))
    return list(rows.values())


def jobs_without_env(col: sw.Collection) -> list[str]:
    """The jobs that left no config (missing, or failed before training), by experiment and
    status; where another run dir trained that experiment, the note says its row comes from there."""
    trained = {run.experiment for run in col.runs if run.env}
    notes = []
    for run in col.runs:
        if run.env:
            continue
        name = run.overrides.get("experiment") or run.experiment or run.path
        note = f"no row for {name}: {run.status}" + (f" ({run.reason})" if run.reason else "")
        if name in trained:
            note = f"{name}: a sweep job {run.status}" + (f" ({run.reason})" if run.reason else "") \
                + "; its row comes from another run dir given"
        notes.append(note)
    return notes


def normalised_aggregates(rows: Sequence[EnvRow], reps: int = es.DEFAULT_REPS, seed: int = es.DEFAULT_SEED,
                          confidence: float = 0.95) -> dict:
    """rliable's IQM and optimality gap across envs (`rliable_report.across_tasks`) of the scores
    (return - random) / (reference - random) of every row with a reference; the tasks left
    out (no `scores:` entry, or no used seed) are named."""
    scored, _ = rr.normalised({r.task: r.returns for r in rows if r.returns},
                              {r.task: (r.random, r.reference) if r.reference is not None else None for r in rows})
    left_out = [r.task for r in rows if r.task not in scored]
    if not scored:
        return {"tasks": [], "left_out": left_out, "aggregates": {}, "runs_per_task": 0}
    return {**rr.across_tasks(scored, ("iqm", "optimality_gap"), reps, seed, confidence), "left_out": left_out,
            "reps": reps, "seed": seed, "confidence": confidence}


def learning_curves(col: sw.Collection, metric: str = TRAIN_RETURN) -> dict[str, list[tuple[np.ndarray, np.ndarray]]]:
    """task -> the (timesteps, values) series of `metric`, one per used seed, the updates where
    it holds no value (no episode ended) left out."""
    out: dict[str, list] = {}
    cache: dict[Path, dict] = {}
    for u in col.units:
        if not u.used or not u.run.env:
            continue
        path = u.run.path / rundir.METRICS
        if path not in cache:
            cache[path] = rundir.columns_by_seed(path)
        series = cache[path].get(u.seed, {})
        if metric in series:
            kept = ~np.isnan(series[metric])
            if kept.any():
                out.setdefault(task_of(u.run.env), []).append((series["timesteps"][kept], series[metric][kept]))
    return out
