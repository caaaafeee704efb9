"""GAE, the PPO loss, schedules and auto-scaling against small hand-computed cases."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

from ppo_lab.ppo.autoscale import apply_auto_scale, scaled_minibatches_and_epochs
from ppo_lab.ppo.distributions import categorical_entropy, categorical_log_prob
from ppo_lab.ppo.losses import compute_gae, explained_variance, ppo_loss_terms
from ppo_lab.ppo.hypers import Hypers, learning_rate, schedule_values
from ppo_lab.ppo.train import current_learning_rate, make_optimizer

from conftest import ppo_config


def test_gae_three_steps_by_hand():
    # gamma=0.9, lambda=0.5; values 1,2,3; last value 4; no episode ends.
    r, v = jnp.array([1.0, 0.0, 2.0]), jnp.array([1.0, 2.0, 3.0])
    adv, ret = compute_gae(r, v, jnp.zeros(3), jnp.array(4.0), 0.9, 0.5)
    d2 = 2 + 0.9 * 4 - 3  # 2.6
    d1 = 0 + 0.9 * 3 - 2  # 0.7
    d0 = 1 + 0.9 * 2 - 1  # 1.8
    a2 = d2
    a1 = d1 + 0.45 * a2
    a0 = d0 + 0.45 * a1
    np.testing.assert_allclose(adv, [a0, a1, a2], rtol=1e-6)
    np.testing.assert_allclose(ret, np.array([a0, a1, a2]) + np.array([1, 2, 3]), rtol=1e-6)


def test_gae_done_cuts_bootstrap_and_trace():
    # The episode ends at step 1: step 1 sees no future, step 0 still sees step 1.
    r, v = jnp.array([1.0, 1.0, 1.0]), jnp.array([0.5, 0.5, 0.5])
    adv, _ = compute_gae(r, v, jnp.array([0, 1, 0]), jnp.array(10.0), 0.99, 0.95)
    a2 = 1 + 0.99 * 10 - 0.5
    a1 = 1 - 0.5
    a0 = (1 + 0.99 * 0.5 - 0.5) + 0.99 * 0.95 * a1
    np.testing.assert_allclose(adv, [a0, a1, a2], rtol=1e-6)


def test_gae_batched_envs_are_independent():
    r = jnp.array([[1.0, 0.0], [0.0, 1.0]])
    v = jnp.zeros((2, 2))
    adv, _ = compute_gae(r, v, jnp.zeros((2, 2)), jnp.zeros(2), 1.0, 1.0)
    np.testing.assert_allclose(adv, [[1.0, 1.0], [0.0, 1.0]])


def test_lambda_one_gives_discounted_returns():
    r = jnp.array([1.0, 2.0, 3.0])
    _, ret = compute_gae(r, jnp.zeros(3), jnp.zeros(3), jnp.array(0.0), 0.5, 1.0)
    np.testing.assert_allclose(ret, [1 + 0.5 * 2 + 0.25 * 3, 2 + 0.5 * 3, 3])


def _terms(**kw):
    base = dict(
        log_prob=jnp.log(jnp.array([0.5, 0.5])),
        old_log_prob=jnp.log(jnp.array([0.25, 0.5])),
        advantages=jnp.array([1.0, -1.0]),
        value=jnp.array([1.0, 0.0]),
        old_value=jnp.array([0.0, 0.0]),
        returns=jnp.array([2.0, 0.0]),
        entropy=jnp.array([0.5, 0.7]),
        clip_eps=0.2,
        vf_coef=0.5,
        ent_coef=0.01,
        normalize_advantages=False,
    )
    base.update(kw)
    return ppo_loss_terms(**base)


def test_clipped_surrogate_by_hand():
    t = _terms()
    # ratios 2 and 1: sample 0 clipped to 1.2 (adv +1), sample 1 unclipped (adv -1).
    assert float(t.pg_loss) == pytest.approx(-(1.2 * 1 + 1 * -1) / 2)
    assert float(t.clip_frac) == pytest.approx(0.5)
    # k3 KL: (r - 1) - log r = (1 - ln 2) and 0.
    assert float(t.approx_kl) == pytest.approx((1 - np.log(2)) / 2, rel=1e-5)
    assert float(t.entropy) == pytest.approx(0.6)


def test_value_loss_clipped_and_unclipped():
    # value moved 1.0 from old 0.0, clipped to 0.2: errors (1-2)^2=1 vs (0.2-2)^2=3.24 -> max 3.24.
    clipped = _terms()
    assert float(clipped.vf_loss) == pytest.approx(0.5 * (3.24 + 0.0) / 2)
    plain = _terms(clip_vloss=False)
    assert float(plain.vf_loss) == pytest.approx(0.5 * (1.0 + 0.0) / 2)
    assert float(plain.total) == pytest.approx(float(plain.pg_loss) + 0.5 * float(plain.vf_loss) - 0.01 * 0.6, rel=1e-6)


def test_advantage_normalisation_and_entropy_floor():
    t = _terms(normalize_advantages=True)
    # normalised advantages of [1, -1] are [1, -1] (up to eps): same pg loss.
    assert float(t.pg_loss) == pytest.approx(float(_terms().pg_loss), rel=1e-4)
    floor = _terms(entropy_floor=1.0, entropy_floor_coef=2.0)
    assert float(floor.total - _terms().total) == pytest.approx(2.0 * (1.0 - 0.6), rel=1e-5)
    above = _terms(entropy_floor=0.1, entropy_floor_coef=2.0)
    assert float(above.total) == pytest.approx(float(_terms().total))


def test_categorical_helpers():
    logits = jnp.log(jnp.array([[0.25, 0.75]]))
    assert float(categorical_log_prob(logits, jnp.array([1]))[0]) == pytest.approx(np.log(0.75), rel=1e-6)
    assert float(categorical_entropy(logits)[0]) == pytest.approx(-(0.25 * np.log(0.25) + 0.75 * np.log(0.75)), rel=1e-6)


def test_explained_variance():
    assert float(explained_variance(jnp.array([1.0, 2.0, 3.0]), jnp.array([1.0, 2.0, 3.0]))) == pytest.approx(1.0)
    assert float(explained_variance(jnp.zeros(3), jnp.array([1.0, 2.0, 3.0]))) == pytest.approx(0.0)
    assert np.isnan(float(explained_variance(jnp.zeros(3), jnp.ones(3))))


def _ppo(**kw):
    from ppo_lab.config import PPOConfig

    base = dict(lr=1e-3, lr_final=1e-4, anneal_lr=True, gamma=0.99, gae_lambda=0.95, clip_eps=0.2, clip_eps_final=0.1,
                clip_vloss=True, vf_coef=0.5, ent_coef_initial=0.1, ent_coef_final=0.001, entropy_floor=None,
                entropy_floor_coef=0.1, max_grad_norm=0.5, update_epochs=4, num_minibatches=4, normalize_advantages=True,
                bootstrap_truncation=True, num_envs=256, num_steps=128, total_timesteps=10**7, auto_scale=True)
    base.update(kw)
    return ppo_config(**base)


def test_schedules_are_linear_in_updates():
    ppo = _ppo()
    hypers = Hypers.of(ppo)
    start, mid = schedule_values(ppo, 0, 100, hypers), schedule_values(ppo, 50, 100, hypers)
    assert start == pytest.approx({"ent_coef": 0.1, "clip_eps": 0.2})
    assert mid["ent_coef"] == pytest.approx(0.0505)
    assert mid["clip_eps"] == pytest.approx(0.15)
    assert learning_rate(ppo, 0, 100, hypers) == pytest.approx(1e-3)
    assert learning_rate(ppo, 50, 100, hypers) == pytest.approx(5.5e-4)
    assert learning_rate(_ppo(anneal_lr=False), 50, 100, hypers) == pytest.approx(1e-3)


def test_optimizer_steps_at_the_scheduled_learning_rate():
    """The optimiser's own schedule: every minibatch step of update u runs at update u's rate
    (epochs x minibatches = 2 x 2 steps per update), and Adam's first step moves each weight by
    about that rate."""
    import jax
    import optax

    ppo = _ppo(update_epochs=2, num_minibatches=2)
    tx = make_optimizer(ppo, 10, Hypers.of(ppo))
    params = {"w": jnp.zeros(3)}
    state = tx.init(params)
    grads = {"w": jnp.array([1.0, -2.0, 0.5])}
    assert float(current_learning_rate(state)) == pytest.approx(1e-3)
    first, _ = tx.update(grads, state, params)
    np.testing.assert_allclose(first["w"], [-1e-3, 1e-3, -1e-3], rtol=1e-3)
    step = jax.jit(tx.update)
    for count in range(12):
        _, state = step(grads, state, params)
        update = count // 4
        assert float(current_learning_rate(state)) == pytest.approx(1e-3 + (1e-4 - 1e-3) * update / 10, rel=1e-6), count
    counts = [int(v) for _, v in optax.tree.get_all_with_path(state, "count")]
    assert counts and set(counts) == {12}


@pytest.mark.parametrize(
    "envs, steps, mb, epochs, expected",
    [
        (256, 128, 4, 4, (4, 4)),  # the reference batch: unchanged
        (64, 128, 4, 4, (4, 4)),  # smaller: unchanged
        (512, 128, 4, 4, (8, 2)),  # 2x: minibatches x2, epochs 4 // 2 = 2
        (1024, 128, 4, 4, (16, 2)),  # 4x: epochs max(2, 1) = 2
        (4096, 128, 8, 10, (64, 2)),  # 16x: minibatches capped at 64
        (2048, 128, 4, 16, (32, 2)),  # 8x: 16 // 8 = 2
        (768, 128, 4, 12, (12, 4)),  # 3x: 12 // 3 = 4
    ],
)
def test_auto_scale_rule(envs, steps, mb, epochs, expected):
    assert scaled_minibatches_and_epochs(envs * steps, mb, epochs) == expected


def test_auto_scale_epoch_floor_and_switch():
    assert scaled_minibatches_and_epochs(1024 * 128, 4, 4, epoch_floor=1) == (16, 1)
    # A smaller reference batch: 32 x 64 is 4x a reference of 8 x 64, so the rule acts.
    assert scaled_minibatches_and_epochs(32 * 64, 4, 4, epoch_floor=1, reference_batch=8 * 64) == (16, 1)
    small = apply_auto_scale(_ppo(num_envs=32, num_steps=64, auto_scale_reference_batch=512, auto_scale_epoch_floor=2))
    assert (small.num_minibatches, small.update_epochs) == (16, 2)
    off = apply_auto_scale(_ppo(num_envs=1024, auto_scale=False))
    assert (off.num_minibatches, off.update_epochs) == (4, 4)
    on = apply_auto_scale(dataclasses.replace(_ppo(num_envs=1024)))
    assert (on.num_minibatches, on.update_epochs) == (16, 2)
    assert on.batch_size % on.num_minibatches == 0
