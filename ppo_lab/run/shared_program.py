"""Which runs train as one compiled program: those whose resolved configs differ only in their
seed and traced hyperparameters. Read by the vmap launcher (jax-free, before any job starts)
and by the lifecycle, which refuses cells that do not share one."""

from __future__ import annotations

import json
from typing import Any, Mapping

from ppo_lab.config import nullable_traced_keys, traced_keys


def shared_program_key(resolved: Mapping[str, Any]) -> str:
    """What runs must have in common to train in one compiled program (hydra/launcher=vmap):
    the resolved config (plain dicts, no `hydra`) less `seed` (a seed is a replica's PRNG key)
    and the traced keys, keeping whether a nullable one is null (the program's choice)."""
    rest = {k: v for k, v in resolved.items() if k not in ("seed", "hydra", "tags")}
    ppo = dict(rest.get("ppo") or {})
    switches = {f"{k} (on)": ppo.get(k) is not None for k in nullable_traced_keys()}
    rest["ppo"] = {k: v for k, v in ppo.items() if k not in traced_keys()} | switches
    return json.dumps(rest, sort_keys=True, default=str)
