"""Linear schedules over training, indexed by the update number."""

from __future__ import annotations

from ppo_lab.config import PPOConfig


def linear(start: float, end: float, progress):
    """`start` at progress 0, `end` at progress 1 (progress = update / num_updates)."""
    return start + (end - start) * progress


def learning_rate(ppo: PPOConfig, update, num_updates: int):
    """The learning rate of update `update` (0-based): annealed linearly when `anneal_lr`."""
    return linear(ppo.lr, ppo.lr_final, update / num_updates) if ppo.anneal_lr else ppo.lr


def learning_rate_schedule(ppo: PPOConfig, num_updates: int, steps_per_update: int):
    """`learning_rate` as an optax schedule of the optimiser's step count: one update takes
    `steps_per_update` optimiser steps (epochs x minibatches), all at that update's rate."""
    return lambda count: learning_rate(ppo, count // steps_per_update, num_updates)


def schedule_values(ppo: PPOConfig, update, num_updates: int) -> dict:
    """Entropy coefficient and clip epsilon for update `update` (0-based); the learning rate
    is the optimiser's own schedule (`learning_rate_schedule`)."""
    progress = update / num_updates
    return {
        "ent_coef": linear(ppo.ent_coef_initial, ppo.ent_coef_final, progress),
        "clip_eps": linear(ppo.clip_eps, ppo.clip_eps_final, progress),
    }
