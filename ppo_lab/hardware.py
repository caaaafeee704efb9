"""Apply the `hardware` config group. Must run before XLA's backend starts.

XLA reads its flags (the host device count, GPU memory settings) when its backend starts, and
Hydra's `hydra.job.env_set` is applied too late for that, so every entry point calls
`start_jax` (apply, configure, check the devices) before anything starts the backend.
Importing jax, flax or optax does not start it (their modules import at the top everywhere);
importing gymnax or Jumanji does, which is why env adapters are loaded late
(`ppo_lab/parts.py`, `docs/toolchain.md`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import jax

from ppo_lab import jax_private
from ppo_lab.config import HardwareConfig, read

log = logging.getLogger(__name__)


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


def set_xla_flag(name: str, value) -> None:
    """Set one XLA flag for the backend not started yet (replacing any value it had)."""
    flags = re.sub(rf"--{name}=\S+", "", os.environ.get("XLA_FLAGS", "")).split()
    os.environ["XLA_FLAGS"] = " ".join(flags + [f"--{name}={value}"])


_APPLIED: dict | None = None  # what this process's JAX was started with


def apply_hardware(hw: HardwareConfig) -> None:
    """Set what XLA reads when its backend starts. Call before anything starts it.

    Several jobs in one process (Hydra's basic launcher) share one JAX: a later job can only
    run with the settings the first one applied, so it is told when it asks for others."""
    global _APPLIED
    wanted = {k: getattr(hw, k) for k in ("platform", "host_devices", "preallocate", "mem_fraction", "deterministic")}
    if jax_private.backends_are_initialized():
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
        set_xla_flag("xla_force_host_platform_device_count", host_core_count() if hw.host_devices == "auto" else int(hw.host_devices))
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


def apply_deterministic(platform: str) -> None:
    """hardware.deterministic=true: the flags that make the backend's results the same run after
    run. GPU: deterministic kernels only (scatter, reductions), no autotuning (which may pick
    other kernels each run); `exclude_nondeterministic_ops` is implied by the first, named so it
    holds in XLA builds that split the two. CPU and TPU have no such flags: their results are
    deterministic for the same program and layout (docs/reproducibility.md)."""
    if platform == "gpu":
        set_xla_flag("xla_gpu_deterministic_ops", "true")
        set_xla_flag("xla_gpu_exclude_nondeterministic_ops", "true")
        os.environ["TF_CUDNN_DETERMINISTIC"] = "1"  # cuDNN's deterministic algorithms (read by XLA:GPU)


def configure_jax(hw: HardwareConfig) -> None:
    """Settings that go through jax.config (before the first compile)."""
    # Relative to the working folder, as the run dirs are: an installed lab's package folder
    # may not be writable (and is no place for a user's cache).
    path = Path(str(hw.compilation_cache_dir)).expanduser().absolute() if hw.compilation_cache_dir else None
    if path is not None and _DISTRIBUTED is not None and hw.platform == "cpu":
        # No process but 0 ever hits it: JAX's key of a CPU program hashes the topology of its
        # devices, whose fingerprint differs per process (measured: every other part of the key
        # is equal), and only process 0 writes, so the others compile every launch anyway; with
        # it on, process 0 loaded its chunk in 1.2 s and then waited at the first all-gather for
        # process 1's 8.9 s compile, which read as training at 0.50x (docs/performance.md). Off,
        # every process compiles and the timings say what they are.
        log.info("the persistent compilation cache is off in a multi-process CPU run (only process 0 could use it)")
        path = None
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", str(path))
        # Cache every compile, however small: the default (1 s) skips the chunk of a tiny config,
        # and a launch also compiles ~15 small programs (PRNG splits, casts, the evaluation's
        # pieces). Measured on 2 cores, a TINY CartPole launch with the cache warm: 5.7-6.1 s wall
        # (5.9-6.3 CPU-s) caching all, 6.5-7.4 s (6.8-7.7 CPU-s) caching compiles over 0.2 s.
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
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
    reads when its backend starts, join the other processes of a multi-process run
    (`start_distributed`), apply the jax.config settings and return the devices: every
    process's (global, ordered by process) in a multi-process run, this process's otherwise
    (a HardwareError if they are not what was asked for). Call before anything starts the
    backend (before an env is built)."""
    hw = read(HardwareConfig, hw, "hardware")  # as it is if read already
    apply_hardware(hw)
    start_distributed(hw)
    configure_jax(hw)
    check_devices(hw)
    if jax.process_count() > 1:
        log.info("processes: %d (this is process %d), %d global device(s), %d local",
                 jax.process_count(), jax.process_index(), jax.device_count(), jax.local_device_count())
    return jax.devices()


# --- one run across processes (docs/multihost.md) ------------------------------------------

@dataclass(frozen=True)
class Processes:
    """Where a multi-process run's processes meet, and which one this is."""
    coordinator_address: str | None  # None: jax.distributed detects it (a TPU pod slice)
    num_processes: int | None
    process_id: int | None
    source: str  # "hardware.*", "SLURM" or "TPU pod slice" (logged)


def _slurm_first_host(nodelist: str) -> str:
    """The first host of a SLURM node list ("node[3-5,7],gpu1" -> "node3"), without scontrol."""
    first = re.match(r"[^,\[]+(\[[^\]]*\])?", nodelist).group(0)
    if "[" not in first:
        return first
    prefix, ranges = first.split("[", 1)
    return prefix + ranges.rstrip("]").split(",")[0].split("-")[0]


def distributed_settings(hw: HardwareConfig, environ: Mapping | None = None) -> Processes | None:
    """The processes of this run (None: one process). `hardware.*` when set; else a SLURM job
    step of several tasks (coordinator: the step's first node, port 12000 + job id % 20000);
    else a TPU pod slice (its worker list names several hosts; jax.distributed detects everything
    itself). jax-free."""
    env = os.environ if environ is None else environ
    if hw.num_processes is not None:
        if hw.num_processes == 1:
            return None
        return Processes(hw.coordinator_address, hw.num_processes, hw.process_id, "hardware.*")
    tasks = env.get("SLURM_STEP_NUM_TASKS") or env.get("SLURM_NTASKS")
    if tasks and tasks.isdigit() and int(tasks) > 1 and "SLURM_PROCID" in env and "SLURM_STEP_NODELIST" in env:
        job = int(env.get("SLURM_JOB_ID", "0") or 0)
        address = f"{_slurm_first_host(env['SLURM_STEP_NODELIST'])}:{12000 + job % 20000}"
        return Processes(address, int(tasks), int(env["SLURM_PROCID"]), "SLURM")
    if hw.platform == "tpu" and len([h for h in env.get("TPU_WORKER_HOSTNAMES", "").split(",") if h]) > 1:
        return Processes(None, None, None, "TPU pod slice")
    return None


def process_index_before_start(hw: HardwareConfig) -> int:
    """This process's index, known before JAX starts (for the run-dir lock)."""
    procs = distributed_settings(hw)
    if procs is None:
        return 0
    if procs.process_id is None:
        return int(os.environ.get("TPU_WORKER_ID", "0") or 0)
    return procs.process_id


def wait_for_coordinator(address: str, timeout_s: float) -> None:
    """A HardwareError naming `address` unless its coordinator accepts a connection within
    `timeout_s` (jax's own wait ends the process with a C++ fatal error, no message of ours)."""
    host, port = address.rsplit(":", 1)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=min(5.0, timeout_s)):
                return
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise HardwareError(f"the coordinator at {address} (hardware.coordinator_address) did not answer within "
                                    f"hardware.init_timeout_s={timeout_s:g} s ({exc}): is process 0 running there?") from exc
            time.sleep(0.5)


