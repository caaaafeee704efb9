"""Linear schedules over training, indexed by the update number."""

from __future__ import annotations

from ppo_lab.config import PPOConfig


def linear(start: float, end: float, progress):
    """`start` at progress 0, `end` at progress 1 (progress = update / num_updates)."""
    return start + (end - start) * progress


def schedule_values(ppo: PPOConfig, update, num_updates: int) -> dict:
    """Learning rate, entropy coefficient and clip epsilon for update `update` (0-based)."""
    progress = update / num_updates
    lr = linear(ppo.lr, ppo.lr_final, progress) if ppo.anneal_lr else ppo.lr
    return {
        "learning_rate": lr,
        "ent_coef": linear(ppo.ent_coef_initial, ppo.ent_coef_final, progress),
        "clip_eps": linear(ppo.clip_eps, ppo.clip_eps_final, progress),
    }
