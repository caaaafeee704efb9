"""The traced hyperparameters, declared once: `traced()` fields of PPOConfig, one `Hypers` struct."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from conftest import TINY, compose_config
from ppo_lab.config import TRACED_PPO_KEYS, PPOConfig, validate
from ppo_lab.ppo.hypers import SCHEDULES, Hypers


def test_the_struct_has_one_field_per_traced_config_key():
    marked = [f.name for f in dataclasses.fields(PPOConfig) if f.metadata.get("traced")]
    assert list(TRACED_PPO_KEYS) == marked
    assert [f.name for f in dataclasses.fields(Hypers)] == [*marked, "spans", "gamma_lambda"]
    assert SCHEDULES == {"lr": ("lr", "lr_final"), "clip_eps": ("clip_eps", "clip_eps_final"),
                         "ent_coef": ("ent_coef_initial", "ent_coef_final")}


def test_per_replica_values_build_stacked_structs():
    ppo = validate(compose_config([*TINY, "ppo.ent_coef_final=0.0"])).ppo
    own = Hypers.of(ppo)
    members = [Hypers.from_values({**dataclasses.asdict(ppo), "lr": lr}) for lr in (1e-3, 3e-4)]
    stacked = Hypers.stack(members)
    assert stacked.lr.shape == (2,) and stacked.spans["ent_coef"].shape == (2,)
    np.testing.assert_array_equal(stacked.lr, np.float32([1e-3, 3e-4]))
    assert stacked.replica(1).lr == np.float32(3e-4)
    assert own.ent_coef_initial == np.float32(ppo.ent_coef_initial)
    assert float(own.scheduled("ent_coef", 5, 10)) == np.float32(ppo.ent_coef_initial) + np.float32(-ppo.ent_coef_initial) * 0.5
    assert own.gamma_lambda == np.float32(ppo.gamma * ppo.gae_lambda)  # float64 product, rounded once
    assert jax.tree.structure(Hypers.replicated(ppo, 3)) == jax.tree.structure(own)