_DISTRIBUTED: Processes | None = None  # what this process joined (once per process: a multirun shares it)


def start_distributed(hw: HardwareConfig) -> None:
    """jax.distributed.initialize for a multi-process run, once per process, before the
    backend starts; CPUs collect over gloo. Bounded: `hardware.init_timeout_s` to meet, and
    a lost process is noticed within it (heartbeats)."""
    global _DISTRIBUTED
    procs = distributed_settings(hw)
    if procs is None or _DISTRIBUTED is not None:
        if procs is not None and procs != _DISTRIBUTED:
            log.warning("this process already joined %s; %s cannot take effect here", _DISTRIBUTED, procs)
        return
    if jax_private.backends_are_initialized():
        raise HardwareError("a multi-process run must join its processes before XLA's backend starts "
                            "(something started JAX before start_jax)")
    timeout = int(max(1, round(hw.init_timeout_s)))
    if procs.coordinator_address and procs.process_id:
        wait_for_coordinator(procs.coordinator_address, hw.init_timeout_s)
    if hw.platform == "cpu":
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    log.info("joining %s processes (%s) at %s as process %s (timeout %d s)", procs.num_processes or "the slice's",
             procs.source, procs.coordinator_address or "the detected coordinator", procs.process_id, timeout)
    # JAX's own wait ends the process with a C++ fatal error: ours ends it first, exit 2, saying why.
    watchdog = threading.Timer(hw.init_timeout_s, _not_joined, (procs, hw.init_timeout_s))
    watchdog.daemon = True
    watchdog.start()
    try:
        jax.distributed.initialize(procs.coordinator_address, procs.num_processes, procs.process_id,
                                   initialization_timeout=timeout + 10, heartbeat_timeout_seconds=timeout,
                                   shutdown_timeout_seconds=timeout)
    finally:
        watchdog.cancel()
    _DISTRIBUTED = procs
    if hw.platform == "cpu" and hw.split_host_cpus:
        split_host_cpus(hw.init_timeout_s)


