"""Laying replicas out over local devices, and the sharded, jitted chunk.

Two layouts, one code path (`shard_map` over a 1-D device mesh, `vmap` inside):
- "seeds": one replica per seed; seeds are split evenly across devices. Seeds never talk to
  each other, so nothing crosses devices and the state's layout does not depend on the
  device count (a checkpoint resumes on any number of devices).
- "envs": one seed on several devices; each device steps its share of the envs and the
  gradients are averaged across devices every minibatch (data parallel).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from ppo_lab.config import LAYOUTS, PPOConfig

log = logging.getLogger(__name__)

AXIS = "d"


@dataclass(frozen=True)
class Layout:
    mode: str  # "seeds" or "envs"
    num_devices: int
    num_replicas: int
    envs_per_replica: int
    reason: str = field(default="", compare=False)  # why this layout (logged, not saved)

    @property
    def grad_axis(self) -> str | None:
        return AXIS if self.mode == "envs" else None

    def seed_replicas(self, num_seeds: int) -> list[int]:
        """Each seed's replica in the stacked state: its own, or replica 0 for one seed split over devices."""
        return list(range(num_seeds)) if self.mode == "seeds" else [0]

    def as_dict(self) -> dict:
        return dict(mode=self.mode, num_devices=self.num_devices, num_replicas=self.num_replicas, envs_per_replica=self.envs_per_replica)


# One seed's envs are split over devices only when each device's share of a minibatch has at
# least this many rows: below it the gradient all-reduce of every minibatch costs more than the
# smaller share saves. From idle-machine measurements on 2 host devices of a 2-core CPU
# (PureJaxRL's CartPole network, 4 epochs x 4 minibatches x 128 steps;
# docs/performance.md "Layout"): 4 envs split (64 rows per device) ran at 0.3x one device;
# 64 envs split (1024 rows) at 178k steps/s, below PureJaxRL's 195k on one device.
ENVS_SPLIT_MIN_ROWS = 2048


def _largest_divisor_at_most(n: int, limit: int, ok=lambda d: True) -> int:
    return max(d for d in range(1, min(n, limit) + 1) if n % d == 0 and ok(d))


def _seeds_layout(num_seeds: int, ppo: PPOConfig, num_devices: int, reason: str) -> Layout:
    used = _largest_divisor_at_most(num_seeds, num_devices)
    if used < num_devices:
        log.warning(
            "num_seeds=%d does not split evenly over %d devices: using %d of them "
            "(pick num_seeds as a multiple of %d to use all)", num_seeds, num_devices, used, num_devices,
        )
    return Layout("seeds", used, num_seeds, ppo.num_envs, reason)


