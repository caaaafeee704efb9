"""docs/results.md's blocks."""

from __future__ import annotations

import json
from pathlib import Path

from ppo_lab.pages import tables as tb
from ppo_lab.pages.block import Block

PAGE = "docs/results.md"
PENDULUM_PARITY = "docs/continuous_parity_pendulum.json"
# The cases of the Pendulum parity record, as the table names them.
PARITY_SIDES = {
    "purejaxrl": "PureJaxRL",
    "lab_as_purejaxrl": "lab, truncation as PureJaxRL (a time-limit cut ends the episode)",
    "lab": "lab's default (the cut bootstrapped from the final observation)",
}
SCORE = "train/mean_episode_return"  # the parity score: mean return of the last 10% of updates' episodes


def pendulum_parity(root: Path) -> str:
    """Per side, the score's mean across seeds with its interval and each seed's; Welch's test
    of PureJaxRL against the lab when both end the episode at the cut (like for like)."""
    cases = {c["label"]: c for c in json.loads((root / PENDULUM_PARITY).read_text())}
    rows = [[PARITY_SIDES[label], str(cases[label]["seeds"]), tb.mean_ci(cases[label]["score"], SCORE),
             tb.per_seed(cases[label]["score"])] for label in PARITY_SIDES]
    like = tb.welch(cases["purejaxrl"]["score"], cases["lab_as_purejaxrl"]["score"])
    default = tb.welch(cases["purejaxrl"]["score"], cases["lab"]["score"])
    return "\n".join([
        tb.table(["side", "seeds", "score: mean [95% CI]", "per seed"], ["l", "r", "l", "l"], rows), "",
        f"Welch's t-test against PureJaxRL: like for like {like}; the lab's default {default}."])


BLOCKS = (Block("pendulum-parity", PAGE, (PENDULUM_PARITY,), pendulum_parity),)
