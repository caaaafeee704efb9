"""`Hypers`: the traced hyperparameters of one replica (or of stacked replicas), one typed struct.

Its values are the PPOConfig keys marked `traced()` in ppo_lab/config.py, under their config
names (`config.traced_keys()`): they change no shape, so they are arguments of the compiled
chunk, not constants, and one program trains a grid (or a population) of them. The trainer
reads them by name (`hypers.vf_coef`); a scheduled one (`<name>_final` beside `<name>` or
`<name>_initial`) is read at an update as `hypers.scheduled("ent_coef", update, num_updates)`,
linearly from its start to its `_final` value (`learning_rate_schedule`, `schedule_values`).

    Hypers.of(ppo)                        a run's values
    Hypers.from_values({"lr": 3e-4, ...})   any replica's values (a member of a population)
    Hypers.stack([...]), .replicated(...)  [replicas] per field, the chunk's argument
    StaticPPO.of(ppo)                     the rest of the section: the trainer's constants
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from ppo_lab.config import PPOConfig, PPOSizes, nullable_traced_keys, traced_keys
from ppo_lab.ppo.parallel import put_replicas


def schedules(keys: tuple[str, ...]) -> dict[str, tuple[str, str]]:
    """A traced key `<name>_final` schedules `<name>` linearly over training from `<name>` (or
    `<name>_initial`): {scheduled name: (start key, end key)}."""
    out = {}
    for key in keys:
        if key.endswith("_final"):
            name = key[: -len("_final")]
            out[name] = (name if name in keys else name + "_initial", key)
    return out


SCHEDULES = schedules(traced_keys())


@flax.struct.dataclass
class Hypers:
    """A replica's traced hyperparameters (or stacked replicas'): one float32 value per traced
    key, read by name (`hypers.vf_coef`). The keys are the current PPOConfig's
    (`config.traced_keys()`), so a key added there is here too; they are the struct's static
    part, the values its leaves."""

    names: tuple[str, ...] = flax.struct.field(pytree_node=False)
    values: tuple

    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("names", "values"):
            raise AttributeError(name)
        if name in self.names:
            return self.values[self.names.index(name)]
        raise AttributeError(f"{name!r} is no traced hyperparameter; traced: {', '.join(self.names)}")

    def as_dict(self) -> dict:
        return dict(zip(self.names, self.values))

    def scheduled(self, name: str, update, num_updates):
        """`name`'s value at update `update` (0-based): linear from its start at 0 to its end at
        `num_updates`, e.g. `scheduled("ent_coef", ...)` from ent_coef_initial to ent_coef_final.

        `num_updates` is the program's argument (`Trainer.chunk`); all in float32."""
        start, end = schedules(self.names)[name]
        values = self.as_dict()
        progress = jnp.asarray(update, jnp.float32) / jnp.asarray(num_updates, jnp.float32)
        return values[start] + (values[end] - values[start]) * progress

    @classmethod
    def from_values(cls, values: Mapping[str, Any], names: tuple[str, ...] | None = None):
        """One replica's struct from its traced keys' values (floats; a null nullable key: 0,
        unused by a program without it). `names`: the traced keys (None: `traced_keys()`)."""
        names = traced_keys() if names is None else names
        nullable = nullable_traced_keys()
        values = {k: 0.0 if k in nullable and values[k] is None else float(values[k]) for k in names}
        return cls(names=names, values=tuple(np.float32(values[k]) for k in names))

    @classmethod
    def of(cls, ppo: PPOConfig):
        """A run's struct: its config's values."""
        return cls.from_values(dataclasses.asdict(ppo), traced_keys(type(ppo)))

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


@dataclasses.dataclass(frozen=True)
class StaticPPO(PPOSizes):
    """The static part of a `ppo` section: its keys that are not traced, by name (`.num_envs`),
    and which traced keys are null (a program's choice: `is_null("entropy_floor")`). A traced
    key's value is no constant of a program: reading one here fails, naming `hypers.<key>`."""
    values: tuple[tuple[str, Any], ...]
    null_traced: frozenset

    @classmethod
    def of(cls, ppo: PPOConfig) -> "StaticPPO":
        names, values = traced_keys(type(ppo)), dataclasses.asdict(ppo)
        return cls(values=tuple((k, v) for k, v in values.items() if k not in names),
                   null_traced=frozenset(k for k in names if values[k] is None))

    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("values", "null_traced"):
            raise AttributeError(name)
        found = dict(self.values)
        if name in found:
            return found[name]
        if name in traced_keys():
            raise AttributeError(f"ppo.{name} is a traced hyperparameter, one value per replica: read it from the "
                                 f"replica's `hypers.{name}` (ppo/hypers.py), never as a constant of the trainer")
        raise AttributeError(name)

    def is_null(self, traced_key: str) -> bool:
        return traced_key in self.null_traced


# --- the linear schedules over training, indexed by the update number ----------------------
def learning_rate(ppo: PPOConfig, update, num_updates: int, hypers: Hypers):
    """The learning rate of update `update` (0-based): annealed linearly when `anneal_lr`."""
    return hypers.scheduled("lr", update, num_updates) if ppo.anneal_lr else hypers.lr


def learning_rate_schedule(ppo: PPOConfig, num_updates: int, steps_per_update: int, hypers: Hypers):
    """`learning_rate` as an optax schedule of the optimiser's step count: one update takes
    `steps_per_update` optimiser steps (epochs x minibatches), all at that update's rate."""
    return lambda count: learning_rate(ppo, count // steps_per_update, num_updates, hypers)


def schedule_values(ppo: PPOConfig, update, num_updates: int, hypers: Hypers) -> dict:
    """Entropy coefficient and clip epsilon for update `update` (0-based); the learning rate
    is the optimiser's own schedule (`learning_rate_schedule`)."""
    return {"ent_coef": hypers.scheduled("ent_coef", update, num_updates),
            "clip_eps": hypers.scheduled("clip_eps", update, num_updates)}
