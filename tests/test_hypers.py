"""The traced hyperparameters, declared once: `traced()` fields of PPOConfig, one `Hypers` struct."""

from __future__ import annotations

import dataclasses

import functools
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from conftest import TINY, compose_config
from ppo_lab import config, config_keys
from ppo_lab.config import PPOConfig, traced, traced_keys, validate
from ppo_lab.run.shared_program import shared_program_key
from ppo_lab.errors import ConfigError
from ppo_lab.launching.help import help_text
from ppo_lab.run import resume
from ppo_lab.run.population import Population
from ppo_lab.ppo.hypers import SCHEDULES, Hypers, StaticPPO
from ppo_lab.ppo.parallel import make_mesh, replica_sharding, replica_template, start_update_arg
from ppo_lab.ppo.train import env_params_argument
from ppo_lab.run.build import build
from ppo_lab.run.evaluate import episode_runner
from ppo_lab.run.loop import LoweredChunk


def test_the_struct_has_one_value_per_traced_config_key():
    marked = [f.name for f in dataclasses.fields(PPOConfig) if f.metadata.get("traced")]
    assert list(traced_keys()) == marked
    own = Hypers.of(validate(compose_config(TINY)).ppo)
    assert own.names == tuple(marked) and [f.name for f in dataclasses.fields(Hypers)] == ["names", "values"]
    assert SCHEDULES == {"lr": ("lr", "lr_final"), "clip_eps": ("clip_eps", "clip_eps_final"),
                         "ent_coef": ("ent_coef_initial", "ent_coef_final")}


def test_the_trainer_holds_no_traced_key_as_a_constant():
    """The trainer's config is the static part of `ppo`: reading a traced key there fails,
    naming where its per-replica value is, so it cannot be baked into a grid's program."""
    cfg = validate(compose_config(TINY))
    trainer = build(cfg, 1).trainer
    assert trainer.ppo == StaticPPO.of(cfg.ppo) and trainer.ppo.num_envs == 4 and trainer.ppo.is_null("entropy_floor")
    for key in traced_keys():
        with pytest.raises(AttributeError, match=f"hypers.{key}"):
            getattr(trainer.ppo, key)


def test_per_replica_values_build_stacked_structs():
    ppo = validate(compose_config([*TINY, "ppo.ent_coef_final=0.0"])).ppo
    own = Hypers.of(ppo)
    members = [Hypers.from_values({**dataclasses.asdict(ppo), "lr": lr}) for lr in (1e-3, 3e-4)]
    stacked = Hypers.stack(members)
    assert stacked.lr.shape == (2,) and stacked.ent_coef_final.shape == (2,)
    np.testing.assert_array_equal(stacked.lr, np.float32([1e-3, 3e-4]))
    assert stacked.replica(1).lr == np.float32(3e-4)
    assert own.ent_coef_initial == np.float32(ppo.ent_coef_initial)
    # start + (end - start) x update / num_updates, in float32
    assert float(own.scheduled("ent_coef", 5, 10)) == np.float32(ppo.ent_coef_initial) + np.float32(-ppo.ent_coef_initial) * 0.5
    assert jax.tree.structure(Hypers.replicated(ppo, 3)) == jax.tree.structure(own)


