"""Training-health warnings: entropy collapse, large KL, large clip fraction."""

from __future__ import annotations

import logging
import math

from ppo_lab.config import HealthConfig

log = logging.getLogger(__name__)


def health_warnings(rows: list[dict], health: HealthConfig) -> list[str]:
    """One message per problem and seed over a chunk's rows (not one per update)."""
    found: dict[tuple[str, int], tuple[int, float]] = {}

    def note(kind: str, row: dict, value: float) -> None:
        key = (kind, row["seed"])
        count, worst = found.get(key, (0, value))
        found[key] = (count + 1, max(worst, value) if kind != "entropy collapse" else min(worst, value))

    for row in rows:
        entropy, kl, clip = (row.get(k, math.nan) for k in ("train/entropy", "train/approx_kl", "train/clip_frac"))
        if entropy < health.entropy_min and kl < health.kl_min:
            note("entropy collapse", row, entropy)
        if kl > health.kl_max:
            note("approx_kl high", row, kl)
        if clip > health.clip_frac_max:
            note("clip_frac high", row, clip)
    limits = {
        "entropy collapse": f"entropy < {health.entropy_min} with approx_kl < {health.kl_min}",
        "approx_kl high": f"approx_kl > {health.kl_max}",
        "clip_frac high": f"clip_frac > {health.clip_frac_max}",
    }
    return [
        f"health: {kind} on seed {seed} in {count} update(s) (worst {worst:.4g}; {limits[kind]})"
        for (kind, seed), (count, worst) in sorted(found.items())
    ]


class HealthWarnings:
    """The health warnings as a recorder: logged once per chunk."""

    def __init__(self, health: HealthConfig):
        self.health = health

    def start(self, ctx) -> None:
        pass

    def log_rows(self, rows: list[dict]) -> None:
        for message in health_warnings(rows, self.health):
            log.warning(message)

    def finish(self, summary: dict) -> None:
        pass
