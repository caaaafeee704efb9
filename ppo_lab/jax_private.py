"""The private JAX symbols the lab needs, in this one module, because jax has no public API for
them (checked with jax 0.10.2, the version this lab pins; `tests/test_jax_private.py` fails
naming the symbol when a jax release moves one):

- `backends_are_initialized()`: whether XLA's backend has started. The hardware flags must be
  set before it starts, and the public calls that could tell (`jax.devices()`,
  `jax.extend.backend.backends()`) start it.
- `distributed_state`: the distributed runtime's state after `jax.distributed.initialize`: its
  `client` (the coordinator's key-value store, through which the processes of one run agree
  on each chunk's decisions), `process_id` and `num_processes`, readable before the backend
  starts (`jax.process_index()` would start it). `jax.distributed` offers only `initialize`,
  `is_initialized` and `shutdown`.
"""

from __future__ import annotations

from jax._src import xla_bridge as _xla_bridge
from jax._src.distributed import global_state as distributed_state

CHECKED_WITH = ("0.10.2",)

__all__ = ["CHECKED_WITH", "backends_are_initialized", "distributed_state"]


def backends_are_initialized() -> bool:
    """Whether XLA's backend has started in this process (starts nothing)."""
    return _xla_bridge.backends_are_initialized()
