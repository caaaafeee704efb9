"""hardware.precision=bf16: bf16 compute on fp32 parameters and optimiser state, close to fp32."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_lab.bench.configs import compose
from ppo_lab.config import validate
from ppo_lab.errors import ConfigError
from ppo_lab.networks import ActorCritic
from ppo_lab.config import NetworkConfig
from ppo_lab.run.build import build

from conftest import network_config


def test_bf16_computes_in_bf16_and_keeps_fp32_parameters():
    cfg = network_config(kind="cnn", activation="relu", shared_torso=True, conv_channels=(4,), dense_size=8)
    obs = jax.random.normal(jax.random.PRNGKey(0), (2, 5, 5, 3))
    params = ActorCritic(3, cfg, precision="bf16").init(jax.random.PRNGKey(1), obs)
    assert {x.dtype for x in jax.tree.leaves(params)} == {jnp.dtype("float32")}
    jaxpr = str(jax.make_jaxpr(ActorCritic(3, cfg, precision="bf16").apply)(params, obs))
    assert "bf16" in jaxpr
    (logits16, value16), (logits32, value32) = (ActorCritic(3, cfg, precision=p).apply(params, obs) for p in ("bf16", "fp32"))
    assert logits16.dtype == value16.dtype == jnp.float32
    np.testing.assert_allclose(value16, value32, rtol=0.05, atol=0.05)
    np.testing.assert_allclose(logits16, logits32, atol=0.01)


def test_bad_precision_is_a_config_error():
    with pytest.raises(ConfigError, match="hardware.precision.*'fp32', 'bf16'"):
        validate(compose(["env=cartpole", "hardware.precision=fp16"]))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_short_bf16_run_stays_close_to_fp32():
    """Four updates of CartPole from the same start: fp32 state throughout, and the losses and
    the parameters' movement of bf16 close to fp32's."""
    runs = {}
    for precision in ("fp32", "bf16"):
        cfg = validate(compose(["env=cartpole", "ppo.num_envs=8", "ppo.num_steps=32", "ppo.num_minibatches=2",
                                "ppo.update_epochs=2", "ppo.total_timesteps=1024", "hardware.host_devices=1",
                                f"hardware.precision={precision}"]))
        comp = build(cfg, 1)
        trainer, hypers = comp.trainer, comp.hypers.replica(0)
        start = jax.jit(trainer.init)(*jax.random.split(jax.random.PRNGKey(0)), hypers, trainer.num_updates)
        end, metrics = jax.jit(trainer.chunk)(start, jnp.int32(0), hypers, trainer.num_updates)
        runs[precision] = (start, end, metrics)
    (start, end32, m32), (_, end16, m16) = runs["fp32"], runs["bf16"]
    assert {x.dtype for x in jax.tree.leaves((end16.params, end16.opt_state)) if jnp.issubdtype(x.dtype, jnp.floating)} == {jnp.dtype("float32")}
    np.testing.assert_allclose(m16["train/vf_loss"], m32["train/vf_loss"], rtol=0.1, atol=1e-3)
    np.testing.assert_allclose(m16["train/entropy"], m32["train/entropy"], rtol=0.01)
    moved32 = jax.tree.map(lambda a, b: b - a, start.params, end32.params)
    moved16 = jax.tree.map(lambda a, b: b - a, start.params, end16.params)
    num = sum(float(jnp.sum((a - b) ** 2)) for a, b in zip(jax.tree.leaves(moved16), jax.tree.leaves(moved32)))
    den = sum(float(jnp.sum(a**2)) for a in jax.tree.leaves(moved32))
    assert num / den < 0.1  # bf16's parameter updates within ~30% (in norm) of fp32's
