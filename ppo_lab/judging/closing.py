"""The few lines a run ends with: how it ended, what it learned, where it is, what to run next.

A user reads the end of a run's output, so the end says it: status and why, steps and time
(training's steps/s apart from compile and evaluation), the env's headline metric first
(judging/headline.py: the foraging world's true objective) and the metrics it declares beside
it, as mean [95% interval] across seeds with the interval's method named (`ppo-lab aggregate`'s
interval: `estimators.mean_summary`) and fewer than 5 seeds marked as aggregate marks them, the
run dir and the next commands. Where the env
declares a headline other than the return, the return is labelled `paid reward (<mode>)`: what
the reward mode paid, not what the run is judged by. A population (`pbt.*`) speaks of members,
which copy each other and are no independent seeds: its size, the best member's fitness,
hyperparameters and lineage, how many exploit steps copied, and the best member's values with
the members' range (no interval). The per-seed values are in summary.json, which it names
instead of printing them. At most about 15 lines.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping

from ppo_lab.estimators import ANDERSON, Bounds, mean_summary, metric_range, small_sample_warning
from ppo_lab.judging.headline import DEFAULT_HEADLINE, RETURN, TRAIN_RETURN, declared_bounds, declared_headline
from ppo_lab.judging.health import diverged_where, health_line
from ppo_lab.judging.metric_names import label
from ppo_lab.judging.reward_modes import paid_label
from ppo_lab.judging.tables import interval
from ppo_lab.rundir.run_summary import RunSummary

NAME_WIDTH = 32  # the column of the values' names (wider where a name is longer)


def _spec(*xs: float) -> str:
    """One format for a mean and its interval, by the largest of them: 12.0 [7.0, 17.0]."""
    big = max(abs(x) for x in xs)
    return ",.0f" if big >= 1000 else ".1f" if big >= 10 else ".3f"


def method_words(method: str, metric: str, bounds: Bounds = {}) -> str:  # noqa: B006 - read only
    """The interval's method as a reader reads it: `Student t`, `Anderson, in [0, 500]`."""
    if method != ANDERSON:
        return "Student t"
    low, high = metric_range(metric, bounds)
    return f"Anderson, in [{low:g}, {high:g}]"


def across_seeds(values: list, metric: str, bounds: Bounds = {},  # noqa: B006 - read only
                 one_seed: str = " (1 seed: no interval)") -> str:
    """`mean [low, high] (method)` across seeds, the interval `ppo-lab aggregate` gives the same
    values of `metric` (`estimators.mean_summary`: docs/statistics.md), or the one value and
    `one_seed` with one seed."""
    xs = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not xs:
        return "n/a"
    s = mean_summary(xs, metric, bounds=bounds)
    if len(xs) == 1:
        return interval(s["mean"], s["ci_low"], s["ci_high"], spec=_spec(s["mean"]), missing=one_seed)
    text = interval(s["mean"], s["ci_low"], s["ci_high"], spec=_spec(s["mean"], s["ci_low"], s["ci_high"]),
                    missing=" [no interval]")
    return f"{text} ({method_words(s['ci_method'], metric, bounds)})"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _time_line(summary: RunSummary) -> str:
    parts = [f"time: {_duration(summary.wall_s)} training"]
    if summary.sps:
        parts[0] += f" at {summary.sps:,.0f} steps/s (all seeds)"
    apart = [f"{name} {_duration(seconds)}" for name, seconds in (("compile", summary.compile_s), ("evaluation", summary.eval_s))
             if seconds is not None]
    return parts[0] + (f"; apart: {', '.join(apart)}" if apart else "")


def _values(summary: RunSummary, metric: str) -> list:
    """The per-seed values of `metric` (`RunSummary.values`); [] when the run has none."""
    values = summary.values(metric)
    return list(values) if values and any(v is not None for v in values) else []


def _judged_lines(summary: RunSummary, env: Mapping, eval_mode: str, bounds: Bounds, row) -> list[str]:
    """What the run is judged by: the env's headline first, its beside metrics, then the return
    as what the mode paid. `row(name, values, metric)`: one line's (name, text)."""
    headline = declared_headline(env)
    mode = summary.reward or "default"
    lines = []
    if values := _values(summary, headline):
        lines.append(row(f"{label(headline)} (headline{'' if headline.startswith('eval/') else ', last updates'})", values, headline))
    for metric in ((env.get("metrics") or {}).get("beside") or []):
        if values := _values(summary, metric):
            lines.append(row(label(metric), values, metric))
    for metric, play in ((RETURN, eval_mode), (TRAIN_RETURN, "training, last updates")):
        if values := _values(summary, metric):
            lines.append(row(f"{paid_label(mode)}, {play}", values, metric))
    return lines


def _evaluation_lines(summary: RunSummary, env: Mapping | None, eval_mode: str, bounds: Bounds, row) -> list[str]:
    """The run's values: the env's headline and beside metrics where it declares a headline,
    else the evaluation's return, in the play eval.deterministic says and then the other
    (run/evaluate.py plays both)."""
    if declared_headline(env) != DEFAULT_HEADLINE:
        return _judged_lines(summary, env or {}, eval_mode, bounds, row)
    name = RETURN.removeprefix("eval/")
    other = "sampled" if eval_mode == "greedy" else "greedy"
    lines = []
    if values := _values(summary, RETURN):
        lines.append(row(f"{name} ({eval_mode})", values, RETURN))
        if values := _values(summary, f"{RETURN}_{other}"):
            lines.append(row(f"{name} ({other})", values, f"{RETURN}_{other}"))
    if final := _values(summary, TRAIN_RETURN):
        lines.append(row("training return (last updates)", final, TRAIN_RETURN))
    return lines