def test_runs_that_differ_only_in_their_budget_are_one_program():
    """ppo.total_timesteps changes no compiled program (the update count is an argument of the
    chunk and of init): a run given a larger budget, or a sweep's shorter run, loads the
    programs the persistent compilation cache holds instead of compiling them again."""
    lowered = []
    for total in (2048, 8192):
        comp = build(validate(compose_config([*TINY, f"ppo.total_timesteps={total}"])), 1)
        mesh = make_mesh(comp.layout, jax.devices()[:1])
        state = replica_template(comp.trainer.init, comp.layout, [0], mesh, *comp.init_arguments())
        hypers = comp.hypers.sharded(replica_sharding(mesh))
        keys = jax.random.split(jax.random.PRNGKey(0))
        init = jax.jit(comp.trainer.init).lower(*keys, comp.hypers.replica(0), start_update_arg(comp.trainer.num_updates))
        lowered.append((LoweredChunk(comp.trainer, mesh, state, hypers).lowered.as_text(), init.as_text()))
    assert lowered[0] == lowered[1]


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
        state = replica_template(comp.trainer.init, comp.layout, [0], mesh, *comp.init_arguments())
        chunk = LoweredChunk(comp.trainer, mesh, state, comp.hypers.sharded(replica_sharding(mesh)))
        runner = episode_runner(cfg, comp.env, comp.env_params, comp.network)
        params = jax.tree.map(lambda x: x[0], state.params)
        evaluation = runner.func.lower(params, jax.random.PRNGKey(0), jnp.bool_(True), **runner.keywords)
        init = jax.jit(comp.trainer.init).lower(*jax.random.split(jax.random.PRNGKey(0)), comp.hypers.replica(0),
                                                start_update_arg(comp.trainer.num_updates),
                                                env_params_argument(comp.env, comp.env_params))
        texts.append((chunk.lowered.as_text(), evaluation.as_text(), init.as_text()))
    assert texts[0] == texts[1]


# Every traced key, two values a grid's cells differ in (each far enough apart to change 3 updates).
GRID = {
    "lr": (2.5e-4, 1e-3), "lr_final": (0.0, 2.5e-4), "gamma": (0.99, 0.9), "gae_lambda": (0.8, 0.99),
    "clip_eps": (0.2, 0.001), "clip_eps_final": (0.2, 0.001), "vf_coef": (0.25, 1.0), "ent_coef_initial": (0.01, 0.2),
    "ent_coef_final": (0.01, 0.5), "entropy_floor": (0.0, 2.0), "entropy_floor_coef": (0.1, 1.0),
    "max_grad_norm": (0.5, 0.01),
}
# 3 updates of the tiny CartPole run, at a learning rate that moves the policy enough for the
# clip ranges to act; an entropy floor for the keys that need one to act (a floor of 2 nats is
# above CartPole's entropy, so it always acts).
THREE_UPDATES = [*TINY, "ppo.total_timesteps=192", "train.chunk_updates=3", "ppo.lr=0.01"]
NEEDS = {"entropy_floor_coef": ("ppo.entropy_floor=2.0",), "entropy_floor": ("ppo.entropy_floor=2.0",)}


@functools.cache
def _programs(base: tuple[str, ...]):
    """A run's program (one replica) and a two-cell grid's (the same, vmapped), each compiled
    once for every traced key: the traced keys are its arguments."""
    cfg = validate(compose_config([*THREE_UPDATES, *base]))
    trainer = build(cfg, 1).trainer
    keys = jax.random.split(jax.random.PRNGKey(0))

    def train(hypers):
        return trainer.chunk(trainer.init(*keys, hypers, trainer.num_updates), 0, hypers, trainer.num_updates)

    return cfg, jax.jit(train), jax.jit(jax.vmap(train))


def test_every_traced_key_has_a_grid_test():
    assert sorted(GRID) == sorted(traced_keys())


# On one worker: `_programs` compiles once per process, for every key's cells (split over both
# workers, each compiled the same two programs at the same time).
@pytest.mark.xdist_group("tests/test_hypers.py::_programs")
@pytest.mark.parametrize("key", sorted(GRID))
def test_a_grid_over_a_traced_key_trains_each_cell_as_its_run_alone(key):
    """Two cells that differ in one traced key share a program (hydra/launcher=vmap groups them)
    and train, at update 3, what each trains alone; the cells differ."""
    base = NEEDS.get(key, ())
    base_cfg, alone, grid = _programs(base)
    cells = [validate(compose_config([*THREE_UPDATES, *base, f"ppo.{key}={value}"])) for value in GRID[key]]
    assert shared_program_key(cells[0].resolved) == shared_program_key(cells[1].resolved)
    assert StaticPPO.of(cells[0].ppo) == StaticPPO.of(cells[1].ppo) == StaticPPO.of(base_cfg.ppo)  # one program for both
    hypers = [Hypers.of(cell.ppo) for cell in cells]
    assert [float(getattr(h, key)) for h in hypers] == [float(np.float32(v)) for v in GRID[key]]
    (grid_state, grid_metrics) = grid(Hypers.stack(hypers))
    for replica, cell_hypers in enumerate(hypers):
        state, metrics = alone(cell_hypers)
        for name, value in metrics.items():
            np.testing.assert_allclose(grid_metrics[name][replica, 2], value[2], rtol=2e-5, atol=1e-6, err_msg=name)
        for mine, grids in zip(jax.tree.leaves(state.params), jax.tree.leaves(grid_state.params)):
            np.testing.assert_allclose(grids[replica], mine, rtol=2e-5, atol=1e-6)
    differs = [not np.allclose(p[0], p[1], rtol=1e-4, atol=1e-6) for p in jax.tree.leaves(grid_state.params)]
    assert any(differs), f"the cells over ppo.{key} trained the same parameters"


