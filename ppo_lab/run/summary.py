"""summary.json's fields, assembled in one place (docs/architecture.md, "Contracts")."""

from __future__ import annotations

import os
import platform
import resource
from pathlib import Path

import flax
import jax
import optax

import ppo_lab


def slurm_job_id() -> str | None:
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return os.environ.get("SLURM_JOB_ID")


def versions() -> dict:


    return {"jax": jax.__version__, "flax": flax.__version__, "optax": optax.__version__, "ppo_lab": ppo_lab.__version__,
            "python": platform.python_version()}


def peak_host_memory_mb() -> float:
    """This process's peak resident memory. VmHWM, not ru_maxrss: a child process inherits
    its parent's ru_maxrss on Linux, so a launched run would report its launcher's peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def device_memory_mb(devices) -> float | None:
    peaks = []
    for d in devices:
        try:
            stats = d.memory_stats()
        except Exception:  # noqa: BLE001 - backends without memory stats (CPU)
            stats = None
        if stats and "peak_bytes_in_use" in stats:
            peaks.append(stats["peak_bytes_in_use"] / 2**20)
    return float(sum(peaks)) if peaks else None


def start_summary(cfg, comp, devices, resumed, loggers_disabled: list | None = None) -> dict:
    """The summary at start (status running): what the run is, where it resumed from, the
    loggers left out (a store unreachable at start; one that fails mid-run is added then)."""
    return {
        "status": "running", "stop_reason": None, "experiment": cfg.experiment, "env": cfg.env.name,
        "reward": cfg.reward.name, "seeds": cfg.seeds, "updates": resumed.start_update,
        "timesteps": resumed.start_update * comp.ppo.batch_size, "total_updates": comp.trainer.num_updates,
        "wall_s": resumed.prior_wall, "compile_s": None, "eval_s": None, "sps": None, "final": {}, "eval": {},
        "resumed_from": resumed.start_update if resumed.source is not None else None,
        "resume_source": str(resumed.source) if resumed.source is not None and not resumed.own else None,
        "checkpoints_damaged": list(resumed.damaged),  # skipped on resume (moved to checkpoints/damaged/)
        "slurm_job_id": slurm_job_id(), "layout": comp.layout.as_dict(),
        "devices": [str(d) for d in devices[: comp.layout.num_devices]],
        "ppo_effective": {"num_minibatches": comp.ppo.num_minibatches, "update_epochs": comp.ppo.update_epochs},
        "versions": versions(), "error": None, "loggers_disabled": list(loggers_disabled or []),
        "diverged": [],  # seeds whose training went non-finite (run/divergence.py)
        "action_names": list(comp.action_names),  # the env's order of its actions (figures keep it)
    }


def end_fields(*, update: int, batch_size: int, wall_s: float, steps: int, seconds: float, final: dict, devices) -> dict:
    """What the end of a run adds: counters, throughput of this session, final metrics, memory."""
    return {
        "updates": update, "timesteps": update * batch_size, "wall_s": round(wall_s, 3),
        "sps": round(steps / seconds, 1) if seconds > 0 else None, "final": final,
        "peak_host_memory_mb": round(peak_host_memory_mb(), 1), "device_memory_mb": device_memory_mb(devices),
    }
