"""The traced hyperparameters, declared once: `traced()` fields of PPOConfig, one `Hypers` struct."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from conftest import TINY, compose_config
from ppo_lab.config import TRACED_PPO_KEYS, PPOConfig, validate
from ppo_lab.ppo.hypers import SCHEDULES, Hypers
from ppo_lab.ppo.parallel import make_mesh, replica_sharding, replica_template, start_update_arg
from ppo_lab.ppo.train import env_params_argument
from ppo_lab.run.build import build
from ppo_lab.run.evaluate import episode_runner
from ppo_lab.run.loop import LoweredChunk


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


def test_runs_that_differ_only_in_their_budget_are_one_program():
    """ppo.total_timesteps changes no compiled program (the update count is an argument of the
    chunk and of init): a run given a larger budget, or a sweep's shorter run, loads the
    programs the persistent compilation cache holds instead of compiling them again."""
    lowered = []
    for total in (2048, 8192):
        comp = build(validate(compose_config([*TINY, f"ppo.total_timesteps={total}"])), 1)
        mesh = make_mesh(comp.layout, jax.devices()[:1])
        state = replica_template(comp.trainer.init, comp.layout, [0], mesh)
        hypers = comp.hypers.sharded(replica_sharding(mesh))
        keys = jax.random.split(jax.random.PRNGKey(0))
        init = jax.jit(comp.trainer.init).lower(*keys, comp.hypers.replica(0), start_update_arg(comp.trainer.num_updates))
        constant_count = jax.jit(comp.trainer.init).lower(*keys, comp.hypers.replica(0))
        lowered.append((LoweredChunk(comp.trainer, mesh, state, hypers).lowered.as_text(), init.as_text(),
                        constant_count.as_text()))
    (chunk_a, init_a, constant_a), (chunk_b, init_b, constant_b) = lowered
    assert chunk_a == chunk_b and init_a == init_b
    assert constant_a != constant_b  # what the count as a constant of the program did


FORAGING = ["env=foraging", "env.grid_size=16", "env.food_min=4", "env.food_max=8", "env.poison_min=4", "env.poison_max=8",
            "env.max_steps=32", "ppo.num_envs=4", "ppo.num_steps=16", "ppo.total_timesteps=512", "ppo.num_minibatches=2",
            "ppo.update_epochs=1", "train.chunk_updates=8", "eval.episodes=2", "hardware.host_devices=1"]


def test_every_reward_mode_is_one_program():
    """The foraging world's params are data (`Env.params_are_data`): arguments of the chunk, of
    init and of the episodic evaluation, so a sweep over reward modes (immortal or not, shaped or
    not, any observation table) compiles each program once."""
    texts = []
    for mode in ("proxy", "ground_truth_handhold"):
        cfg = validate(compose_config([*FORAGING, f"reward={mode}"]))
        comp = build(cfg, 1)
        mesh = make_mesh(comp.layout, jax.devices()[:1])
        state = replica_template(comp.trainer.init, comp.layout, [0], mesh)
        chunk = LoweredChunk(comp.trainer, mesh, state, comp.hypers.sharded(replica_sharding(mesh)))
        runner = episode_runner(cfg, comp.env, comp.env_params, comp.network)
        params = jax.tree.map(lambda x: x[0], state.params)
        evaluation = runner.func.lower(params, jax.random.PRNGKey(0), **runner.keywords)
        init = jax.jit(comp.trainer.init).lower(*jax.random.split(jax.random.PRNGKey(0)), comp.hypers.replica(0),
                                                start_update_arg(comp.trainer.num_updates),
                                                env_params_argument(comp.env, comp.env_params))
        texts.append((chunk.lowered.as_text(), evaluation.as_text(), init.as_text()))
    assert texts[0] == texts[1]
