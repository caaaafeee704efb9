"""Linear schedules over training, indexed by the update number.

The values come from a replica's traced hyperparameters (ppo/hypers.py; None: the config's
own): `start` and the float64 difference `end - start`, as computed from the config's floats."""

from __future__ import annotations

from ppo_lab.config import PPOConfig
from ppo_lab.ppo import hypers as hyper_values


def linear(start, delta, progress):
    """`start` at progress 0, `start + delta` at progress 1 (progress = update / num_updates)."""
    return start + delta * progress


def learning_rate(ppo: PPOConfig, update, num_updates: int, hypers: dict | None = None):
    """The learning rate of update `update` (0-based): annealed linearly when `anneal_lr`."""
    hypers = hyper_values.of(ppo) if hypers is None else hypers
    return linear(hypers["lr"], hypers["lr_delta"], update / num_updates) if ppo.anneal_lr else hypers["lr"]


def learning_rate_schedule(ppo: PPOConfig, num_updates: int, steps_per_update: int, hypers: dict | None = None):
    """`learning_rate` as an optax schedule of the optimiser's step count: one update takes
    `steps_per_update` optimiser steps (epochs x minibatches), all at that update's rate."""
    return lambda count: learning_rate(ppo, count // steps_per_update, num_updates, hypers)


def schedule_values(ppo: PPOConfig, update, num_updates: int, hypers: dict | None = None) -> dict:
    """Entropy coefficient and clip epsilon for update `update` (0-based); the learning rate
    is the optimiser's own schedule (`learning_rate_schedule`)."""
    hypers = hyper_values.of(ppo) if hypers is None else hypers
    progress = update / num_updates
    return {
        "ent_coef": linear(hypers["ent_coef"], hypers["ent_coef_delta"], progress),
        "clip_eps": linear(hypers["clip_eps"], hypers["clip_eps_delta"], progress),
    }
