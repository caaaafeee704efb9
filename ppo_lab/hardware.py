"""Apply the `hardware` config group. Must run before XLA's backend starts.

XLA reads its flags (the host device count, GPU memory settings) when its backend starts, and
Hydra's `hydra.job.env_set` is applied too late for that, so every entry point calls
`start_jax` (apply, configure, check the devices) before anything starts the backend.
Importing jax, flax or optax does not start it (their modules import at the top everywhere);
importing gymnax or Jumanji does, which is why env adapters are loaded late
(`ppo_lab/parts.py`, `docs/toolchain.md`).
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Mapping

import jax
from jax._src import xla_bridge  # backends_are_initialized: has XLA's backend started yet?

from ppo_lab.config import HardwareConfig, validate_hardware

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class HardwareError(RuntimeError):
    """The devices asked for are not there (and no fallback was allowed)."""


def host_core_count() -> int:
    """Cores this process may use: SLURM's allocation, else the CPU affinity mask."""
    slurm = os.environ.get("SLURM_CPUS_PER_TASK")
    if slurm and slurm.isdigit():
        return max(1, int(slurm))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def resolve_host_devices(hw: HardwareConfig) -> int:
    value = hw.host_devices
    return host_core_count() if value == "auto" else int(value)


def set_xla_flag(name: str, value) -> None:
    """Set one XLA flag for the backend not started yet (replacing any value it had)."""
    flags = re.sub(rf"--{name}=\S+", "", os.environ.get("XLA_FLAGS", "")).split()
    os.environ["XLA_FLAGS"] = " ".join(flags + [f"--{name}={value}"])


def cache_dir(hw: HardwareConfig) -> Path | None:
    path = hw.compilation_cache_dir
    if not path:
        return None
    path = Path(os.path.expanduser(str(path)))
    return path if path.is_absolute() else PROJECT_ROOT / path


_APPLIED: dict | None = None  # what this process's JAX was started with


def _startup_settings(hw: HardwareConfig) -> dict:
    keys = ("platform", "host_devices", "preallocate", "mem_fraction", "deterministic")
    return {k: getattr(hw, k) for k in keys}


def backend_started() -> bool:
    return xla_bridge.backends_are_initialized()


def apply_hardware(hw: HardwareConfig) -> None:
    """Set what XLA reads when its backend starts. Call before anything starts it.

    Several jobs in one process (Hydra's basic launcher) share one JAX: a later job can only
    run with the settings the first one applied, so it is told when it asks for others."""
    global _APPLIED
    wanted = _startup_settings(hw)
    if backend_started():
        if _APPLIED is None:
            log.warning("XLA's backend started before the hardware settings were applied; they may not take effect")
        elif wanted != _APPLIED:
            log.warning("this process's JAX started with %s; %s cannot take effect here (run it in its own process)", _APPLIED, wanted)
        return
    _APPLIED = wanted
    platform = hw.platform
    if platform == "cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"
        jax.config.update("jax_platforms", "cpu")  # jax read JAX_PLATFORMS when it was imported
        # One XLA device per core: a single CPU device does not keep two cores busy with
        # PPO's small ops; sharding seeds over per-core devices does (1.6x on 2 cores).
        set_xla_flag("xla_force_host_platform_device_count", resolve_host_devices(hw))
    else:
        # Leave the choice to JAX and verify afterwards: naming an absent plugin in
        # JAX_PLATFORMS fails with a message about plugins, not about the user's request.
        os.environ.pop("JAX_PLATFORMS", None)
        jax.config.update("jax_platforms", None)
    if hw.deterministic:
        apply_deterministic(platform)
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "true" if hw.preallocate else "false"
    if hw.mem_fraction is not None:
        os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = str(hw.mem_fraction)


# hardware.deterministic=true, per backend: the XLA flags that make its results the same run
# after run. GPU: deterministic kernels only (scatter, reductions), no autotuning (which may
# pick other kernels each run); `exclude_nondeterministic_ops` is implied by the first, named
# so it holds in XLA builds that split the two. CPU and TPU have no such flags: their results
# are deterministic for the same program and layout (docs/reproducibility.md).
DETERMINISTIC_FLAGS = {
    "gpu": {"xla_gpu_deterministic_ops": "true", "xla_gpu_exclude_nondeterministic_ops": "true"},
}


def apply_deterministic(platform: str) -> None:
    for name, value in DETERMINISTIC_FLAGS.get(platform, {}).items():
        set_xla_flag(name, value)
    if platform == "gpu":
        os.environ["TF_CUDNN_DETERMINISTIC"] = "1"  # cuDNN's deterministic algorithms (read by XLA:GPU)


def configure_jax(hw: HardwareConfig) -> None:
    """Settings that go through jax.config (before the first compile)."""
    path = cache_dir(hw)
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", str(path))
        # Cache every compile that takes noticeable time; the default (1 s) skips the
        # small chunk functions of tiny configs that tests and sweeps recompile often.
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def check_devices(hw: HardwareConfig) -> list:
    """Return the local devices, failing clearly if they are not what `hardware` asked for."""
    wanted = hw.platform
    try:
        devices = jax.local_devices()
    except RuntimeError as exc:
        raise HardwareError(f"hardware={wanted}: JAX could not start a backend: {exc}") from exc
    got = devices[0].platform
    if got != wanted:
        message = (
            f"hardware={wanted} was asked for, but JAX found only {got} devices {devices}. "
            f"Use hardware={got}, or allow a fallback explicitly with hardware.allow_fallback=true."
        )
        if not hw.allow_fallback:
            raise HardwareError(message)
        log.warning("FALLBACK: %s Continuing on %s because hardware.allow_fallback=true.", message, got)
    log.info("devices: %d x %s (%s)", len(devices), got, ", ".join(str(d) for d in devices))
    return devices


def start_jax(hw: HardwareConfig | Mapping) -> list:
    """The one start-up every entry point makes: check the `hardware` section, set what XLA
    reads when its backend starts, apply the jax.config settings and return the local devices
    (a HardwareError if they are not what was asked for). Call before anything starts the
    backend (before an env is built)."""
    hw = hw if isinstance(hw, HardwareConfig) else validate_hardware(hw)
    apply_hardware(hw)
    configure_jax(hw)
    return check_devices(hw)