def _population_lines(pbt: dict) -> list[str]:
    """A population's members: size, exploit steps that copied, the best member and its lineage."""
    best = pbt.get("best_member", 0)
    fitness = (pbt.get("fitness") or [None])[best] if best < len(pbt.get("fitness") or []) else None
    hypers = ", ".join(f"{k}={v:.3g}" for k, v in (pbt.get("best_hypers") or {}).items())
    copied = pbt.get("steps_copied")
    lines = [f"population: {pbt.get('population')} members, {pbt.get('steps', 0)} exploit step(s)"
             + (f", {copied} of them copied ({pbt.get('copies', 0)} member copies)" if copied is not None else "")
             + ("" if pbt.get("exploit", True) else " (random search: nothing copied)"),
             f"best member {best}: fitness {'n/a' if fitness is None else format(fitness, _spec(fitness))}"
             + (f" ({pbt['fitness_metric']})" if pbt.get("fitness_metric") else "") + (f"; {hypers}" if hypers else "")]
    segments = pbt.get("lineage") or []
    if segments:
        lines.append("lineage: " + " -> ".join(f"member {s['member']} (updates {s['from_update']}-{s['until_update']})"
                                               for s in segments))
    return lines


def _member_row(best: int):
    """One metric's line for a population: the best member's value and the members' range."""
    def row(name: str, values: list, metric: str) -> str:
        xs = [float(v) for v in values if v is not None and not math.isnan(float(v))]
        own = values[best] if best < len(values) and values[best] is not None else math.nan
        if not xs:
            return name, "n/a"
        spec = _spec(own if own == own else 0.0, *xs)
        return name, f"{format(own, spec)} (best member); members {format(min(xs), spec)} to {format(max(xs), spec)}"
    return row


def closing_lines(summary: RunSummary, run_dir: Path, *, eval_mode: str, resume_command: str | None,
                  results_file: str = "summary.json", bounds: Bounds = {},  # noqa: B006 - read only
                  env: Mapping | None = None) -> list[str]:
    """The closing summary of a finished, stopped or failed run, as lines to print; `env`: the
    run's env section (its declared headline, beside metrics and metric bounds); `bounds`: metric
    bounds besides those it declares (`headline.declared_bounds`)."""
    status, reason = summary.status, summary.stop_reason or ""
    seeds = summary.seeds
    bounds = {**declared_bounds(env), **bounds}
    updates, total = summary.updates, summary.total_updates or summary.updates
    pbt = summary.pbt
    unit = "member" if pbt else "seed"
    lines = [f"== {status}: {reason} ==".replace(": ==", " =="),
             f"steps: {summary.timesteps:,} per {unit} x {len(seeds)} {unit}(s) ({updates} of {total} updates)",
             _time_line(summary)]
    diverged = summary.diverged
    small = None
    if pbt:  # members copy each other: no interval across them
        lines += _population_lines(pbt)
        values = _evaluation_lines(summary, env, eval_mode, bounds, _member_row(pbt.get("best_member", 0)))
        header = "results of the best member, and the members' range (copies of each other: no interval):"
    else:
        values = _evaluation_lines(summary, env, eval_mode, bounds,
                                   lambda name, xs, metric: (name, across_seeds(xs, metric, bounds)))
        n = len(seeds) - len(diverged)
        header = f"results, mean [95% interval] across {n} seed{'s' if n != 1 else ''}:"
        small = small_sample_warning(n)
    if values:
        width = max(NAME_WIDTH, *(len(name) + 1 for name, _ in values))
        lines += [header, *(f"  {name:<{width}} {text}" for name, text in values)]
        if small:  # as `ppo-lab aggregate` marks a group of fewer than 5 seeds
            lines.append(f"WARNING {small}")
    if diverged and status != "diverged":  # the header names them when every seed did
        lines.append(f"diverged, left out of the values above: {diverged_where(diverged)}")
    health = health_line(summary.health)
    if health:
        lines.append(health)
    lines.append(f"run dir: {run_dir}   (per-seed values: {results_file})")
    lines.append(f"next: ppo-lab plots {run_dir}")
    if status == "diverged" and resume_command:  # unchanged, it would diverge again (refused)
        lines.append(f"its checkpoint holds each seed's finite state from before the chunk it diverged in; to go on from it, change what diverged "
                     f"(ppo.lr, ppo.max_grad_norm) and add allow_config_change=true: {resume_command}")
    elif status == "timed_out" and resume_command:  # train.duration_min counts across resumes
        lines.append(f"resume with a larger train.duration_min (it counts across resumes): {resume_command}")
    elif status != "completed" and resume_command:
        if status == "failed" and summary.error:  # one line; the traceback is in the run's log file
            lines.append(f"error: {summary.error}")
        lines.append(f"resume (continues from the last checkpoint): {resume_command}")
    return lines
