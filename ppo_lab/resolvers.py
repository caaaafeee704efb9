"""ppo_lab's OmegaConf resolvers, registered on import.

``${ppo_lab.scaled:BASE,F1,F2,...}`` gives the sweep string "BASE*F1,BASE*F2", e.g.
``ppo.lr: ${ppo_lab.scaled:${ppo.lr},1,0.5}`` sweeps an experiment's own learning rate and its
half (``sweeps/tuning.yaml``). Hydra imports the sweep callback (which imports this) before
it builds the sweeper; the analysis imports this to replay a sweep's job list. Imports
nothing of ppo_lab, so both may.
"""

from __future__ import annotations

from omegaconf import OmegaConf


def scaled(base, *factors) -> str:
    """`${ppo_lab.scaled:0.001,1,0.5}` -> "0.001,0.0005" (a Hydra sweep over base * factor)."""
    if not factors:
        raise ValueError("ppo_lab.scaled needs a base value and at least one factor")
    return ",".join(repr(float(base) * float(f)) for f in factors)


def register() -> None:
    if not OmegaConf.has_resolver("ppo_lab.scaled"):
        OmegaConf.register_new_resolver("ppo_lab.scaled", scaled)


register()
