"""Networks: the convolutions (im2col, native, plain XLA) agree on one parameter tree; the
privileged critic's input split."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ppo_lab.config import NetworkConfig
import pytest

from ppo_lab.networks import ActorCritic, Conv3x3, conv_for_platform

from conftest import network_config


def test_conv3x3_equals_flax_conv_same_padding():
    x = jax.random.normal(jax.random.PRNGKey(0), (2, 5, 7, 3))
    conv = Conv3x3(4)
    params = conv.init(jax.random.PRNGKey(1), x)
    reference = nn.Conv(4, (3, 3), padding="SAME").apply(params, x)
    np.testing.assert_allclose(conv.apply(params, x), reference, atol=1e-5)
    grads = jax.grad(lambda p: jnp.sum(conv.apply(p, x) ** 2))(params)
    ref_grads = jax.grad(lambda p: jnp.sum(nn.Conv(4, (3, 3), padding="SAME").apply(p, x) ** 2))(params)
    np.testing.assert_allclose(grads["params"]["kernel"], ref_grads["params"]["kernel"], rtol=1e-4, atol=1e-4)


def _cfg(kind, shared=False):
    return network_config(kind=kind, activation="relu", shared_torso=shared, hidden_sizes=(8,), conv_channels=(4,), dense_size=8)


@pytest.mark.slow
def test_privileged_critic_actor_ignores_extra_channels():
    net = ActorCritic(3, _cfg("cnn"), actor_obs_channels=2)
    obs = jax.random.normal(jax.random.PRNGKey(0), (1, 5, 5, 4))
    params = net.init(jax.random.PRNGKey(1), obs)
    changed = obs.at[..., 2:].add(1.0)  # only the critic's privileged channels differ
    logits, value = net.apply(params, obs)
    logits2, value2 = net.apply(params, changed)
    np.testing.assert_array_equal(logits, logits2)
    assert not np.allclose(value, value2)


def test_shared_torso_has_one_tower():
    obs = jnp.ones((1, 5, 5, 2))
    shared = ActorCritic(3, _cfg("cnn", shared=True)).init(jax.random.PRNGKey(0), obs)["params"]
    separate = ActorCritic(3, _cfg("cnn")).init(jax.random.PRNGKey(0), obs)["params"]
    assert "critic_torso" not in shared and "critic_torso" in separate
    logits, value = ActorCritic(3, _cfg("mlp")).apply(ActorCritic(3, _cfg("mlp")).init(jax.random.PRNGKey(0), obs), obs)
    assert logits.shape == (1, 3) and value.shape == (1,)


def test_conv_follows_the_backend_unless_forced():
    assert conv_for_platform("cpu") == "im2col"
    assert conv_for_platform("gpu") == conv_for_platform("tpu") == "native"
    assert conv_for_platform("gpu", "im2col") == "im2col"


@pytest.mark.slow
def test_a_checkpoint_from_one_convolution_runs_on_the_others():
    """Params initialised with im2col (CPU) give the same outputs and gradients with the native
    convolution (GPU/TPU) and JAX's plain one, also with seeds vmapped (batched kernels)."""
    cfg = network_config(kind="cnn", activation="relu", shared_torso=True, conv_channels=(4, 8), dense_size=16)
    obs = jax.random.normal(jax.random.PRNGKey(0), (3, 6, 7, 5))
    seeds = jax.random.split(jax.random.PRNGKey(1), 2)
    params = jax.vmap(lambda k: ActorCritic(3, cfg, conv="im2col").init(k, obs))(seeds)
    same_tree = ActorCritic(3, cfg, conv="native").init(jax.random.PRNGKey(1), obs)
    assert jax.tree.structure(same_tree) == jax.tree.structure(jax.tree.map(lambda x: x[0], params))

    def loss(p, conv):
        logits, value = ActorCritic(3, cfg, conv=conv).apply(p, obs)
        return jnp.sum(jnp.sin(logits)) + jnp.sum(value**2)

    results = {conv: jax.vmap(jax.value_and_grad(loss), in_axes=(0, None))(params, conv) for conv in ("im2col", "native", "xla")}
    for conv in ("native", "xla"):
        np.testing.assert_allclose(results[conv][0], results["im2col"][0], rtol=1e-5, atol=1e-5)
        for got, want in zip(jax.tree.leaves(results[conv][1]), jax.tree.leaves(results["im2col"][1])):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="conv='fft'"):
        ActorCritic(3, cfg, conv="fft").init(jax.random.PRNGKey(0), obs)


@pytest.mark.slow
@pytest.mark.parametrize("replicas", [3, 35])  # unrolled, and a lax.map past UNROLL_REPLICAS
def test_native_convolution_runs_one_ordinary_convolution_per_replica(replicas):
    """Under vmap with a kernel per replica, `native` equals JAX's own batching (value, input
    and kernel gradients), also when only the kernel or only the input is batched, and its
    program has no grouped convolution (the grouped kernel gradient was what XLA expanded into
    a dense convolution over all seeds)."""
    from ppo_lab.networks import UNROLL_REPLICAS, native_conv3x3, xla_conv3x3

    assert (replicas > UNROLL_REPLICAS) == (replicas == 35)
    kernels = jax.random.normal(jax.random.PRNGKey(0), (replicas, 3, 3, 3, 4))
    x = jax.random.normal(jax.random.PRNGKey(1), (replicas, 2, 5, 5, 3))

    def loss(conv):
        return lambda k, x: jnp.sum(jnp.tanh(conv(x, k)) ** 2)

    for in_axes in [(0, 0), (0, None), (None, 0)]:
        args = (kernels if in_axes[0] == 0 else kernels[0], x if in_axes[1] == 0 else x[0])
        got = jax.vmap(jax.value_and_grad(loss(native_conv3x3), argnums=(0, 1)), in_axes=in_axes)(*args)
        want = jax.vmap(jax.value_and_grad(loss(xla_conv3x3), argnums=(0, 1)), in_axes=in_axes)(*args)
        for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
    program = jax.jit(jax.vmap(jax.grad(loss(native_conv3x3), argnums=(0, 1)))).lower(kernels, x).as_text()
    assert "convolution" in program
    assert "feature_group_count = 1" in program and not any(
        f"{kind}_group_count = {replicas}" in program for kind in ("feature", "batch"))
