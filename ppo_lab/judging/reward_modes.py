"""Returns paid under different reward functions are not ranked against each other.

An episode's return is the sum of what the run's reward function paid. Runs of one env whose
`reward` sections differ (a sweep over the foraging world's reward modes) measured their returns
with different rulers: the proxy mode's 209 and ground_truth's 131 are not the same quantity, and
ranking them says nothing about which agent is better. Such a return is shown per mode, labelled
`paid reward (<mode>)`, and every comparison across modes (rliable's aggregates, P(A > B),
`ppo-lab compare`) is made on the env's headline metric instead (ppo_lab/judging/headline.py), or refused
with `REFUSED` saying why.

The reward function of a run is its config's `reward` section without its `name`: two modes
that pay alike under different names compare. Runs of different envs are different tasks and
are never pooled anyway (rliable normalises per task).
"""

from __future__ import annotations

import json
from typing import Iterable, Mapping

from ppo_lab.estimators import play_of
from ppo_lab.judging.headline import headline_of

RETURN_LEAVES = ("episode_return", "mean_episode_return")


def is_paid_return(metric: str) -> bool:
    """Whether `metric` is an episode return (training's, or the evaluation's sampled or greedy)."""
    return play_of(metric.rsplit("/", 1)[-1])[0] in RETURN_LEAVES


def reward_function(reward_section: Mapping | None) -> str:
    """A key for what a reward section pays: its keys other than the name, in order."""
    return json.dumps({k: v for k, v in (reward_section or {}).items() if k != "name"}, sort_keys=True, default=str)


def mode_of(reward_section: Mapping | None) -> str:
    return str((reward_section or {}).get("name") or "default")


def paid_label(mode: str) -> str:
    return f"paid reward ({mode})"


def differing_modes(runs: Iterable) -> dict[str, str]:
    """The reward modes of `runs` (anything with `.env` and `.reward` config sections), by the
    reward function they pay, when the runs of one env pay under more than one; else {}.
    Returns reward function key -> its mode's name (names that pay differently under one name
    get the function's keys beside it)."""
    by_env: dict[str, dict[str, str]] = {}
    for run in runs:
        by_env.setdefault(str((run.env or {}).get("name")), {})[reward_function(run.reward)] = mode_of(run.reward)
    functions = {f: m for modes in by_env.values() if len(modes) > 1 for f, m in modes.items()}
    names = list(functions.values())
    return {f: (m if names.count(m) == 1 else f"{m} {f}") for f, m in functions.items()}


def judged_by(runs: list, metric: str | None, instead: str | None = None) -> tuple[str | None, str | None, bool]:
    """(the metric a comparison of `runs` is judged by, why none or why not `metric`, whether the
    runs were paid under different reward functions): `metric` if named, else the headline their
    envs declare (none, and why, where they declare different ones). A return paid under
    different reward functions is refused, and `instead` judged (aggregate's headline; never
    itself such a return; None: refused outright, as `ppo-lab compare` refuses one it is given)."""
    modes = differing_modes(runs)
    try:
        metric = metric or headline_of(run.env for run in runs if run.env)
    except ValueError as exc:
        return None, f"{exc} (--metric)", bool(modes)
    if not (modes and is_paid_return(metric)):
        return metric, None, bool(modes)
    instead = None if instead is None or is_paid_return(instead) else instead
    text = (f"{metric} is the reward each run was paid under its own reward function "
            f"({', '.join(sorted(set(modes.values())))}): these returns are not comparable across modes")
    return instead, text + (f"; comparing on the headline metric {instead} instead" if instead else
                            "; declare the env's headline metric (env.metrics.headline) or name one to compare on"), True


def modes_by_group(col) -> dict[str, str]:
    """group -> the reward mode its runs were paid under, when the runs of a collection
    (`analysis/sweep.Collection`) pay under different reward functions; else {}."""
    runs = list({id(u.run): u.run for u in col.units}.values())
    modes = differing_modes(runs)
    if not modes:
        return {}
    return {u.group: modes[reward_function(u.run.reward)] for u in col.units if reward_function(u.run.reward) in modes}
