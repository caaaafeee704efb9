"""What an experiment is judged by: the headline metric its env declares, and the bounds of its
metrics. The names of the return every run is measured by are spelled here, once.

An env's YAML may declare `metrics.headline` (the foraging world: `true/objective_per_1k`, the
true objective under every reward mode), `metrics.beside` (shown next to it) and
`metrics.bounds` (metric -> [low, high]: CartPole's return lies in [0, 500]; intervals of a
bounded metric use its bounds, `estimators.mean_summary`). Without a headline, a run is judged
by `eval/episode_return`. `ppo-lab aggregate` (rliable.json, the probability of improvement) and
`ppo-lab compare` use the headline of the runs they read unless told another metric: a return
paid under one reward function is not ranked against one paid under another.
"""

from __future__ import annotations

from typing import Iterable, Mapping

RETURN = "eval/episode_return"  # the final evaluation's return
TRAIN_RETURN = "train/mean_episode_return"  # the training rollouts' return, per update
TRAIN_LENGTH = "train/mean_episode_length"
DEFAULT_HEADLINE = RETURN


def declared_headline(env_section: Mapping | None) -> str:
    """The headline metric an env section declares, or DEFAULT_HEADLINE."""
    return ((env_section or {}).get("metrics") or {}).get("headline") or DEFAULT_HEADLINE


def declared_bounds(env_section: Mapping | None) -> dict[str, tuple]:
    """`metrics.bounds` of an env's config section: metric -> (low, high), a bound None when open."""
    raw = ((env_section or {}).get("metrics") or {}).get("bounds") or {}
    return {str(k): (v[0], v[1]) for k, v in raw.items()}


def headline_of(env_sections: Iterable[Mapping]) -> str:
    """The one headline the envs of some runs declare; refused (ValueError) when they declare
    different ones: no single metric then judges them all (name one with --metric)."""
    found = sorted({declared_headline(env) for env in env_sections})
    if len(found) > 1:
        raise ValueError(f"these runs are judged by different metrics ({', '.join(found)}): name one to compare them on")
    return found[0] if found else DEFAULT_HEADLINE


# An evaluation metric's counterpart in metrics.csv, for the learning curves of a headline
# measured only at the end (the evaluation).
TRAINING_COUNTERPART = {RETURN: TRAIN_RETURN, "eval/episode_length": TRAIN_LENGTH}


def headline_curve(headline: str) -> str:
    """The metrics.csv column that draws `headline`'s learning curve."""
    return TRAINING_COUNTERPART.get(headline, headline)