@pytest.fixture
def aux_coef(tmp_path, monkeypatch):
    """conf/ copied with one more traced key (`ppo.aux_coef`, a line of its ppo/default.yaml) and
    PPOConfig extended with its field, registered as the schema Hydra composes into; undone after."""
    conf = tmp_path / "conf"
    shutil.copytree(config_keys.CONF_DIR, conf)
    with (conf / "ppo" / "default.yaml").open("a") as f:
        f.write("aux_coef: 0.3  # weight of the auxiliary loss\n")
    extended = dataclasses.make_dataclass(
        "PPOConfig", [("aux_coef", float, traced(lambda v, s: v >= 0, ">= 0", help=True))], bases=(PPOConfig,))
    monkeypatch.setattr(config_keys, "CONF_DIR", conf)
    monkeypatch.setattr(config, "PPOConfig", extended)
    config.register()
    yield conf
    monkeypatch.undo()
    config.register()


def test_a_traced_key_added_is_its_field_and_its_yaml_line(aux_coef, tmp_path):
    """A traced key added as a field (here, in the test) and a line of conf/ppo/default.yaml is
    validated, grouped into one program, explorable by a population, listed by --help with its
    line's meaning, and compared on resume."""

    def resolved(*overrides):
        with initialize_config_dir(config_dir=str(aux_coef), version_base="1.3"):
            return OmegaConf.to_container(compose(config_name="config", overrides=[*TINY, *overrides]), resolve=True)

    cfg = validate(resolved())
    assert cfg.ppo.aux_coef == 0.3 and "aux_coef" in traced_keys()
    with pytest.raises(ConfigError, match="ppo.aux_coef"):
        validate(resolved("ppo.aux_coef=-1"))
    # grids: one program for both cells, each its own value; no trainer can read it as a constant
    other = validate(resolved("ppo.aux_coef=0.7"))
    assert shared_program_key(cfg.resolved) == shared_program_key(other.resolved)
    np.testing.assert_array_equal(Hypers.stack([Hypers.of(cfg.ppo), Hypers.of(other.ppo)]).aux_coef,
                                  np.float32([0.3, 0.7]))
    with pytest.raises(AttributeError, match="hypers.aux_coef"):
        StaticPPO.of(cfg.ppo).aux_coef
    # a population explores it
    pbt = validate(resolved("pbt.population=2", "+pbt.hypers.aux_coef={low: 0.1, high: 0.9, log: false}"))
    members = Population(pbt, tmp_path / "pbt").hypers().aux_coef
    assert members.shape == (2,) and np.all((members >= 0.1) & (members <= 0.9))
    # --help lists it with the meaning its YAML line gives
    line = next(line for line in help_text([]).splitlines() if line.strip().startswith("ppo.aux_coef"))
    assert line.split()[1] == "0.3" and line.endswith("weight of the auxiliary loss")
    # resume: a change is refused unless allowed (its field's mark: unmarked, ALLOWED)
    assert resume.config_changes(cfg.resolved, other.resolved) == {"ppo.aux_coef": (0.3, 0.7)}
    with pytest.raises(resume.ResumeError, match="ppo.aux_coef"):
        resume.check_config(cfg.resolved, other.resolved, "the run directory", allow=False)
    assert resume.check_config(cfg.resolved, other.resolved, "the run directory", allow=True) == {"ppo.aux_coef": (0.3, 0.7)}
