"""Apply the `hardware` config group. Must run before the first `import jax`.

JAX reads its platform and XLA flags when it is imported / its backend starts, and Hydra's
`hydra.job.env_set` is applied too late for that, so every entry point calls `start_jax`
(apply, import, configure, check the devices) before anything imports jax
(`docs/toolchain.md`).
"""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path
from typing import Mapping

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


def resolve_host_devices(hw: Mapping) -> int:
    value = hw.get("host_devices", 1)
    return host_core_count() if value == "auto" else int(value)


def _set_xla_flag(name: str, value) -> None:
    flags = re.sub(rf"--{name}=\S+", "", os.environ.get("XLA_FLAGS", "")).split()
    os.environ["XLA_FLAGS"] = " ".join(flags + [f"--{name}={value}"])


def cache_dir(hw: Mapping) -> Path | None:
    path = hw.get("compilation_cache_dir")
    if not path:
        return None
    path = Path(os.path.expanduser(str(path)))
    return path if path.is_absolute() else PROJECT_ROOT / path


_APPLIED: dict | None = None  # what this process's JAX was started with


def _startup_settings(hw: Mapping) -> dict:
    keys = ("platform", "host_devices", "preallocate", "mem_fraction")
    return {k: hw.get(k) for k in keys}


def apply_hardware(hw: Mapping) -> None:
    """Set the environment variables JAX reads at import. Call before `import jax`.

    Several jobs in one process (Hydra's basic launcher) share one JAX: a later job can only
    run with the settings the first one applied, so it is told when it asks for others."""
    global _APPLIED
    wanted = _startup_settings(hw)
    if "jax" in sys.modules:
        if _APPLIED is None:
            log.warning("jax was imported before the hardware settings were applied; they may not take effect")
        elif wanted != _APPLIED:
            log.warning("this process's JAX started with %s; %s cannot take effect here (run it in its own process)", _APPLIED, wanted)
        return
    _APPLIED = wanted
    platform = hw["platform"]
    if platform == "cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"
        # One XLA device per core: a single CPU device does not keep two cores busy with
        # PPO's small ops; sharding seeds over per-core devices does (1.6x on 2 cores).
        _set_xla_flag("xla_force_host_platform_device_count", resolve_host_devices(hw))
    else:
        # Leave the choice to JAX and verify afterwards: naming an absent plugin in
        # JAX_PLATFORMS fails with a message about plugins, not about the user's request.
        os.environ.pop("JAX_PLATFORMS", None)
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "true" if hw.get("preallocate") else "false"
    if hw.get("mem_fraction") is not None:
        os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = str(hw["mem_fraction"])


def configure_jax(hw: Mapping) -> None:
    """Settings that go through jax.config (after import, before the first compile)."""
    import jax

    path = cache_dir(hw)
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", str(path))
        # Cache every compile that takes noticeable time; the default (1 s) skips the
        # small chunk functions of tiny configs that tests and sweeps recompile often.
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def check_devices(hw: Mapping) -> list:
    """Return the local devices, failing clearly if they are not what `hardware` asked for."""
    import jax

    wanted = hw["platform"]
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
        if not hw.get("allow_fallback"):
            raise HardwareError(message)
        log.warning("FALLBACK: %s Continuing on %s because hardware.allow_fallback=true.", message, got)
    log.info("devices: %d x %s (%s)", len(devices), got, ", ".join(str(d) for d in devices))
    return devices


def start_jax(hw: Mapping) -> list:
    """The one start-up every entry point makes: check the `hardware` section, set what JAX
    reads at import, import it, apply the jax.config settings and return the local devices
    (a HardwareError if they are not what was asked for). Call before anything imports jax."""
    from ppo_lab.config import validate_hardware

    hw = validate_hardware(hw)
    apply_hardware(hw)
    configure_jax(hw)
    return check_devices(hw)
