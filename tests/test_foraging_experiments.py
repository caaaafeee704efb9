"""The Goodhart experiments compose: the reference recipe turns every parity key on, and each
one can be ablated alone from the command line; the blind control is a reward mode."""

from __future__ import annotations

from conftest import run_config


def test_goodhart_reference_turns_on_every_parity_key():
    run = run_config(["experiment=goodhart_reference", "reward=proxy"])
    assert run.experiment == "goodhart_reference" and run.reward.name == "proxy"
    assert run.ppo.num_minibatches == 1
    assert run.ppo.entropy_floor == 0.5 and run.ppo.entropy_floor_coef == 0.05
    assert run.network.privileged_critic and run.network.kind == "cnn"
    assert run.env["fixed_counts"] is True and run.env["grid_size"] == 128
    assert run.ppo.value_norm == "popart" and run.ppo.popart_beta_min == 0.001 and run.ppo.separate_grad_clip


def test_goodhart_reference_ablates_one_key_at_a_time():
    run = run_config(["experiment=goodhart_reference", "ppo.num_minibatches=4", "network.privileged_critic=false"])
    assert run.ppo.num_minibatches == 4 and not run.network.privileged_critic
    assert run.ppo.entropy_floor == 0.5 and run.env["fixed_counts"] is True
    # The recipe at the CPU scale: the scale group can still be picked on the command line.
    small = run_config(["experiment=goodhart_reference", "scale=foraging_cpu", "network=mlp"])
    assert small.env["grid_size"] == 32 and small.ppo.num_minibatches == 1 and small.network.kind == "mlp"


def test_plain_goodhart_keeps_the_lab_defaults():
    run = run_config(["experiment=goodhart_cpu", "reward=ground_truth_blind"])
    assert run.reward["observation"] == "blind"
    assert run.ppo.num_minibatches == 4 and run.ppo.entropy_floor is None
    assert not run.network.privileged_critic and run.env["fixed_counts"] is False
    assert run.ppo.value_norm is None and not run.ppo.separate_grad_clip