def _host_identity() -> str:
    """This machine, as processes of one run tell hosts apart: its name and its kernel's boot
    id (two containers of one host share the kernel: they share its CPUs too)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()}/{boot}"


def cpu_share(me: int, peers: list[dict]) -> list[int] | None:
    """The CPUs process `me` keeps when the processes of a run (`peers[i]`: `host` and `cpus`,
    the affinity it started with) share a host's CPUs: the processes on this host with the same
    CPUs split them into equal consecutive slices, by process index (the remainder to the last).
    None: nothing to split (alone on its CPUs, or more processes than CPUs). jax-free."""
    mine = peers[me]
    sharing = [i for i, p in enumerate(peers) if p["host"] == mine["host"] and p["cpus"] == mine["cpus"]]
    cpus = sorted(mine["cpus"])
    if len(sharing) < 2 or len(cpus) < len(sharing):
        return None
    rank, size = sharing.index(me), len(cpus) // len(sharing)
    return cpus[rank * size:] if rank == len(sharing) - 1 else cpus[rank * size:(rank + 1) * size]


def _threads() -> list[int]:
    """This process's thread ids (Linux: /proc/self/task), or [0]: the calling thread."""
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


def split_host_cpus(timeout_s: float) -> None:
    """Processes of one CPU run on one host, each free to use all its cores (two local
    processes, SLURM tasks on a node without CPU binding), each start an XLA CPU runtime sized
    to every core: on 2 cores two processes trained at 0.71x one process of two devices;
    pinned to a core each, at 1.06x (docs/performance.md). So each takes its own slice of the
    CPUs before XLA's backend starts (the runtime sizes its thread pool by the affinity mask).
    Processes already bound to their own CPUs (SLURM's task affinity, taskset) are left alone."""
    # not jax.process_index(): it would start the backend, whose thread pool must see the new CPUs
    state = jax_private.distributed_state  # the distributed runtime: its process index and key-value store
    client, me, count = state.client, state.process_id, state.num_processes
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux: nothing to pin with
        return
    client.key_value_set(f"ppo_lab/cpus/{me}", json.dumps({"host": _host_identity(), "cpus": cpus}))
    peers = [json.loads(client.blocking_key_value_get(f"ppo_lab/cpus/{i}", int(timeout_s * 1000))) for i in range(count)]
    share = cpu_share(me, peers)
    if share is None:
        return
    for thread in _threads():  # every thread (the distributed runtime's too); those made later inherit it
        os.sched_setaffinity(thread, share)
    log.info("%d processes of this run share this host's %d CPUs: this one keeps CPUs %s (hardware.split_host_cpus)",
             sum(p["host"] == peers[me]["host"] for p in peers), len(cpus), share)


def _not_joined(procs: Processes, timeout_s: float) -> None:
    """The processes did not all meet within hardware.init_timeout_s: exit 2 naming where."""
    print(f"error: hardware.init_timeout_s={timeout_s:g} s passed and the {procs.num_processes or ''} processes of this "
          f"run did not all join the coordinator at {procs.coordinator_address or 'the detected address'} "
          f"(this is process {procs.process_id}; {procs.source}): are the others running with the same "
          f"hardware.coordinator_address?", file=sys.stderr, flush=True)
    os._exit(2)
