"""`Hypers`: the traced hyperparameters of one replica (or of stacked replicas), one typed struct.

Its fields are the PPOConfig keys marked `traced()` in ppo_lab/config.py, under their config
names (`config.TRACED_PPO_KEYS`): they change no shape, so they are arguments of the compiled
chunk, not constants, and one program trains a grid (or a population) of them. The trainer
reads them by name (`hypers.vf_coef`); a scheduled one (`<name>_final` beside `<name>` or
`<name>_initial`) is read at an update as `hypers.scheduled("ent_coef", update, num_updates)`.

    Hypers.of(ppo)                        a run's values
    Hypers.from_values({"lr": 3e-4, ...})   any replica's values (a member of a population)
    Hypers.stack([...]), .replicated(...)  [replicas] per field, the chunk's argument

Two derived values are worked out on the host in float64 and rounded once to float32, so a run
trains to the bits it trained to when these were Python constants: each schedule's span
`end - start` (`spans`) and GAE's `gamma * gae_lambda` (`gamma_lambda`). They are not config
keys and are never set by hand: the constructors compute them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from ppo_lab.config import TRACED_PPO_KEYS, PPOConfig
from ppo_lab.ppo.parallel import put_replicas

# A traced key `<name>_final` schedules `<name>` linearly over training from `<name>` (or
# `<name>_initial`): {scheduled name: (start key, end key)}.
SCHEDULES = {
    key[: -len("_final")]: (
        key[: -len("_final")] if key[: -len("_final")] in TRACED_PPO_KEYS else key[: -len("_final")] + "_initial",
        key,
    )
    for key in TRACED_PPO_KEYS
    if key.endswith("_final")
}


class _HypersMethods:
    """The methods of `Hypers` (its fields are made from config.TRACED_PPO_KEYS below)."""

    def scheduled(self, name: str, update, num_updates):
        """`name`'s value at update `update` (0-based): linear from its start at 0 to its end at
        `num_updates`, e.g. `scheduled("ent_coef", ...)` from ent_coef_initial to ent_coef_final.

        `num_updates` is a program argument or a constant. The fraction is `update x (1 /
        num_updates)` in float32 either way: what XLA made of `update / num_updates` when the
        count was a constant (it rewrites a division by a constant into a multiplication by the
        constant's reciprocal), so a run trains to the bits it trained to then."""
        start, _ = SCHEDULES[name]
        per_update = jnp.float32(1) / jnp.asarray(num_updates, jnp.float32)
        return vars(self)[start] + self.spans[name] * (jnp.asarray(update, jnp.float32) * per_update)

    @classmethod
    def from_values(cls, values: Mapping[str, Any]):
        """One replica's struct from its traced keys' values (floats; a null entropy floor: 0,
        unused by a program without one)."""
        values = {k: 0.0 if k == "entropy_floor" and values[k] is None else float(values[k]) for k in TRACED_PPO_KEYS}
        spans = {name: np.float32(values[end] - values[start]) for name, (start, end) in SCHEDULES.items()}
        return cls(**{k: np.float32(v) for k, v in values.items()}, spans=spans,
                   gamma_lambda=np.float32(values["gamma"] * values["gae_lambda"]))

    @classmethod
    def of(cls, ppo: PPOConfig):
        """A run's struct: its config's values."""
        return cls.from_values(dataclasses.asdict(ppo))

    @staticmethod
    def stack(per_replica: list):
        """Structs stacked along a leading replica axis ([replicas] per field)."""
        return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *per_replica)

    @classmethod
    def replicated(cls, ppo: PPOConfig, num_replicas: int):
        """One run's struct for each of its replicas (seeds, or one seed's device shares)."""
        return cls.stack([cls.of(ppo)] * num_replicas)

    def replica(self, index: int):
        """Replica `index` of stacked structs."""
        return jax.tree.map(lambda x: x[index], self)

    def sharded(self, sharding):
        """Stacked structs on the devices, laid out as the replicas' state is."""
        return put_replicas(self, sharding)


Hypers = flax.struct.dataclass(type("Hypers", (_HypersMethods,), {
    "__doc__": "A replica's traced hyperparameters: one field per `config.TRACED_PPO_KEYS` key, plus the "
               "derived `spans` and `gamma_lambda` (see the module's docstring).",
    "__module__": __name__,
    "__annotations__": {**{k: Any for k in TRACED_PPO_KEYS}, "spans": dict, "gamma_lambda": Any},
}))


def traced_keys() -> tuple[str, ...]:
    """The traced keys (config names), e.g. those a population explores."""
    return TRACED_PPO_KEYS
