"""The `actions/*` columns of metrics.csv, by the kind of action space that wrote them.

Discrete envs write each action's share of the rollout (`actions/<name>`, plus
`actions/invalid_frac` with a mask); continuous envs write each dimension's mean and std of
the actions the env was given (`actions/mean_<i>`, `actions/std_<i>`; `ppo_lab/ppo/policies.py`).
"""

from __future__ import annotations

import re
from typing import Iterable

INVALID = "actions/invalid_frac"  # a rate, not an action's share
_MOMENT = re.compile(r"^actions/(mean|std)_(\d+)$")


def continuous_dimensions(columns: Iterable[str]) -> list[int]:
    """The action dimensions that have both a mean and a std column, in order."""
    found: dict[int, set[str]] = {}
    for column in columns:
        match = _MOMENT.match(column)
        if match:
            found.setdefault(int(match.group(2)), set()).add(match.group(1))
    return sorted(i for i, kinds in found.items() if kinds == {"mean", "std"})


def discrete_shares(columns: Iterable[str], order: Iterable[str] | None = None) -> list[str]:
    """The columns holding one discrete action's share each: in `order` (the env's action names,
    summary.json's `action_names`: N, NE, E, ... rather than E, N, NE, ...), else sorted."""
    shares = sorted(c for c in columns if c.startswith("actions/") and c != INVALID and not _MOMENT.match(c))
    rank = {f"actions/{name}": i for i, name in enumerate(order or [])}
    return sorted(shares, key=lambda c: (rank.get(c, len(rank)), c))
