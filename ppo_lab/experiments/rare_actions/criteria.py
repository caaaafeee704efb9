"""The rare-action tuning spec's criteria of its own, per (run, seed), from metrics.csv.

Beside PPO's generic ones (`ppo_lab.analysis.criteria`: KL, clipping and entropy shares,
length and return gains, final return), the spec asked that rare actions be "used with
judgement". Two numbers per seed say how, each over the last tenth of the updates:

==================================  ===========================================================
`criteria/rare_use`                 `actions/program_frac` (share of actions that are rare
                                    programs)
`criteria/rare_reflex_frac`         `actions/rare_first_step_frac`: the share of rare-action
                                    uses made on the first step the action became valid
                                    (low = judgement, high = reflex)
==================================  ===========================================================

`conf/env/rare_actions.yaml` names `criteria` as `metrics.criteria`; the analysis loads it by
that path (`ppo_lab.parts`), so this module imports no jax.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ppo_lab.analysis.criteria import tenth_mean

RARE_USE_METRIC = "actions/program_frac"
REFLEX_METRIC = "actions/rare_first_step_frac"


def criteria(columns: Mapping[str, np.ndarray]) -> dict[str, float]:
    """The game's criteria of one seed (names without `criteria/`), from its metrics.csv
    columns ordered by update; one whose metric the run did not log is left out."""
    out = {}
    if RARE_USE_METRIC in columns:
        out["rare_use"] = tenth_mean(columns[RARE_USE_METRIC], last=True)
    if REFLEX_METRIC in columns:
        out["rare_reflex_frac"] = tenth_mean(columns[REFLEX_METRIC], last=True)
    return out
