"""Fail before running: does the compiled chunk fit in device memory?

XLA's memory analysis of the compiled program (arguments, outputs, temporaries; per device for
a sharded program) is compared with what the device has free, or with the documented cap
`hardware.memory_limit_gb` (which also lets a CPU, whose backend reports no free memory,
trigger the check). When it does not fit, the run stops with the numbers and the settings that
shrink it, instead of a RESOURCE_EXHAUSTED traceback after compiling and starting.
"""

from __future__ import annotations

import logging
import resource
from dataclasses import dataclass
from pathlib import Path

from ppo_lab.config import PRECISIONS

log = logging.getLogger(__name__)

GB = 1e9


class ChunkTooLarge(RuntimeError):
    """The compiled chunk needs more memory than the device has (or the cap allows)."""


@dataclass(frozen=True)
class ChunkMemory:
    argument: int
    output: int
    temp: int
    alias: int  # outputs that reuse argument buffers (donation)

    @property
    def total(self) -> int:
        return self.argument + self.output + self.temp - self.alias

    def describe(self) -> str:
        return (f"{self.total / GB:.3g} GB per device (state in {self.argument / GB:.3g}, out {self.output / GB:.3g}, "
                f"temporaries {self.temp / GB:.3g})")


def chunk_memory(compiled) -> ChunkMemory | None:
    """XLA's memory analysis of a compiled executable (None where the backend has none)."""
    try:
        m = compiled.memory_analysis()
    except Exception:  # noqa: BLE001 - not every backend implements it
        return None
    if m is None:
        return None
    return ChunkMemory(m.argument_size_in_bytes, m.output_size_in_bytes, m.temp_size_in_bytes, m.alias_size_in_bytes)


def _memory_stats(devices) -> list[dict]:
    """Each device's memory statistics, where its backend reports them (not on CPU)."""
    stats = []
    for device in devices:
        try:
            stats.append(device.memory_stats() or {})
        except Exception:  # noqa: BLE001 - backends without memory stats
            pass
    return stats


def device_free_bytes(devices) -> int | None:
    """The least free memory over `devices` (None where the backend reports none, e.g. CPU)."""
    free = [s["bytes_limit"] - s.get("bytes_in_use", 0) for s in _memory_stats(devices) if "bytes_limit" in s]
    return min(free) if free else None


def peak_host_memory_mb() -> float:
    """This process's peak resident memory (summary.json). VmHWM, not ru_maxrss: a child process
    inherits its parent's ru_maxrss on Linux, so a launched run would report its launcher's peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def device_memory_mb(devices) -> float | None:
    """The devices' peak memory in use, summed (summary.json; None where the backend reports none)."""
    peaks = [s["peak_bytes_in_use"] / 2**20 for s in _memory_stats(devices) if "peak_bytes_in_use" in s]
    return float(sum(peaks)) if peaks else None


def check_fits(compiled, devices, limit_gb: float | None, *, num_seeds: int, num_envs: int, num_minibatches: int,
               precision: str = PRECISIONS[0], group_cells: int | None = None) -> ChunkMemory | None:
    """Raise ChunkTooLarge when the compiled chunk will not fit; return its memory otherwise.
    `group_cells`: the chunk trains that many grid cells of `num_seeds` seeds each (run/entry.py)."""
    need = chunk_memory(compiled)
    if need is None:
        return None
    free = device_free_bytes(devices)
    limits = [(limit_gb * GB, f"hardware.memory_limit_gb={limit_gb}")] if limit_gb is not None else []
    if free is not None:
        limits.append((free, f"{free / GB:.3g} GB free on {devices[0]}"))
    log.info("compiled chunk: %s; limit: %s", need.describe(), ", ".join(name for _, name in limits) or "none known")
    over = [(cap, name) for cap, name in limits if need.total > cap]
    if not over:
        return need
    cap, name = min(over)
    if group_cells is None:
        knobs = [f"num_seeds={num_seeds} (memory grows with seeds: fewer per process, or more devices)"]
    else:
        knobs = [f"hydra.launcher.max_replicas (this process trains {group_cells} cells x {num_seeds} seeds = "
                 f"{group_cells * num_seeds} replicas; a smaller cap splits the grid over more processes)"]
    knobs += [f"ppo.num_minibatches={num_minibatches} (more minibatches: smaller activations per gradient step)",
              f"ppo.num_envs={num_envs} (fewer envs: a smaller batch)"]
    if precision == PRECISIONS[0]:
        knobs.append("hardware.precision=bf16 (half-size activations)")
    raise ChunkTooLarge(
        f"the compiled training chunk needs {need.describe()}, more than {name}. "
        f"Settings that shrink it: " + "; ".join(knobs) + "."
    )
