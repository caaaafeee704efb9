"""Flax actor-critic networks: an MLP and the reference CNN, feed-forward or recurrent.

`ActorCritic(obs) -> (policy, value)`: the policy output is the logits, or a diagonal
Gaussian's `(mean, log_std)` with `continuous`. Actor and critic have separate towers unless
`shared_torso` (one tower, two heads: half the compute, the usual choice for CNNs).
When the env sets `actor_obs_channels`, the actor sees only the first N channels of the
observation and the critic sees all of them (a privileged critic). A privileged critic with
`shared_torso` is the reference's (goodharts_law `goodharts/training/ppo/models.py`, `ValueHead`
with `aux_combine`): the value head sits on the actor's torso, and its input is the actor's
features, the critic's extra channels' pixels, and the values of the constant planes among
them (the env's last `critic_plane_channels` channels, e.g. a world-wide density broadcast over
the image: read once per observation), through one dense layer of the features' width with ReLU.

With `network.recurrent` (gru | lstm) a recurrent cell sits between each torso and its head(s)
(PureJaxRL's `ppo_rnn.py` shape): `ActorCritic(obs [T, B, ...], carry, reset [T, B]) ->
(carry, logits [T, B, A], values [T, B])` runs the torso on all T x B observations at once and
scans only the cell over time, zeroing each env's state before a step whose `reset` is set
(the previous step ended its episode). The carry is `{"actor": cell state}` with a shared
torso, plus `"critic"` with separate towers (a privileged critic included); a GRU's state is
`[B, recurrent_size]`, an LSTM's the pair (c, h). `initial_carry(batch)` is all zeros.

Two choices follow the hardware, neither changes the parameters (names, shapes, dtypes,
initial values), so a checkpoint trained with one loads with the other:
- `conv`: "im2col" (`Conv3x3`, matmuls) on CPU, "native" (`flax.linen.Conv`) on GPU and TPU
  (`conv_for_platform`);
- `precision`: fp32 (float32), or bf16: layers compute in bfloat16 on fp32 parameters (flax's
  `dtype` vs `param_dtype`); logits and values come out in fp32, so losses, advantages and the
  optimiser (state and updates) stay fp32.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ppo_lab import parts
from ppo_lab.config import PRECISIONS, NetworkConfig

ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu, "gelu": nn.gelu, "elu": nn.elu}
COMPUTE_DTYPES = dict(zip(PRECISIONS, (jnp.float32, jnp.bfloat16)))


def conv_for_platform(platform: str, requested: str = "auto") -> str:
    """`hardware.conv`, where "auto" is: im2col on CPU (XLA:CPU's convolution gradient inside loops is ~15x slower than matmuls);
    the native convolution on GPU/TPU (im2col there materialises nine shifted copies of every
    activation: 1.6x slower and more memory on an H100, docs/performance.md)."""
    if requested != "auto":
        return requested
    return "im2col" if platform == "cpu" else "native"


def _dense(features: int, scale: float, dtype=None) -> nn.Dense:
    return nn.Dense(features, kernel_init=nn.initializers.orthogonal(scale), bias_init=nn.initializers.zeros, dtype=dtype)


class MLPTorso(nn.Module):
    hidden_sizes: Sequence[int]
    activation: str
    dtype: Any = None

    @property
    def features(self) -> int:
        """The width of what the torso returns."""
        return self.hidden_sizes[-1]

    @nn.compact
    def __call__(self, x):
        x = x.reshape((x.shape[0], -1))
        for size in self.hidden_sizes:
            x = ACTIVATIONS[self.activation](_dense(size, np.sqrt(2), self.dtype)(x))
        return x


CONV_INIT = nn.initializers.orthogonal(np.sqrt(2))
_NHWC = ("NHWC", "HWIO", "NHWC")


def im2col_conv3x3(x, kernel):
    """3x3 SAME convolution as shifted slices and one matmul. Why: XLA on CPU runs the gradient
    of a real convolution about 15x slower when it sits inside a loop, and the trainer's updates,
    epochs and minibatches are all loops (docs/performance.md); matmuls do not have that problem.
    On small observations (11x11) the 9x larger patch tensor costs little there."""
    height, width, channels = x.shape[-3:]
    padded = jnp.pad(x, [(0, 0)] * (x.ndim - 3) + [(1, 1), (1, 1), (0, 0)])
    patches = jnp.concatenate([padded[..., dy : dy + height, dx : dx + width, :] for dy in range(3) for dx in range(3)], axis=-1)
    return patches @ kernel.reshape(9 * channels, kernel.shape[-1])


def xla_conv3x3(x, kernel):
    """XLA's own convolution, differentiated by JAX (what `flax.linen.Conv` runs)."""
    return jax.lax.conv_general_dilated(x, kernel, (1, 1), "SAME", dimension_numbers=_NHWC)


# Up to this many replicas the loop is unrolled (measured up to 16 seeds on an H100); beyond
# it, a `lax.map` keeps the program's size fixed (e.g. someone vmapping over thousands of envs).
UNROLL_REPLICAS = 32


def per_replica(fn):
    """`fn` that, under `vmap`, runs once per replica (a loop over the vmapped axis) instead of
    through JAX's batching rules; unbatched it is `fn`."""
    wrapped = jax.custom_batching.custom_vmap(fn)

    @wrapped.def_vmap
    def _loop(axis_size, in_batched, *args):
        mapped = [a for a, batched in zip(args, in_batched) if batched]

        def one(replica_args):  # `fn` on one replica's slice of each batched argument
            it = iter(replica_args)
            return wrapped(*[next(it) if batched else a for a, batched in zip(args, in_batched)])

        if axis_size > UNROLL_REPLICAS:
            return jax.lax.map(one, mapped), True
        return jnp.stack([one([a[i] for a in mapped]) for i in range(axis_size)]), True

    return wrapped


def _input_grad(x, kernel, grad):
    return jax.vjp(lambda x_: xla_conv3x3(x_, kernel), x)[1](grad)[0]


def _kernel_grad(x, grad):
    kernel = jnp.zeros((3, 3, x.shape[-1], grad.shape[-1]), x.dtype)
    return jax.vjp(lambda k: xla_conv3x3(x, k), kernel)[1](grad)[0]


_conv_per_replica = per_replica(xla_conv3x3)
_input_grad_per_replica = per_replica(_input_grad)
_kernel_grad_per_replica = per_replica(_kernel_grad)


@jax.custom_vjp
def native_conv3x3(x, kernel):
    """XLA's (cuDNN's) convolution and its two gradients, each run one replica at a time under
    `vmap` (`per_replica`); unbatched, exactly `xla_conv3x3`.

    Why: with seeds vmapped every seed has its own kernel. JAX batches such a convolution into
    a grouped one (`feature_group_count` = seeds) and its kernel gradient into a
    `batch_group_count` convolution, which XLA expands into a dense convolution over all seeds
    (seeds x the memory and the work: one 36.5 GiB buffer at 8 seeds on an H100). One ordinary
    convolution per seed is what cuDNN is fast at. On an H100 (8 seeds, bf16, the reference
    CNN's forward and backward on 24,576 observations per seed): 54 ms per replica loop against
    76 ms with grouped forward and input-gradient convolutions and 129 ms with the kernel
    gradient as shifted matmuls (docs/performance.md)."""
    return _conv_per_replica(x, kernel)


def _native_fwd(x, kernel):
    return _conv_per_replica(x, kernel), (x, kernel)


def _native_bwd(residuals, grad):
    x, kernel = residuals
    return _input_grad_per_replica(x, kernel, grad), _kernel_grad_per_replica(x, grad).astype(kernel.dtype)


native_conv3x3.defvjp(_native_fwd, _native_bwd)
CONV_FUNCTIONS = {"im2col": im2col_conv3x3, "native": native_conv3x3, "xla": xla_conv3x3}


class Conv3x3(nn.Module):
    """A 3x3 SAME convolution with `nn.Conv(features, (3, 3), padding="SAME")`'s parameters
    (kernel (3, 3, C, F), bias), computed by `impl`: "im2col" (CPU), "native" (GPU/TPU) or
    "xla" (JAX's plain convolution gradient, for comparison)."""
    features: int
    impl: str = "im2col"
    dtype: Any = None  # compute dtype (None: the input's); parameters are fp32

    @nn.compact
    def __call__(self, x):
        if self.impl not in CONV_FUNCTIONS:
            raise ValueError(f"conv={self.impl!r}: expected one of {list(CONV_FUNCTIONS)}")
        kernel = self.param("kernel", CONV_INIT, (3, 3, x.shape[-1], self.features))
        bias = self.param("bias", nn.initializers.zeros, (self.features,))
        dtype = self.dtype or x.dtype
        lead = x.shape[:-3]  # the native convolution takes one batch axis
        y = CONV_FUNCTIONS[self.impl](x.astype(dtype).reshape((-1,) + x.shape[-3:]), kernel.astype(dtype))
        return y.reshape(lead + y.shape[1:]) + bias.astype(dtype)


class CNNTorso(nn.Module):
    """3x3 convolutions (padding SAME), flatten, one dense layer. Input NHWC."""
    conv_channels: Sequence[int]
    dense_size: int
    activation: str
    conv: str = "im2col"
    dtype: Any = None

    @property
    def features(self) -> int:
        """The width of what the torso returns."""
        return self.dense_size

    @nn.compact
    def __call__(self, x):
        if x.ndim == 2:  # a flat observation: treat as a 1x1 image with C channels
            x = x[:, None, None, :]
        act = ACTIVATIONS[self.activation]
        for channels in self.conv_channels:
            x = act(Conv3x3(channels, self.conv, self.dtype)(x))
        x = x.reshape((x.shape[0], -1))
        return act(_dense(self.dense_size, np.sqrt(2), self.dtype)(x))


class ImpalaResidual(nn.Module):
    """relu -> conv -> relu -> conv, plus the input (IMPALA's residual block)."""
    channels: int
    conv: str = "im2col"
    dtype: Any = None

    @nn.compact
    def __call__(self, x):
        y = Conv3x3(self.channels, self.conv, self.dtype)(nn.relu(x))
        return x + Conv3x3(self.channels, self.conv, self.dtype)(nn.relu(y))


class ImpalaTorso(nn.Module):
    """The IMPALA CNN (Espeholt et al. 2018; the Procgen paper's network, `network=impala`): per
    stack a 3x3 conv, a 3x3 max pool of stride 2 and two residual blocks; then relu, flatten and
    one dense layer. Input NHWC. Convolutions by `conv`, as the reference CNN's (`Conv3x3`)."""
    stack_channels: Sequence[int]
    dense_size: int
    activation: str
    conv: str = "im2col"
    dtype: Any = None

    @property
    def features(self) -> int:
        """The width of what the torso returns."""
        return self.dense_size

    @nn.compact
    def __call__(self, x):
        for channels in self.stack_channels:
            x = Conv3x3(channels, self.conv, self.dtype)(x)
            x = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
            x = ImpalaResidual(channels, self.conv, self.dtype)(x)
            x = ImpalaResidual(channels, self.conv, self.dtype)(x)
        x = nn.relu(x).reshape((x.shape[0], -1))
        return ACTIVATIONS[self.activation](_dense(self.dense_size, np.sqrt(2), self.dtype)(x))


def _torso(cfg: NetworkConfig, name: str, conv: str, dtype) -> nn.Module:
    """The torso `conf/network/<kind>.yaml` names (`_target_`), with its own keys; a torso that
    has a `conv` field (the CNN) gets the hardware's convolution."""
    torso = parts.load("network._target_", cfg.target)
    fields = getattr(torso, "__dataclass_fields__", {})
    # Only the torso's own fields: a scale file sizes both kinds (hidden_sizes for an MLP,
    # conv_channels for a CNN) whichever `network=` is chosen.
    kwargs = {k: v for k, v in cfg.torso_kwargs().items() if k in fields}
    kwargs.update(activation=cfg.activation, dtype=dtype, name=name)
    if "conv" in fields:
        kwargs["conv"] = conv
    return torso(**kwargs)


CELLS = {"gru": nn.GRUCell, "lstm": nn.OptimizedLSTMCell}  # config.RECURRENT_CELLS


def reset_where(reset, carry):
    """`carry` with each env's state zeroed where `reset` [B] is set."""
    return jax.tree.map(lambda c: jnp.where(reset[:, None], jnp.zeros_like(c), c), carry)


class ResettingCell(nn.Module):
    """One time step of a GRU or LSTM over a batch: the state is zeroed where `reset` first.
    The state stays float32 (with bf16 compute too): it is carried across many steps."""
    kind: str
    size: int
    dtype: Any = None

    @nn.compact
    def __call__(self, carry, inputs):
        x, reset = inputs
        carry, y = CELLS[self.kind](features=self.size, dtype=self.dtype, param_dtype=jnp.float32)(reset_where(reset, carry), x)
        return jax.tree.map(lambda c: c.astype(jnp.float32), carry), y


# The cell over a sequence (time leading), its parameters shared by every step.
ScannedCell = nn.scan(ResettingCell, variable_broadcast="params", split_rngs={"params": False}, in_axes=0, out_axes=0)


class ObsNorm(nn.Module):
    """Observations standardised by running statistics (`ppo.normalize_obs`).

    The statistics (`mean`, `var`, `count`) are parameters of the network, so that everything
    that loads parameters (checkpoints, evaluation, replay, the MLflow model) normalises as the
    trainer did; they are not learned: the gradient is stopped here (Adam turns a zero gradient
    into a zero step), and the trainer moves them toward each rollout's observations
    (`ppo_lab.ppo.normalize.update_obs_norm`)."""

    @nn.compact
    def __call__(self, obs):
        mean = self.param("mean", nn.initializers.zeros, obs.shape[1:], jnp.float32)
        var = self.param("var", nn.initializers.ones, obs.shape[1:], jnp.float32)
        self.param("count", nn.initializers.constant(1e-4), (), jnp.float32)
        mean, var = jax.lax.stop_gradient(mean), jax.lax.stop_gradient(var)
        return ((obs.astype(jnp.float32) - mean) * jax.lax.rsqrt(var + 1e-8)).astype(obs.dtype)


class PolicyValue(NamedTuple):
    """One step of the network on a batch (`ActorCritic.policy_and_value`, called through
    `ppo.rollout.policy_and_value` by training, evaluation, replay and the benchmark)."""
    policy: Any  # logits, or a Gaussian's (mean, log_std)
    value: jax.Array  # [B]
    carry: Any = None  # a recurrent network's state after the step (None: feed-forward)
    extra_value: jax.Array | None = None  # the values of `extra_obs` (None: none asked for)


class ActorCritic(nn.Module):
    action_dim: int
    cfg: NetworkConfig
    actor_obs_channels: int | None = None
    # Of the critic's extra channels, how many at the end are constant planes (`Env.critic_plane_channels`).
    critic_plane_channels: int = 0
    conv: str = "im2col"  # conv_for_platform
    precision: str = PRECISIONS[0]  # COMPUTE_DTYPES
    # A Box action space: the policy output is (mean, log_std) of a diagonal Gaussian, the
    # log-std a state-independent parameter (ppo_lab.ppo.gaussian); else the logits.
    continuous: bool = False
    normalize_obs: bool = False  # ObsNorm in front of both towers

    def setup(self):
        if self.precision not in COMPUTE_DTYPES:
            raise ValueError(f"precision={self.precision!r}: expected one of {list(COMPUTE_DTYPES)}")
        dtype = COMPUTE_DTYPES[self.precision]
        self.shared = self.cfg.shared_torso and self.actor_obs_channels is None
        # The reference's privileged critic: a head on the actor's torso (module docstring).
        self.shared_privileged = self.cfg.shared_torso and self.actor_obs_channels is not None
        self.actor_torso = _torso(self.cfg, "actor_torso", self.conv, dtype)
        if self.shared_privileged:
            width = self.actor_torso.features
            self.critic_combine = _dense(width, np.sqrt(2), dtype)
        elif not self.shared:
            self.critic_torso = _torso(self.cfg, "critic_torso", self.conv, dtype)
        self.policy_head = _dense(self.action_dim, 0.01, dtype)
        self.value_head = _dense(1, 1.0, dtype)
        if self.cfg.head_hidden:
            self.policy_hidden = _dense(self.cfg.head_hidden, self.cfg.head_hidden_gain, dtype)
            self.value_hidden = _dense(self.cfg.head_hidden, self.cfg.head_hidden_gain, dtype)
        if self.recurrent:
            self.actor_cell = ScannedCell(self.cfg.recurrent, self.cfg.recurrent_size, dtype)
            if not self.shared:
                self.critic_cell = ScannedCell(self.cfg.recurrent, self.cfg.recurrent_size, dtype)
        if self.continuous:
            self.log_std = self.param("log_std", nn.initializers.zeros, (self.action_dim,), jnp.float32)
        if self.normalize_obs:
            self.obs_norm = ObsNorm()

    @property
    def recurrent(self) -> bool:
        return self.cfg.is_recurrent

    def _values(self, features):
        """The value head: linear, or a hidden layer first (`network.head_hidden`): [..., features] -> [...]."""
        if self.cfg.head_hidden:
            features = ACTIVATIONS[self.cfg.activation](self.value_hidden(features))
        return jnp.squeeze(self.value_head(features), -1).astype(jnp.float32)

    def initial_carry(self, batch: int):
        """The recurrent state of `batch` envs at an episode's start (zeros; needs no params)."""
        size = self.cfg.recurrent_size
        one = (jnp.zeros((batch, size)), jnp.zeros((batch, size))) if self.cfg.recurrent == "lstm" else jnp.zeros((batch, size))
        shared = self.cfg.shared_torso and self.actor_obs_channels is None
        return {"actor": one} if shared else {"actor": one, "critic": one}

    def init_params(self, key, obs):
        """Parameters from a batch of observations (one step; no time axis)."""
        if not self.recurrent:
            return self.init(key, obs)
        n = obs.shape[0]
        return self.init(key, obs[None], self.initial_carry(n), jnp.zeros((1, n), bool))

    def _policy(self, actor_features):
        """The policy head (linear, or a hidden layer first: `network.head_hidden`): logits, or a Gaussian's (mean, log_std)."""
        if self.cfg.head_hidden:
            actor_features = ACTIVATIONS[self.cfg.activation](self.policy_hidden(actor_features))
        out = self.policy_head(actor_features).astype(jnp.float32)
        return (out, jnp.broadcast_to(self.log_std, out.shape)) if self.continuous else out

    def _norm(self, obs):
        return self.obs_norm(obs) if self.normalize_obs else obs

    def _actor_obs(self, obs):
        return obs if self.actor_obs_channels is None else obs[..., : self.actor_obs_channels]

    def _privileged_features(self, actor_features, obs):
        """The reference's value-head input: actor features, the extra channels' pixels but the
        constant planes, and those planes read once per observation, through a dense + ReLU."""
        extra = obs[..., self.actor_obs_channels :]
        n_pixels = extra.shape[-1] - self.critic_plane_channels
        pixels = extra[..., :n_pixels].reshape((extra.shape[0], -1))
        planes = extra[:, 0, 0, n_pixels:] if extra.ndim == 4 else extra[..., n_pixels:].reshape((extra.shape[0], -1))
        combined = jnp.concatenate([actor_features, pixels.astype(actor_features.dtype), planes.astype(actor_features.dtype)], -1)
        return nn.relu(self.critic_combine(combined))

    def _critic_features(self, actor_features, obs):
        if self.shared:
            return actor_features
        if self.shared_privileged:
            return self._privileged_features(actor_features, obs)
        return self.critic_torso(obs)

    def __call__(self, obs, carry=None, reset=None):
        """Feed-forward: `(policy, value)` of `obs` [B, ...]. Recurrent: `(carry, policy,
        values)` of the sequences `obs` [T, B, ...] from `carry`, `reset` [T, B]."""
        if self.recurrent:
            return self.sequence(obs, carry, reset)
        obs = self._norm(obs)
        actor_features = self.actor_torso(self._actor_obs(obs))
        critic_features = self._critic_features(actor_features, obs)
        return self._policy(actor_features), self._values(critic_features)

    def policy_and_value(self, obs, memory=None, extra_obs=None) -> PolicyValue:
        """One step on a batch `obs` [B, ...]: the policy and values; a recurrent network starts
        from `memory = (carry, reset)` (ppo.rollout.initial_memory) and hands back its carry.
        `extra_obs` [B, ...]: their values too, in the same pass (`with_extra_values`)."""
        if memory is None:
            if extra_obs is None:
                return PolicyValue(*self(obs))
            policy, values, extra = self.with_extra_values(obs, extra_obs)
            return PolicyValue(policy, values, None, extra)
        if extra_obs is None:
            carry, policy, values = self.step(obs, *memory)
            return PolicyValue(policy, values, carry)
        carry, policy, values, extra = self.step_with_extra_values(obs, *memory, extra_obs)
        return PolicyValue(policy, values, carry, extra)

    def value(self, obs):
        obs = self._norm(obs)
        actor_features = self.actor_torso(self._actor_obs(obs)) if self.shared or self.shared_privileged else None
        return self._values(self._critic_features(actor_features, obs))

    def with_extra_values(self, obs, extra_obs):
        """`(logits, values)` of `obs` and the values of `extra_obs`, in one pass: the critic
        (or the shared torso) runs once on both batches stacked. Why: the rollout needs the
        value of the previous step's final observations (the truncation bootstrap) next to
        this step's forward pass, and at rollout sizes one call on 2N rows costs about what
        one call on N rows costs (per-op overhead on a CPU, latency on a GPU)."""
        obs, extra_obs = self._norm(obs), self._norm(extra_obs)
        both = jnp.concatenate([obs, extra_obs])
        n = obs.shape[0]
        if self.shared:
            features = self.actor_torso(both)
            actor_features, critic_features = features[:n], features
        elif self.shared_privileged:
            features = self.actor_torso(self._actor_obs(both))
            actor_features, critic_features = features[:n], self._privileged_features(features, both)
        else:
            actor_features, critic_features = self.actor_torso(self._actor_obs(obs)), self.critic_torso(both)
        policy = self._policy(actor_features)
        values = self._values(critic_features)
        return policy, values[:n], values[n:]

    # --- recurrent ---------------------------------------------------------------------------

    def _over_time(self, torso, obs):
        """The torso on every one of [T, B, ...] observations at once: [T, B, features]."""
        features = torso(obs.reshape((-1,) + obs.shape[2:]))
        return features.reshape(obs.shape[:2] + features.shape[1:])

    def _norm_over_time(self, obs):
        """`_norm` of [T, B, ...] observations (the statistics are per observation element)."""
        if not self.normalize_obs:
            return obs
        return self._norm(obs.reshape((-1,) + obs.shape[2:])).reshape(obs.shape)

    def sequence(self, obs, carry, reset):
        obs = self._norm_over_time(obs)
        actor_carry, actor_out = self.actor_cell(carry["actor"], (self._over_time(self.actor_torso, self._actor_obs(obs)), reset))
        new_carry = {"actor": actor_carry}
        critic_out = actor_out
        if not self.shared:
            new_carry["critic"], critic_out = self.critic_cell(carry["critic"], (self._over_time(self.critic_torso, obs), reset))
        return new_carry, self._policy(actor_out), self._values(critic_out)

    def step(self, obs, carry, reset):
        """One step of `sequence`: `(carry, policy [B, ...], values [B])` of `obs` [B, ...]."""
        carry, policy, values = self.sequence(obs[None], carry, reset[None])
        return carry, jax.tree.map(lambda p: p[0], policy), values[0]

    def step_value(self, obs, carry, reset):
        """The values [B] of one step (the critic's cell only, with separate towers)."""
        if self.shared:
            return self.step(obs, carry, reset)[2]
        obs = self._norm_over_time(obs[None])
        _, out = self.critic_cell(carry["critic"], (self._over_time(self.critic_torso, obs), reset[None]))
        return self._values(out[0])

    def step_with_extra_values(self, obs, carry, reset, extra_obs):
        """`step`, and the values of `extra_obs` [B, ...] from `carry` NOT reset: the previous
        step's final observations continue the episode that `reset` ends (the truncation
        bootstrap, as `with_extra_values`). The critic runs once on both batches stacked."""
        n = obs.shape[0]
        stack = lambda a, b: jnp.concatenate([a, b])  # noqa: E731
        both_obs = stack(obs, extra_obs)
        both_carry = jax.tree.map(lambda c: stack(c, c), carry)
        both_reset = stack(reset, jnp.zeros_like(reset))
        if self.shared:
            new_carry, policy, values = self.step(both_obs, both_carry, both_reset)
            first_n = lambda x: x[:n]  # noqa: E731
            return jax.tree.map(first_n, new_carry), jax.tree.map(first_n, policy), values[:n], values[n:]
        both_obs = self._norm_over_time(both_obs[None])
        actor_carry, actor_out = self.actor_cell(carry["actor"], (self._over_time(self.actor_torso, self._actor_obs(both_obs[:, :n])), reset[None]))
        critic_carry, critic_out = self.critic_cell(both_carry["critic"], (self._over_time(self.critic_torso, both_obs), both_reset[None]))
        policy = self._policy(actor_out[0])
        values = self._values(critic_out[0])
        new_carry = {"actor": actor_carry, "critic": jax.tree.map(lambda c: c[:n], critic_carry)}
        return new_carry, policy, values[:n], values[n:]