def _envs_split(ppo: PPOConfig, num_devices: int, sequences: bool = False) -> int:
    """Most devices (<= num_devices) one seed's envs split evenly over, minibatches included
    (with `sequences`, a recurrent policy's, each minibatch holds whole envs)."""
    unit = 1 if sequences else ppo.num_steps
    return _largest_divisor_at_most(
        ppo.num_envs, num_devices, ok=lambda d: (ppo.num_envs // d * unit) % ppo.num_minibatches == 0
    )


def choose_layout(num_seeds: int, ppo: PPOConfig, num_devices: int, requested: str = "auto", sequences: bool = False) -> Layout:
    """How replicas sit on devices (`hardware.layout`): "single" (everything on one device),
    "seeds" (seeds split over devices), "envs" (one seed's envs split over devices, gradients
    averaged every minibatch) or "auto": seeds split whenever there are several (they never
    communicate); one seed's envs split only above ENVS_SPLIT_MIN_ROWS rows per device and
    minibatch. `Layout.reason` says why. `sequences`: minibatches are whole env sequences (a
    recurrent policy), so a split must leave each device a multiple of `num_minibatches` envs."""
    if requested not in LAYOUTS:
        raise ValueError(f"hardware.layout={requested!r}: expected one of {list(LAYOUTS)}")
    if num_devices == 1 or requested == "single":
        why = "one device" if num_devices == 1 else "hardware.layout=single"
        return Layout("seeds", 1, num_seeds, ppo.num_envs, why)
    if requested == "envs" and num_seeds > 1:
        raise ValueError(f"hardware.layout=envs splits one seed's envs over devices; num_seeds={num_seeds} (use layout=seeds or num_seeds=1)")
    if num_seeds > 1:
        why = "hardware.layout=seeds" if requested == "seeds" else f"{num_seeds} seeds: split over devices (seeds never communicate)"
        return _seeds_layout(num_seeds, ppo, num_devices, why)
    split = _envs_split(ppo, num_devices, sequences)
    rows = ppo.num_envs // split * ppo.num_steps // ppo.num_minibatches
    if requested == "envs" or (requested == "auto" and split > 1 and rows >= ENVS_SPLIT_MIN_ROWS):
        if split == 1:
            raise ValueError(f"hardware.layout=envs: ppo.num_envs={ppo.num_envs} does not split evenly over {num_devices} devices with {ppo.num_minibatches} minibatches"
                             + (" of whole env sequences (a recurrent network)" if sequences else ""))
        why = "hardware.layout=envs" if requested == "envs" else f"one seed, {rows} rows per device and minibatch >= {ENVS_SPLIT_MIN_ROWS}: envs split over {split} devices"
        return Layout("envs", split, split, ppo.num_envs // split, why)
    why = (f"one seed, {rows} rows per device and minibatch if split < {ENVS_SPLIT_MIN_ROWS}: "
           "one device (the per-minibatch gradient all-reduce would cost more than it saves)")
    return Layout("seeds", 1, 1, ppo.num_envs, why if requested == "auto" else "hardware.layout=seeds with one seed: one device")


def make_mesh(layout: Layout, devices) -> Mesh:
    """The layout's devices: the first `num_devices` of `devices` (in a run of several
    processes, the global devices ordered by process: each process holds a block of replicas)."""
    return Mesh(np.asarray(devices[: layout.num_devices]), (AXIS,))


def put_replicas(tree, sharding: NamedSharding):
    """Host arrays (the same on every process) laid out on `sharding`. In a run of several
    processes the sharding spans them: each process places the slices its own devices hold (none
    where the sharding has no device of this process: a grid cell's seeds on process 0 alone)."""
    if jax.process_count() == 1:
        return jax.device_put(tree, sharding)
    return jax.tree.map(lambda x: jax.make_array_from_callback(np.shape(x), sharding, lambda idx: np.asarray(x)[idx],
                                                               dtype=np.asarray(x).dtype), tree)


def to_host(tree):
    """Host (numpy) copies of replica-stacked arrays, every replica on every process: in a run
    of several processes one collective that every process must call (`gather_shards`)."""
    if jax.process_count() == 1:
        return jax.device_get(tree)
    return gather_shards(tree)


def _shards(x) -> list:
    """(device, index) of every shard of `x`, in device-id order (the same in every process)."""
    index_map = x.sharding.devices_indices_map(x.shape)
    return [(d, index_map[d]) for d in sorted(index_map, key=lambda d: d.id)]


def _shard_shape(index, shape) -> tuple:
    return tuple(len(range(*sl.indices(n))) for sl, n in zip(index, shape)) + tuple(shape[len(index):])


def gather_shards(tree):
    """Every process's shards of every leaf, as full host arrays on every process, in one
    all-gather of bytes (`process_allgather` per leaf would be one collective per leaf)."""
    leaves, treedef = jax.tree.flatten(tree)
    me, order = jax.process_index(), [_shards(x) for x in leaves]
    local = [{s.device: np.ascontiguousarray(np.asarray(s.data)) for s in x.addressable_shards} for x in leaves]
    parts = [data[d].reshape(-1).view(np.uint8) for shards, data in zip(order, local) for d, _ in shards if d.process_index == me]
    sizes = [sum(int(np.prod(_shard_shape(i, x.shape))) * x.dtype.itemsize for x, shards in zip(leaves, order)
                 for d, i in shards if d.process_index == p) for p in range(jax.process_count())]
    blob = np.zeros(max(sizes), np.uint8)
    blob[: sizes[me]] = np.concatenate(parts) if parts else blob[:0]
    gathered = np.asarray(multihost_utils.process_allgather(blob))  # [process, bytes]
    out, offsets = [np.empty(x.shape, x.dtype) for x in leaves], [0] * jax.process_count()
    for x, shards, full in zip(leaves, order, out):
        for d, index in shards:
            shape, p = _shard_shape(index, x.shape), d.process_index
            n = int(np.prod(shape)) * x.dtype.itemsize
            full[index] = gathered[p, offsets[p]: offsets[p] + n].view(x.dtype).reshape(shape)
            offsets[p] += n
    return jax.tree.unflatten(treedef, out)


def replica_sharding(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P(AXIS))


def sharded_chunk(chunk_fn, mesh: Mesh):
    """jit(shard_map(vmap(chunk))): replicas along axis 0, split across the mesh; each
    replica's traced hyperparameters (ppo.hypers.Hypers, [replicas] per field) along with it;
    the first update, the run's update count (int32 scalars) and the env's params when they are
    arguments (`ppo.train.env_params_argument`; else None) the same for all. A device
    with one replica runs the chunk unbatched: `vmap` over one replica still rewrites every op
    into its batched form, which cost 5% of PureJaxRL's speed on CartPole at 4 envs on a CPU
    (0.93x vs 0.98x, program alone, median of 12 interleaved rounds; docs/performance.md)."""
    batched = jax.vmap(chunk_fn, in_axes=(0, None, 0, None, None))

    def chunk(state, start_update, hypers, num_updates, env_params):  # named so: the executable (and its cache entry) is jit_chunk
        if jax.tree.leaves(state)[0].shape[0] > 1:
            return batched(state, start_update, hypers, num_updates, env_params)
        first = lambda tree: jax.tree.map(lambda x: x[0], tree)  # noqa: E731
        out = chunk_fn(first(state), start_update, first(hypers), num_updates, env_params)
        return jax.tree.map(lambda x: x[None], out)

    return jax.jit(
        jax.shard_map(chunk, mesh=mesh, in_specs=(P(AXIS), P(), P(AXIS), P(), P()), out_specs=(P(AXIS), P(AXIS)),
                      check_vma=False)
    )


def replica_keys(layout: Layout, seeds: list[int]):
    """(param_key, env_key) per replica. In the "envs" layout every replica starts from the
    seed's parameters but steps its own envs."""
    pairs = []
    for replica in range(layout.num_replicas):
        seed = seeds[replica] if layout.mode == "seeds" else seeds[0]
        param_key, env_key = jax.random.split(jax.random.PRNGKey(seed))
        if layout.mode == "envs":
            env_key = jax.random.fold_in(env_key, replica)
        pairs.append((param_key, env_key))
    return pairs


def init_replicas(init_fn, layout: Layout, seeds: list[int], mesh: Mesh, hypers, num_updates: int, env_params):
    """Initialise each replica on its own, then stack and shard. `hypers`: the replicas'
    stacked traced hyperparameters (`Hypers`); `num_updates`: the run's update count;
    `env_params`: the env's params when they are data (`ppo.train.env_params_argument`; None for
    an env whose params are constants): arguments of the program, as `Trainer.init` takes them.

    Not `vmap(init)`: a batched orthogonal initialiser (a batched QR) can deadlock the 2-thread
    XLA CPU pool (docs/toolchain.md). One jitted init per replica keeps the QR unbatched.
    """
    init_one = jax.jit(init_fn)
    updates = start_update_arg(num_updates)
    states = [jax.device_get(init_one(pk, ek, hypers.replica(r), updates, env_params))
              for r, (pk, ek) in enumerate(replica_keys(layout, seeds))]
    stacked = jax.tree.map(lambda *xs: np.stack(xs), *states)
    return put_replicas(stacked, replica_sharding(mesh))


def replica_template(init_fn, layout: Layout, seeds: list[int], mesh: Mesh, hypers, num_updates: int, env_params):
    """The replica-stacked state's structure, shapes and dtypes (zeros), for restoring a
    checkpoint into; the arguments after `mesh` as `init_replicas` takes them. Traced with
    `jax.eval_shape`: nothing is compiled or run (~0.5 s instead of a jitted init per replica);
    falls back to a real init if a leaf is not a numpy dtype."""
    param_key, env_key = replica_keys(layout, seeds)[0]
    shapes = jax.eval_shape(init_fn, param_key, env_key, hypers.replica(0), start_update_arg(num_updates), env_params)
    try:
        return jax.tree.map(lambda s: np.zeros((layout.num_replicas, *s.shape), s.dtype), shapes)
    except TypeError:  # e.g. typed PRNG keys
        return init_replicas(init_fn, layout, seeds, mesh, hypers, num_updates, env_params)


def replicated(mesh: Mesh, value: np.ndarray):
    """A host array (the same on every process) replicated on every device of `mesh`, which may
    span processes: a jitted program over global arrays takes no process-local argument."""
    return jax.make_array_from_callback(value.shape, NamedSharding(mesh, P()), lambda index: value[index])


def start_update_arg(update: int, mesh: Mesh | None = None):
    """`update` as the programs take it, an int32; on `mesh` (one that spans processes)
    replicated on every device, where a host scalar would be placed anew each call."""
    if mesh is None:
        return jnp.asarray(update, dtype=jnp.int32)
    return replicated(mesh, np.asarray(update, dtype=np.int32))
