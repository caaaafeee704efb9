"""Linear schedules over training, indexed by the update number.

The values come from a replica's traced hyperparameters (`ppo.hypers.Hypers`): each scheduled
key goes from its start to its `_final` value."""

from __future__ import annotations

from ppo_lab.config import PPOConfig
from ppo_lab.ppo.hypers import Hypers


def learning_rate(ppo: PPOConfig, update, num_updates: int, hypers: Hypers):
    """The learning rate of update `update` (0-based): annealed linearly when `anneal_lr`."""
    return hypers.scheduled("lr", update, num_updates) if ppo.anneal_lr else hypers.lr


def learning_rate_schedule(ppo: PPOConfig, num_updates: int, steps_per_update: int, hypers: Hypers):
    """`learning_rate` as an optax schedule of the optimiser's step count: one update takes
    `steps_per_update` optimiser steps (epochs x minibatches), all at that update's rate."""
    return lambda count: learning_rate(ppo, count // steps_per_update, num_updates, hypers)


def schedule_values(ppo: PPOConfig, update, num_updates: int, hypers: Hypers) -> dict:
    """Entropy coefficient and clip epsilon for update `update` (0-based); the learning rate
    is the optimiser's own schedule (`learning_rate_schedule`)."""
    return {"ent_coef": hypers.scheduled("ent_coef", update, num_updates),
            "clip_eps": hypers.scheduled("clip_eps", update, num_updates)}
