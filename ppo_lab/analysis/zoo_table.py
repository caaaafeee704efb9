"""The zoo table's numbers: one row per preset from the runs (or their records) under some dirs,
and rliable's aggregates across envs on normalised scores.

A row is one preset, the `experiment` a run's config names (`zoo/pendulum`; a run without one:
its env id, `rliable_report.task_of`: `row_name`), whatever dir or job its seeds came from. It holds the
final evaluation return per seed in both plays (`run/evaluate.py`): sampled from the policy,
gymnax-blines' protocol and so the verdict's (`episode_return_sampled`), and greedy beside it
(`episode_return_greedy`), each as its mean with the interval `estimators.mean_summary` gives
and its IQM; the seeds; the steps per seed against the reference's; the wall time (training +
compile + evaluation, summed over the row's runs); the hardware from each run's manifest.json;
the reference (the env YAML's `scores:` entry, `Reference`); whether it was reached: the mean
is at or above the reference; and what the preset says of itself under `tags.zoo`: its
`protocol` (`as gymnax-blines`, or `changed: ...` and how), the seeds that chose its settings
(`tuned_on`) and the preset that runs gymnax-blines' config beside it (`straight_translation`).

Across envs, one row per env counts: the preset, not the straight translation beside it. An
env whose reference is at its ceiling (the `max` its scores entry declares: nothing can pass
it) or at random play's return (within 1% of the way from random to the max) says nothing of
the lab against the reference; the aggregates are given with and without those envs.
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
from ppo_lab.analysis.rliable_report import Reference, task_of
from ppo_lab.judging.headline import RETURN, TRAIN_RETURN, declared_bounds

# The evaluation's plays (run/evaluate.py), the verdict's first: gymnax-blines sampled the policy.
PLAYS = ("sampled", "greedy")
VERDICT_PLAY = PLAYS[0]
# Each seed's return is the evaluation's float32 mean over its episodes, whose last bit can fall
# short: 164 episodes that each return 1 average to 1 - 2**-24. A mean this close (relative to
# the reference, or absolute near 0) to the reference is at it.
FLOAT32_TIE = 4 * float(np.finfo(np.float32).eps)


@dataclass
class ZooRow:
    name: str                          # the preset (the runs' experiment), or the env id
    task: str
    seeds: list[int] = field(default_factory=list)
    returns: dict[str, list[float]] = field(default_factory=lambda: {play: [] for play in PLAYS})
    stats: dict[str, dict] = field(default_factory=dict)  # play -> mean_summary of its returns
    steps_per_seed: list[int] = field(default_factory=list)  # distinct values over the row's runs
    wall_s: float = 0.0                # training + compile + evaluation, summed over the row's runs
    hardware: list[str] = field(default_factory=list)  # distinct, over the row's runs
    ref: Reference | None = None
    protocol: str | None = None        # tags.zoo.protocol: "as gymnax-blines" or "changed: ..."
    tuned_on: str | None = None        # tags.zoo.tuned_on: the seeds (and grids) that chose its settings
    straight_translation: str | None = None  # tags.zoo.straight_translation: the preset beside it
    not_used: list[str] = field(default_factory=list)  # "seed S: status (reason)" of seeds left out

    def reached(self, play: str = VERDICT_PLAY) -> bool | None:
        """The mean of `play`'s returns at or above the reference (equal within `FLOAT32_TIE`);
        None without either."""
        if self.ref is None or not self.returns[play]:
            return None
        mean, reference = self.stats[play]["mean"], self.ref.reference
        return bool(mean >= reference or math.isclose(mean, reference, rel_tol=FLOAT32_TIE, abs_tol=FLOAT32_TIE))


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


def row_name(run: sw.Run) -> str:
    """The preset a run trained (its `experiment`), or its env id where it names none beyond its
    env's (`experiment` defaults to `env.name`)."""
    task = task_of(run.env)
    return run.experiment if run.experiment and run.experiment != run.env.get("name") else task


def _new_row(run: sw.Run, name: str) -> ZooRow:
    task = task_of(run.env)
    tags = run.tags.get("zoo") or {}
    return ZooRow(name, task, ref=Reference.of(run.env, task), protocol=tags.get("protocol"),
                  tuned_on=tags.get("tuned_on"), straight_translation=tags.get("straight_translation"))


