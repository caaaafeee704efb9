"""Training-health warnings: entropy collapse, large KL, large clip fraction; and how the seeds
that went non-finite are named (summary.json's `diverged`)."""

from __future__ import annotations

import logging
import math
from pathlib import Path

from ppo_lab import rundir
from ppo_lab.config import HealthConfig
from ppo_lab.rundir.run_summary import RunSummary

log = logging.getLogger(__name__)


def diverged_where(entries: list[dict], unit: str = "seed") -> str:
    """`seed 0 at update 3 (train/vf_loss), seed 1 at update 5 (parameters)`: summary.json's
    `diverged` entries as one line."""
    return ", ".join(f"{unit} {e['seed']} at update {e['update']} ({e['metric']})" for e in entries)


def health_findings(rows: list[dict], health: HealthConfig) -> dict[tuple[str, int], list[tuple[int, float]]]:
    """Per (problem, seed) over `rows`: (update, the value that showed it) of each row it was seen in, in order."""
    found: dict[tuple[str, int], list[tuple[int, float]]] = {}
    for row in rows:
        entropy, kl, clip = (row.get(k, math.nan) for k in ("train/entropy", "train/approx_kl", "train/clip_frac"))
        for kind, value, seen in (("entropy collapse", entropy, entropy < health.entropy_min and kl < health.kl_min),
                                  ("approx_kl high", kl, kl > health.kl_max),
                                  ("clip_frac high", clip, clip > health.clip_frac_max)):
            if seen:
                found.setdefault((kind, row["seed"]), []).append((int(row["update"]), value))
    return found


def health_messages(rows: list[dict], health: HealthConfig) -> dict[tuple[str, int], str]:
    """(problem, seed) -> its message over `rows`, in that order: one per problem and seed over a
    chunk's rows, not one per update."""
    limits = {
        "entropy collapse": f"entropy < {health.entropy_min} with approx_kl < {health.kl_min}",
        "approx_kl high": f"approx_kl > {health.kl_max}",
        "clip_frac high": f"clip_frac > {health.clip_frac_max}",
    }
    messages = {}
    for (kind, seed), seen in sorted(health_findings(rows, health).items()):
        worst = (min if kind == "entropy collapse" else max)(value for _, value in seen)
        messages[kind, seed] = f"health: {kind} on seed {seed} in {len(seen)} update(s) (worst {worst:.4g}; {limits[kind]})"
    return messages


def obs_cast_message(rows: list[dict], dtype_name: str) -> str | None:
    """The one-time note that storing observations in `ppo.rollout_obs_dtype` lost information
    (rows' `train/obs_cast_lossy_*`, ppo/obs_storage.py), naming the values seen; None if not."""
    lossy = [r for r in rows if r.get("train/obs_cast_lossy_frac", 0.0) > 0]
    if not lossy:
        return None
    lowest = min(r["train/obs_cast_lossy_min"] for r in lossy)
    highest = max(r["train/obs_cast_lossy_max"] for r in lossy)
    frac = max(r["train/obs_cast_lossy_frac"] for r in lossy)
    values = f"{lowest:.6g}" if lowest == highest else f"from {lowest:.6g} to {highest:.6g}"
    return (f"ppo.rollout_obs_dtype={dtype_name} loses information: observation values {values} "
            f"(up to {frac:.2%} of the policy's observation values in an update) change when stored "
            f"for the update (uint8 truncates toward zero); the policy acts on the float values")


def seen_in_summary(seen: dict, found: dict[tuple[str, int], list[tuple[int, float]]]) -> dict:
    """summary.json's `health` with `found` (`health_findings`) added: per problem, its seeds,
    the first and last update it was seen in, and in how many (seed, update) rows."""
    for (kind, seed), hits in found.items():
        updates = [update for update, _ in hits]
        entry = seen.setdefault(kind, {"seeds": [], "first_update": updates[0], "last_update": updates[-1], "rows": 0})
        entry["seeds"] = sorted(set(entry["seeds"]) | {seed})
        entry["first_update"] = min(entry["first_update"], updates[0])
        entry["last_update"] = max(entry["last_update"], updates[-1])
        entry["rows"] += len(updates)
    return seen


def health_line(seen: dict) -> str | None:
    """The closing summary's line of what the health checks saw (summary.json `health`), or None."""
    if not seen:
        return None
    parts = []
    for kind, e in sorted(seen.items()):
        seeds = ", ".join(map(str, e["seeds"]))
        updates = (f"update {e['first_update']}" if e["first_update"] == e["last_update"]
                   else f"updates {e['first_update']}-{e['last_update']}")
        parts.append(f"{kind} on seed{'s' if len(e['seeds']) > 1 else ''} {seeds} ({updates}, {e['rows']} row(s))")
    return "health warnings: " + "; ".join(parts)


class HealthWarnings:
    """The health warnings as a recorder. Each problem of a seed is warned once, when it starts,
    and not again until it has cleared (a chunk whose last row of that seed is without it; said
    at info level): a solved task's entropy stays collapsed for the rest of the run. A lossy
    observation cast is noted once a run. summary.json's `health` counts every row metrics.csv
    holds: a resumed run's kept rows too."""

    def __init__(self, health: HealthConfig):
        self.health = health
        self.obs_dtype, self.cast_noted = None, False
        self.summary = RunSummary()
        self.ongoing: set[tuple[str, int]] = set()  # (problem, seed) warned and not cleared since

    def start(self, ctx) -> None:
        self.obs_dtype = ctx.cfg.ppo.rollout_obs_dtype
        self.summary = ctx.summary  # the run's own summary: what SummaryFile writes at the end
        metrics = Path(ctx.run_dir) / rundir.METRICS  # cut back to the checkpoint a resumed run starts from
        found = health_findings(rundir.read_metrics(metrics) if metrics.exists() else [], self.health)
        self.summary.health = seen_in_summary({}, found) if found else {}

    def log_rows(self, rows: list[dict]) -> None:
        found = health_findings(rows, self.health)
        if found:
            self.summary.health = seen_in_summary(self.summary.health, found)
        for key, message in health_messages(rows, self.health).items():
            if key not in self.ongoing:
                log.warning("%s; not repeated until it clears", message)
        last = {}
        for row in rows:
            last[row["seed"]] = max(last.get(row["seed"], 0), int(row["update"]))
        still = {key for key, seen in found.items() if seen[-1][0] == last[key[1]]}
        for kind, seed in sorted(self.ongoing - still):
            if seed in last:  # a seed without rows (diverged) has not cleared
                log.info("health: %s on seed %d cleared by update %d", kind, seed, last[seed])
        self.ongoing = still | {key for key in self.ongoing if key[1] not in last}
        if not self.cast_noted:
            message = obs_cast_message(rows, self.obs_dtype)
            if message is not None:
                log.warning(message)
                self.cast_noted = True

    def finish(self, summary: RunSummary) -> None:
        pass
