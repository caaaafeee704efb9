"""What the processes of one run agree on (docs/multihost.md): the config, the host loop's
decisions, and who writes.

Every process runs the same program over the global device mesh. Process 0 alone writes the
run directory (config, metrics, summary, manifest, checkpoints, recorders, evaluation); the
others write nothing but their log. Decisions taken from wall time or outside events (a
checkpoint due, a signal, the STOP file, a time budget) differ between processes, so each
chunk the processes all-reduce them (`agree`): all take the same branch at the same chunk, and
the collectives they then call (gathering the state for a checkpoint) match. In one process
each function is the identity, without a collective.
"""

from __future__ import annotations

import json
import logging
import os
import sys

import jax
import numpy as np
from jax.experimental import multihost_utils

from ppo_lab import jax_private, rundir
from ppo_lab.errors import ConfigError

log = logging.getLogger(__name__)

# Keys that differ between the processes of one run by design (not compared).
PER_PROCESS_KEYS = ("hardware.process_id",)


def several() -> bool:
    return jax.process_count() > 1


def writes() -> bool:
    """Whether this process writes the run directory (process 0 of a multi-process run)."""
    return jax.process_index() == 0


def agree(flags: list[int]) -> list[int]:
    """Each flag's maximum over all processes (one small all-gather); the flags themselves in one process."""
    if not several():
        return list(flags)
    gathered = multihost_utils.process_allgather(np.asarray(flags, dtype=np.int32))
    return [int(v) for v in np.asarray(gathered).reshape(jax.process_count(), -1).max(axis=0)]


def _compared(resolved: dict) -> dict:
    flat = rundir.dotted_keys({k: v for k, v in resolved.items() if k != "hydra"})
    return {k: json.dumps(v, sort_keys=True, default=str) for k, v in flat.items() if k not in PER_PROCESS_KEYS}


_CHECKS = [0]  # one key per run: several runs of a multirun share the processes


def check_same_config(resolved: dict, timeout_s: float) -> None:
    """Every process runs the same config, or every process stops with a ConfigError (exit 2)
    naming the keys that differ. Each publishes its config in the distributed runtime's
    key-value store and reads every other's."""
    if not several():
        return
    client = jax_private.distributed_state.client  # the distributed runtime's key-value store
    _CHECKS[0] += 1
    mine = _compared(resolved)
    client.key_value_set_bytes(f"ppo_lab/config/{_CHECKS[0]}/{jax.process_index()}", json.dumps(mine).encode())
    for other in range(jax.process_count()):
        if other == jax.process_index():
            continue
        raw = client.blocking_key_value_get_bytes(f"ppo_lab/config/{_CHECKS[0]}/{other}", int(timeout_s * 1000))
        theirs = json.loads(bytes(raw).decode())
        keys = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        if keys:
            diff = "; ".join(f"{k}: {theirs.get(k, '<unset>')} (process {other}) vs {mine.get(k, '<unset>')} "
                             f"(process {jax.process_index()})" for k in keys[:10])
            raise ConfigError("config", None, f"the same config in every process of the run; they differ in {diff}")
    log.info("all %d processes run the same config", jax.process_count())


def check_layout(layout, num_devices: int, replicas: str = "num_seeds") -> None:
    """A multi-process run's layout must use every process's devices (a process without a
    replica would have nothing to run). `replicas`: what the user sets to fix it (the seeds, a
    population's members, a grid's cells x seeds)."""
    if several() and layout.num_devices < num_devices:
        envs = ", or one seed with hardware.layout=envs" if replicas == "num_seeds" else ""
        raise ConfigError(replicas, layout.num_replicas, f"a layout over all {num_devices} devices of the "
                          f"{jax.process_count()} processes; it uses {layout.num_devices} ({layout.reason}): pick "
                          f"{replicas} a multiple of {num_devices}{envs}")


# The host loop's stop, encoded to agree on: a higher code wins (a signal over a time budget
# over early stopping); a process that did not decide it itself takes the agreed one.
_STOP_CODES = {"completed": 1, "timed_out": 2, "stopped": 3}


def decide(checkpoint_due: bool, stops: list, signals) -> tuple[bool, list]:
    """The chunk's decisions, the same in every process: a checkpoint due in any process is
    due in all; a run stops where any process stops it; a SIGTERM seen by any process counts
    as seen by all (so all exit for requeue together). `stops`: each run's (status, reason) or None."""
    if not several():
        return checkpoint_due, stops
    local = [0 if s is None else _STOP_CODES[s[0]] for s in stops]
    flags = agree([int(checkpoint_due), int(signals.received == "SIGTERM"), *local])
    if flags[1] and signals.received is None:
        signals.received = "SIGTERM"
    agreed = []
    for stop, mine, code in zip(stops, local, flags[2:]):
        status = next((s for s, c in _STOP_CODES.items() if c == code), None)
        agreed.append(stop if mine == code else (status, f"{status} in another process of this run") if code else None)
    return bool(flags[0]), agreed


def lost_process_note(exc: BaseException) -> str:
    """What to say when a collective failed in a run of several processes (a process died)."""
    return (f"a process of this {jax.process_count()}-process run was lost or failed (this is process "
            f"{jax.process_index()}): {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")


def local(devices) -> list:
    """This process's devices among `devices`."""
    return [d for d in devices if d.process_index == jax.process_index()]


def kept_rows(keep, run_dir, window: int, resumed: bool) -> list[dict]:
    """The metric rows a resumed run starts from: process 0 cuts metrics.csv back (`keep()`),
    the others read it once it has (a barrier), so every process's windowed return agrees."""
    if not several():
        return keep()
    rows = keep() if writes() else []
    multihost_utils.sync_global_devices("ppo_lab: metrics.csv kept")
    if writes() or not resumed:
        return rows
    return rundir.read_recent_rows(run_dir / rundir.METRICS, window)


def end_after_failure(exc: BaseException) -> None:
    """A run of several processes that failed (a lost process, most often: its collectives
    failed) ends this process at once with exit 1, its summary already written: JAX's
    distributed shutdown would wait for the lost process (up to hardware.init_timeout_s) and
    then abort. One process: nothing (the error is raised as usual)."""
    if not several():
        return
    log.error("ending process %d after the failure: %s", jax.process_index(), lost_process_note(exc), exc_info=exc)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)