def zoo_rows(col: sw.Collection) -> list[ZooRow]:
    """One row per preset of `col`, each env's rows in the order of its env YAML's `scores:`, a
    preset before the straight translation beside it. A seed of a preset found in two runs (the
    same preset trained twice into different dirs) is refused: the table would count it twice."""
    rows: dict[str, ZooRow] = {}
    for run in col.runs:
        if not run.env:
            continue  # a job that left no config: named by `jobs_without_env`
        name = row_name(run)
        if name not in rows:
            rows[name] = _new_row(run, name)
        row = rows[name]
        if run.status in sw.USED_STATUSES:
            row.wall_s += sum(float(s or 0.0) for s in (run.summary.wall_s, run.summary.compile_s, run.summary.eval_s))
            for value, bucket in ((int(run.summary.timesteps), row.steps_per_seed),
                                  (hardware_of(run.path), row.hardware)):
                if value not in bucket:
                    bucket.append(value)
    seen: dict[tuple[str, int], Path] = {}
    for u in col.units:
        if not u.run.env:
            continue
        row = rows[row_name(u.run)]
        if not u.used:
            row.not_used.append(f"seed {u.seed}: {u.status}" + (f" ({u.reason})" if u.reason else ""))
            continue
        if (row.name, u.seed) in seen:
            raise ValueError(f"{row.name} seed {u.seed} is in both {seen[(row.name, u.seed)]} and {u.run.path}: give "
                             "the dirs of one training of each preset")
        seen[(row.name, u.seed)] = u.run.path
        row.seeds.append(u.seed)
        for play in PLAYS:
            row.returns[play].append(u.values.get(f"{RETURN}_{play}", math.nan))
    for row in rows.values():
        env = next(r.env for r in col.runs if r.env and row_name(r) == row.name)
        for play in PLAYS:
            row.returns[play] = [v for v in row.returns[play] if not math.isnan(v)]
            row.stats[play] = es.mean_summary(row.returns[play], f"{RETURN}_{play}", bounds=declared_bounds(env))
    return _in_table_order(list(rows.values()), col)


def _in_table_order(rows: list[ZooRow], col: sw.Collection) -> list[ZooRow]:
    order = {}
    for run in col.runs:
        for task in (run.env.get("scores") or {}) if run.env else ():
            order.setdefault(task, len(order))
    translations = {r.straight_translation for r in rows}
    first_seen = {r.name: i for i, r in enumerate(rows)}
    return sorted(rows, key=lambda r: (order.get(r.task, len(order)), r.name in translations, first_seen[r.name]))


def compared_rows(rows: Sequence[ZooRow]) -> list[ZooRow]:
    """The rows that stand for their env across envs: every row but the straight translations
    beside a preset. Two such rows of one env are refused (which would stand for it?)."""
    translations = {r.straight_translation for r in rows if r.straight_translation}
    kept = [r for r in rows if r.name not in translations]
    by_task: dict[str, str] = {}
    for r in kept:
        if r.task in by_task:
            raise ValueError(f"{r.task} has two presets, {by_task[r.task]} and {r.name}: give one of them (or name "
                             "the other as its tags.zoo.straight_translation)")
        by_task[r.task] = r.name
    return kept


def left_out(rows: Sequence[ZooRow]) -> dict[str, str]:
    """task -> why its reference says nothing (`Reference.uninformative`), for the rows that have one."""
    return {r.task: why for r in rows if r.ref is not None and (why := r.ref.uninformative)}


def normalised_aggregates(rows: Sequence[ZooRow], play: str = VERDICT_PLAY, leave_out: Sequence[str] = (),
                          reps: int = es.DEFAULT_REPS, seed: int = es.DEFAULT_SEED, confidence: float = 0.95) -> dict:
    """rliable's IQM and optimality gap across envs (`rliable_report.across_tasks`) of the
    scores (return - random) / (reference - random) of `play`'s returns, one row per env
    (`compared_rows`), the tasks in `leave_out` left out; the tasks that could not count (no
    reference, or no used seed) are named under `unscored`."""
    rows = [r for r in compared_rows(rows) if r.task not in leave_out]
    scored = rr.normalised({r.task: r.returns[play] for r in rows if r.returns[play]},
                           {r.task: (r.ref.random, r.ref.reference) if r.ref else None for r in rows})
    unscored = [r.task for r in rows if r.task not in scored]
    if not scored:
        return {"tasks": [], "unscored": unscored, "aggregates": {}, "runs_per_task": 0}
    return {**rr.across_tasks(scored, ("iqm", "optimality_gap"), reps, seed, confidence), "unscored": unscored,
            "reps": reps, "seed": seed, "confidence": confidence}


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


def learning_curves(col: sw.Collection, rows: Sequence[ZooRow], metric: str = TRAIN_RETURN) -> dict[str, dict[str, list]]:
    """task -> row name -> the (timesteps, values) series of `metric`, one per used seed, the
    updates where it holds no value (no episode ended) left out; tasks in the order of `rows`."""
    found: dict[str, dict[str, list]] = {}
    for (task, name), series in sw.read_metric_curves(
            col, metric, key=lambda u: (task_of(u.run.env), row_name(u.run)) if u.run.env else None).items():
        found.setdefault(task, {})[name] = series
    return {task: found[task] for task in dict.fromkeys(r.task for r in rows) if task in found}
