"""Divergence: which of a run's seeds (a grid cell's, a population's members) went non-finite.

The chunk reports, per update and replica, whether that update's losses, gradients or learner
state were all finite (`ppo.train.NONFINITE`, one scalar per update, pulled with the metrics
once per chunk: no extra device sync), and does not keep a chunk in which an update was not: a
diverged replica returns to the state it started that chunk from, finite, which is all a
checkpoint of it can ever hold.

On the host a diverged seed stops counting at the first such update: its metrics rows end
there, its `final` and `eval` values are null, summary.json lists it under `diverged` (seed,
first non-finite update, what went non-finite). A run whose every seed diverged ends with
status `diverged` and exit code `EXIT_DIVERGED`; a relaunch of it unchanged is refused
(`RunDiverged`) with the same code. A population's diverged member is replaced at its next
exploit step (run/population.py), and counts again from then on.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ppo_lab import rundir
from ppo_lab.judging.health import diverged_where
from ppo_lab.ppo.train import NONFINITE, NONFINITE_GRADIENT, NONFINITE_LOSS, NONFINITE_STATE
from ppo_lab.run.resume import ResumeError

# launch.py's exit code for a run whose every seed diverged, or a relaunch of one: not 1 (a
# crash, an uncaught error) nor 2 (a refused command line, config or resume).
EXIT_DIVERGED = 3
STATUS = "diverged"
# The loss metrics, in the order a non-finite one is named (the first non-finite of them).
LOSS_METRICS = ("train/pg_loss", "train/vf_loss", "train/entropy", "train/approx_kl", "train/clip_frac")


class RunDiverged(ResumeError):
    """A relaunch of a run whose every seed diverged, with the config it diverged under."""


def what_went_nonfinite(code: float, metrics: dict, replica: int, k: int) -> str:
    """The name of what went non-finite first in update `k` of `replica`: a loss metric, the
    gradients, or the parameters (a learner state that is no longer finite)."""
    if int(code) & NONFINITE_LOSS:
        for name in LOSS_METRICS:
            if name in metrics and not math.isfinite(float(metrics[name][replica, k])):
                return name
        return "train/loss"
    if int(code) & NONFINITE_GRADIENT:
        return "gradients"
    if int(code) & NONFINITE_STATE:
        return "parameters"
    return "train/loss"


class Divergence:
    """One run's diverged seeds: `observe` each chunk's flags, `keep` only the rows that count."""

    def __init__(self, seeds: list[int]):
        self.seeds = list(seeds)
        self.diverged: dict[int, dict] = {}  # seed -> {"seed", "update", "metric"}

    def observe(self, metrics: dict, first_update: int, count: int, replicas: list[int]) -> list[dict]:
        """Take the chunk's `NONFINITE` flags out of `metrics` ([replica, K]); `replicas[i]` is
        seed i's replica. Returns the seeds newly diverged in this chunk."""
        codes = np.asarray(metrics.pop(NONFINITE))
        new = []
        for replica, seed in zip(replicas, self.seeds):
            if seed in self.diverged:
                continue
            bad = np.flatnonzero(codes[replica, :count] != 0)
            if bad.size:
                k = int(bad[0])
                entry = {"seed": seed, "update": first_update + k + 1,
                         "metric": what_went_nonfinite(codes[replica, k], metrics, replica, k)}
                self.diverged[seed] = entry
                new.append(entry)
        return new

    def keep(self, rows: list[dict]) -> list[dict]:
        """The rows that count: a diverged seed's end at its first non-finite update."""
        return [r for r in rows if r["seed"] not in self.diverged or r["update"] <= self.diverged[r["seed"]]["update"]]

    def forget(self, seed: int) -> None:
        """`seed` trains a healthy state again (a population member that copied another)."""
        self.diverged.pop(seed, None)

    @property
    def everyone(self) -> bool:
        return bool(self.seeds) and all(seed in self.diverged for seed in self.seeds)

    def listed(self) -> list[dict]:
        """summary.json's `diverged`: one entry per diverged seed, in the order of `seeds`."""
        return [self.diverged[s] for s in self.seeds if s in self.diverged]

    def masked(self, per_seed: dict) -> dict:
        """`final` or `eval` (metric -> one value per seed) with a diverged seed's values null:
        it stops counting (aggregation lists it as diverged instead)."""
        return {name: [None if seed in self.diverged else value for seed, value in zip(self.seeds, values)]
                for name, values in per_seed.items()}


def diverged_reason(entries: list[dict], ppo) -> str:
    """The one line a run whose every seed diverged ends with: what went non-finite where,
    and what usually helps, with the values this run used."""
    return (f"training went non-finite in every seed: {diverged_where(entries)}; a lower ppo.lr (this run: {ppo.lr:g}) "
            f"or ppo.max_grad_norm (this run: {ppo.max_grad_norm:g}) usually helps")


def check_relaunch(plan, run_dir: Path) -> None:
    """A relaunch into a run dir whose run diverged, with no change of the config (`plan`,
    run/resume.py), would only diverge again: RunDiverged, naming where it diverged and how to
    go on. With a changed key (allow_config_change=true) it resumes from the last checkpoint."""
    if plan.changes:
        return
    summary = rundir.read_summary(run_dir)
    if summary is None or summary.status != STATUS:
        return
    entries = summary.diverged
    raise RunDiverged(
        f"the run in {run_dir} diverged ({diverged_where(entries) or 'every seed'}); relaunching it unchanged would diverge "
        f"again. Change what made it diverge (a lower ppo.lr or ppo.max_grad_norm) and add allow_config_change=true "
        f"to go on from its last finite checkpoint, or use a new run directory")
