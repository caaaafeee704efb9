"""The traced hyperparameters of one replica: float32 scalars the chunk takes as arguments.

The keys of `config.TRACED_PPO_KEYS` change no shape, so they need not be constants of the
compiled program: passed per replica (vmapped with the seeds), one program trains a grid of
them. The values are those the trainer computed from Python floats before, worked out here in
float64 and rounded once, so a single run trains to the same bits: a linear schedule
`start + (end - start) * progress` keeps its float64 difference (`*_delta`), and GAE's
`gamma * gae_lambda` its float64 product.
"""

from __future__ import annotations

import jax
import numpy as np

from ppo_lab.config import PPOConfig

# The names `of` returns, in a fixed order (a checkpoint never holds them: each cell's config does).
NAMES = ("lr", "lr_delta", "ent_coef", "ent_coef_delta", "clip_eps", "clip_eps_delta", "vf_coef", "max_grad_norm",
         "gamma", "gamma_lambda", "entropy_floor", "entropy_floor_coef")


def of(ppo: PPOConfig) -> dict[str, np.float32]:
    """One replica's hyperparameters (a null entropy floor: 0, unused by the program)."""
    values = {
        "lr": ppo.lr,
        "lr_delta": ppo.lr_final - ppo.lr,
        "ent_coef": ppo.ent_coef_initial,
        "ent_coef_delta": ppo.ent_coef_final - ppo.ent_coef_initial,
        "clip_eps": ppo.clip_eps,
        "clip_eps_delta": ppo.clip_eps_final - ppo.clip_eps,
        "vf_coef": ppo.vf_coef,
        "max_grad_norm": ppo.max_grad_norm,
        "gamma": ppo.gamma,
        "gamma_lambda": ppo.gamma * ppo.gae_lambda,
        "entropy_floor": 0.0 if ppo.entropy_floor is None else ppo.entropy_floor,
        "entropy_floor_coef": ppo.entropy_floor_coef,
    }
    return {name: np.float32(values[name]) for name in NAMES}


def stacked(per_replica: list[PPOConfig]) -> dict[str, np.ndarray]:
    """The hyperparameters of each replica, stacked along a leading replica axis."""
    rows = [of(ppo) for ppo in per_replica]
    return {name: np.stack([row[name] for row in rows]) for name in NAMES}


def replicated(ppo: PPOConfig, num_replicas: int) -> dict[str, np.ndarray]:
    """One run's hyperparameters for each of its replicas (seeds, or one seed's device shares)."""
    return stacked([ppo] * num_replicas)


def sharded(hypers: dict, sharding):
    """Stacked hyperparameters on the devices, laid out as the replicas' state is."""
    return jax.device_put(hypers, sharding)
