"""The private JAX symbols of `ppo_lab.jax_private` are where this jax keeps them: a jax release
that moves one fails here, naming it, instead of deep inside a multi-process run."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import jax
import pytest

ROOT = Path(__file__).resolve().parent.parent
SYMBOLS = [("jax._src.xla_bridge", "backends_are_initialized"), ("jax._src.distributed", "global_state")]


@pytest.mark.parametrize("module, name", SYMBOLS)
def test_each_private_symbol_is_where_jax_private_reads_it(module, name):
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        pytest.fail(f"jax {jax.__version__} has no {module}.{name}: ppo_lab/jax_private.py reads it (its "
                    f"CHECKED_WITH names the jax versions it was checked with); find where it moved: {exc}")
    assert found is not None


def test_the_distributed_state_has_what_the_lab_reads_and_nothing_starts_the_backend():
    code = ("from ppo_lab import jax_private as jp\n"
            "s = jp.distributed_state\n"
            "assert all(hasattr(s, a) for a in ('client', 'process_id', 'num_processes')), dir(s)\n"
            "assert s.client is None and jp.backends_are_initialized() is False\n"
            "import jax; jax.devices()\n"
            "assert jp.backends_are_initialized() is True\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
