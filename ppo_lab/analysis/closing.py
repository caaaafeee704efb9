"""The few lines a run ends with: how it ended, what it learned, where it is, what to run next.

A user reads the end of a run's output, so the end says it: status and why, steps and time
(training's steps/s apart from compile and evaluation), the env's headline metrics as mean
[95% interval] across seeds, the run dir and the next commands. The per-seed values are in
summary.json, which it names instead of printing them. At most about 15 lines.
"""

from __future__ import annotations

import math
from pathlib import Path

from ppo_lab.analysis.health import health_line
from ppo_lab.analysis.intervals import Bounds, mean_summary

# What a run is judged by, in order, when its evaluation has it: the return; the foraging
# world's Goodhart metrics (sampled play, the reference's protocol; docs/goodhart.md).
HEADLINE_EVAL = ("episode_return", "efficiency_per_life", "food_share", "energy_per_1k")
TRAIN_RETURN = "train/mean_episode_return"
SURVIVAL_PLAY = "sampled"


def _spec(*xs: float) -> str:
    """One format for a mean and its interval, by the largest of them: 12.0 [7.0, 17.0]."""
    big = max(abs(x) for x in xs)
    return ",.0f" if big >= 1000 else ".1f" if big >= 10 else ".3f"


def across_seeds(values: list, metric: str, bounds: Bounds = {}) -> str:  # noqa: B006 - read only
    """`mean [low, high]` across seeds, the interval `ppo-lab aggregate` gives the same values of
    `metric` (`intervals.mean_summary`: docs/statistics.md), or the one value with one seed."""
    xs = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not xs:
        return "n/a"
    s = mean_summary(xs, metric, bounds=bounds)
    if len(xs) == 1:
        return f"{format(s['mean'], _spec(s['mean']))} (1 seed: no interval)"
    spec = _spec(s["mean"], s["ci_low"], s["ci_high"])
    return f"{format(s['mean'], spec)} [{format(s['ci_low'], spec)}, {format(s['ci_high'], spec)}]"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _time_line(summary: dict) -> str:
    parts = [f"time: {_duration(summary.get('wall_s'))} training"]
    if summary.get("sps"):
        parts[0] += f" at {summary['sps']:,.0f} steps/s (all seeds)"
    apart = [f"{name} {_duration(summary.get(key))}" for name, key in (("compile", "compile_s"), ("evaluation", "eval_s"))
             if summary.get(key) is not None]
    return parts[0] + (f"; apart: {', '.join(apart)}" if apart else "")


def closing_lines(summary: dict, run_dir: Path, *, eval_mode: str, resume_command: str | None,
                  results_file: str = "summary.json", bounds: Bounds = {}) -> list[str]:  # noqa: B006 - read only
    """The closing summary of a finished, stopped or failed run, as lines to print; `bounds`:
    the env's declared metric bounds (`intervals.declared_bounds`)."""
    status, reason = summary.get("status", "?"), summary.get("stop_reason") or ""
    seeds = summary.get("seeds") or []
    updates, total = summary.get("updates", 0), summary.get("total_updates") or summary.get("updates", 0)
    lines = [f"== {status}: {reason} ==".replace(": ==", " =="),
             f"steps: {summary.get('timesteps', 0):,} per seed x {len(seeds)} seed(s) ({updates} of {total} updates)",
             _time_line(summary)]
    evaluated = summary.get("eval") or {}
    shown = [name for name in HEADLINE_EVAL if any(v is not None for v in evaluated.get(name) or [])]
    if shown:
        lines.append("evaluation, mean [95% interval] across seeds:")
        # The episodes play as eval.deterministic says; the survival protocol's metrics are
        # its sampled play (the reference's protocol; `<name>_greedy` in summary.json).
        lines += [f"  {f'{name} ({eval_mode if name == HEADLINE_EVAL[0] else SURVIVAL_PLAY})':<32} {across_seeds(evaluated[name], f'eval/{name}', bounds)}"
                  for name in shown]
    final = (summary.get("final") or {}).get(TRAIN_RETURN)
    if final and any(v is not None for v in final):
        lines.append(f"  {'training return (last updates)':<32} {across_seeds(final, TRAIN_RETURN, bounds)}")
    diverged = summary.get("diverged") or []
    if diverged and status != "diverged":  # the header names them when every seed did
        lines.append("diverged, left out of the values above: " + ", ".join(
            f"seed {e['seed']} at update {e['update']} ({e['metric']})" for e in diverged))
    health = health_line(summary.get("health") or {})
    if health:
        lines.append(health)
    lines.append(f"run dir: {run_dir}   (per-seed values: {results_file})")
    lines.append(f"next: ppo-lab plots {run_dir}")
    if status == "diverged" and resume_command:  # unchanged, it would diverge again (refused)
        lines.append(f"its checkpoint holds each seed's last finite state; to go on from it, change what diverged "
                     f"(ppo.lr, ppo.max_grad_norm) and add allow_config_change=true: {resume_command}")
    elif status == "timed_out" and resume_command:  # train.duration_min counts across resumes
        lines.append(f"resume with a larger train.duration_min (it counts across resumes): {resume_command}")
    elif status != "completed" and resume_command:
        if status == "failed" and summary.get("error"):  # one line; the traceback is in the run's log file
            lines.append(f"error: {summary['error']}")
        lines.append(f"resume (continues from the last checkpoint): {resume_command}")
    return lines
