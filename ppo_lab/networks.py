"""Flax actor-critic networks: an MLP and the reference CNN.

`ActorCritic(obs) -> (logits, value)`. Actor and critic have separate towers unless
`shared_torso` (one tower, two heads: half the compute, the usual choice for CNNs).
When the env sets `actor_obs_channels`, the actor sees only the first N channels of the
observation and the critic sees all of them (a privileged critic).
"""

from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax.numpy as jnp
import numpy as np

from ppo_lab.config import NetworkConfig

ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu, "gelu": nn.gelu, "elu": nn.elu}


def _dense(features: int, scale: float) -> nn.Dense:
    return nn.Dense(features, kernel_init=nn.initializers.orthogonal(scale), bias_init=nn.initializers.zeros)


class MLPTorso(nn.Module):
    hidden_sizes: Sequence[int]
    activation: str

    @nn.compact
    def __call__(self, x):
        x = x.reshape((x.shape[0], -1))
        for size in self.hidden_sizes:
            x = ACTIVATIONS[self.activation](_dense(size, np.sqrt(2))(x))
        return x


class Conv3x3(nn.Module):
    """A 3x3 SAME convolution written as shifted slices and one matmul (im2col).

    Same function and parameter shapes as `nn.Conv(features, (3, 3), padding="SAME")`, built
    from pad/slice/concat/dot only. Why: XLA on CPU runs the gradient of a real convolution
    about 15x slower when it sits inside a loop, and the trainer's updates, epochs and
    minibatches are all loops (docs/performance.md); matmuls do not have that problem. On small
    observations (11x11) the 9x larger patch tensor costs little.
    """

    features: int

    @nn.compact
    def __call__(self, x):
        height, width, channels = x.shape[-3:]
        kernel = self.param("kernel", nn.initializers.orthogonal(np.sqrt(2)), (3, 3, channels, self.features))
        bias = self.param("bias", nn.initializers.zeros, (self.features,))
        padded = jnp.pad(x, [(0, 0)] * (x.ndim - 3) + [(1, 1), (1, 1), (0, 0)])
        patches = jnp.concatenate(
            [padded[..., dy : dy + height, dx : dx + width, :] for dy in range(3) for dx in range(3)], axis=-1
        )
        return patches @ kernel.reshape(9 * channels, self.features) + bias


class CNNTorso(nn.Module):
    """3x3 convolutions (padding SAME), flatten, one dense layer. Input NHWC."""

    conv_channels: Sequence[int]
    dense_size: int
    activation: str

    @nn.compact
    def __call__(self, x):
        if x.ndim == 2:  # a flat observation: treat as a 1x1 image with C channels
            x = x[:, None, None, :]
        act = ACTIVATIONS[self.activation]
        for channels in self.conv_channels:
            x = act(Conv3x3(channels)(x))
        x = x.reshape((x.shape[0], -1))
        return act(_dense(self.dense_size, np.sqrt(2))(x))


def _torso(cfg: NetworkConfig, name: str) -> nn.Module:
    if cfg.kind == "mlp":
        return MLPTorso(cfg.hidden_sizes, cfg.activation, name=name)
    return CNNTorso(cfg.conv_channels, cfg.dense_size, cfg.activation, name=name)


class ActorCritic(nn.Module):
    action_dim: int
    cfg: NetworkConfig
    actor_obs_channels: int | None = None

    def setup(self):
        self.shared = self.cfg.shared_torso and self.actor_obs_channels is None
        self.actor_torso = _torso(self.cfg, "actor_torso")
        if not self.shared:
            self.critic_torso = _torso(self.cfg, "critic_torso")
        self.policy_head = _dense(self.action_dim, 0.01)
        self.value_head = _dense(1, 1.0)

    def _actor_obs(self, obs):
        return obs if self.actor_obs_channels is None else obs[..., : self.actor_obs_channels]

    def __call__(self, obs):
        actor_features = self.actor_torso(self._actor_obs(obs))
        critic_features = actor_features if self.shared else self.critic_torso(obs)
        return self.policy_head(actor_features), jnp.squeeze(self.value_head(critic_features), -1)

    def value(self, obs):
        features = self.actor_torso(obs) if self.shared else self.critic_torso(obs)
        return jnp.squeeze(self.value_head(features), -1)
