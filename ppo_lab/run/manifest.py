"""The reproducibility record of a run (`manifest.json`, written through rundir/manifest.py).

What it takes to get the same numbers again and what may explain different ones: the lab's
commit and whether its tree had uncommitted changes, Python and the versions of the packages
that compute or feed the numbers, the XLA flags and JAX/XLA variables this process started its
backend with, the devices (platform, kinds and counts), the layout of seeds and envs on them,
the process count, the run dir's format and the lab's version (`rundir.run_format`), the host CPU (`ppo_lab.host_cpu`: XLA:CPU compiles for it, so another CPU
may move the last digits) and the config's hash (`config_hash`). A run with parts
of the user's own (docs/envs.md) also records where they were found (`user_parts`), which is how
evaluate, reproduce and replay find them again (`rundir.use_recorded_parts`).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import socket
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any, Mapping

import jax

from ppo_lab import parts, rundir
from ppo_lab.config_keys import PROJECT_ROOT, user_config_dirs
from ppo_lab.host_cpu import cpu_record
from ppo_lab.rundir.run_format import stamp

# The packages whose versions can move the numbers (the math, the envs, the config).
PACKAGES = ("jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda13-plugin", "libtpu", "flax", "optax", "numpy", "scipy",
            "gymnax", "jumanji", "brax", "mujoco", "envpool", "gymnasium", "hydra-core", "omegaconf")
# jax.config options that change what is computed.
JAX_OPTIONS = ("jax_enable_x64", "jax_default_matmul_precision", "jax_default_prng_impl", "jax_threefry_partitionable")


def config_hash(resolved: Mapping[str, Any]) -> str:
    """The sha256 of a resolved config (plain dicts) less `hydra`, over its canonical JSON (keys
    sorted, no spaces): equal configs hash equal in any process, on any host (manifest.json; a
    multi-process run compares its processes' hashes)."""
    rest = {k: v for k, v in resolved.items() if k != "hydra"}
    return hashlib.sha256(json.dumps(rest, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(PROJECT_ROOT), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def lab_source() -> dict:
    """The lab's commit and whether tracked files differ from it (null for an installed lab:
    the repository around its site-packages, if any, is someone else's)."""
    top = _git("rev-parse", "--show-toplevel")
    commit = _git("rev-parse", "HEAD") if top and Path(top).resolve() == PROJECT_ROOT else None
    status = _git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def package_versions(names=PACKAGES) -> dict:
    """name -> installed version of each of `names` that is installed."""
    out = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def user_parts(cfg) -> dict:
    """Where the run's parts of the user's own were found (empty for a run of the lab's parts
    alone): `config_dirs`, the user's config folders on Hydra's search path; `import_dirs`, each
    own top-level module -> the folder it was imported from."""
    found = {"config_dirs": [str(folder) for folder in user_config_dirs()],
             "import_dirs": parts.import_dirs(_part_paths(cfg))}
    return {key: value for key, value in found.items() if value}


def _part_paths(cfg) -> list[str]:
    """The dotted paths of the parts a run loads (`ppo_lab.parts`)."""
    paths = [cfg.env.target, cfg.env.check, *cfg.env.evaluations.values(), cfg.env.metrics.get("criteria"),
             cfg.network.target, *(spec.target for spec in cfg.logger.values())]
    return [path for path in paths if path is not None]


def write_run_manifest(run_dir, cfg, layout, devices) -> None:
    """manifest.json: the record of this process's run of `cfg`, laid out as `layout` over the
    first of `devices` (the caller is the run dir's one writer: process 0)."""
    # this process's devices of the layout (a multi-process run passes every process's)
    local = [d for d in devices[: layout.num_devices] if d.process_index == jax.process_index()]
    record = {
        **stamp(),  # format_version and lab_version: what `rundir.check_format` reads first
        "lab": lab_source(),
        "python": platform.python_version(),
        "packages": package_versions(),
        "xla_flags": os.environ.get("XLA_FLAGS", "").split(),
        "env_vars": {k: v for k, v in sorted(os.environ.items()) if k.startswith(("XLA_", "JAX_", "TF_CUDNN_", "TF_DETERMINISTIC")) and k != "XLA_FLAGS"},
        "jax_config": {k: getattr(jax.config, k, None) for k in JAX_OPTIONS},
        "devices": {"platform": local[0].platform if local else None, "kinds": dict(Counter(d.device_kind for d in local)),
                    "local_count": len(local), "global_count": jax.device_count()},
        "cpu": cpu_record(),
        "layout": layout.as_dict(),
        "process_count": jax.process_count(),
        "process_index": jax.process_index(),
        "deterministic": bool(cfg.hardware.deterministic),
        "config_hash": config_hash(cfg.resolved),
        "host": socket.gethostname(),
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    own = user_parts(cfg)
    if own:  # only then: the manifest of a run of the lab's parts alone is as it was
        record["user_parts"] = own
    rundir.write_manifest(run_dir, record)
