"""The reference as its code runs: the rollout's observation storage dtype and the
keys for the reference's other differences, each against a small hand case."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import yaml
from omegaconf import OmegaConf

from ppo_lab.analysis import sweep as sw
from ppo_lab.experiments.goodhart import fidelity as fd
from ppo_lab.analysis.sweep import expected_jobs_from_config
from ppo_lab.envs.foraging.world import build as build_foraging
from ppo_lab.errors import ConfigError
from ppo_lab.networks import ActorCritic
from ppo_lab.ppo import obs_storage
from ppo_lab.ppo.losses import ppo_loss_terms
from ppo_lab.ppo.hypers import Hypers
from ppo_lab.ppo.train import make_optimizer
from ppo_lab.run.build import build
from ppo_lab.judging.health import HealthWarnings, obs_cast_message

from conftest import ROOT, network_config, read_rows, run_config, train_run
from test_aggregate import make_sweep

SMALL_FORAGING = [
    "experiment=goodhart_cpu", "env.grid_size=16", "env.food_min=8", "env.food_max=8", "env.poison_min=8",
    "env.poison_max=8", "ppo.num_envs=4", "ppo.num_steps=8", "ppo.total_timesteps=64", "ppo.num_minibatches=2",
    "ppo.update_epochs=1", "train.chunk_updates=2", "eval.episodes=1", "eval.max_steps=8", "eval.survival_envs=2",
    "eval.survival_steps=8", "network.hidden_sizes=[16,16]", "hardware.host_devices=1",
]


# ----------------------------------------------------------------------------- the cast
def test_uint8_truncates_toward_zero_as_the_reference_buffer():
    x = jnp.asarray([0.0, 0.25, 0.5, 0.999, 1.0, 1.5, 2.7, 254.9, 300.0, -0.5])
    stored = obs_storage.cast(x, "uint8")
    assert stored.dtype == jnp.uint8
    # torch: uint8_tensor[...] = float_tensor truncates toward zero (0.5 -> 0); out of range saturates here.
    np.testing.assert_array_equal(np.asarray(stored), [0, 0, 0, 0, 1, 1, 2, 254, 255, 0])
    np.testing.assert_array_equal(np.asarray(obs_storage.load(stored)), [0, 0, 0, 0, 1, 1, 2, 254, 255, 0])
    half = obs_storage.cast(jnp.asarray([0.0, 0.5, 1.0]), "bfloat16")
    assert half.dtype == jnp.bfloat16 and obs_storage.load(half).tolist() == [0.0, 0.5, 1.0]
    same = jnp.asarray([0.5])
    assert obs_storage.store(same, "float32") is same


def test_a_one_hot_view_casts_exactly_and_interestingness_loses_poison():
    one_hot = jnp.asarray([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    assert np.array_equal(obs_storage.load(obs_storage.store(one_hot, "uint8")), one_hot)
    frac, low, high = obs_storage.cast_stats(one_hot, obs_storage.store(one_hot, "uint8"))
    assert float(frac) == 0.0 and np.isnan(low) and np.isnan(high)
    interesting = jnp.asarray([[1.0, 1.0], [0.5, 0.5], [0.0, 0.0]])
    stored = obs_storage.store(interesting, "uint8")
    np.testing.assert_array_equal(np.asarray(obs_storage.load(stored)), [[1, 1], [0, 0], [0, 0]])
    frac, low, high = obs_storage.cast_stats(interesting, stored)
    assert float(frac) == pytest.approx(2 / 6) and float(low) == 0.5 and float(high) == 0.5


def test_privileged_critic_channels_stay_float_and_can_come_from_the_next_step():
    obs = jnp.stack([jnp.full((3, 3), v) for v in (0.5, 1.0, 0.0, 1.0, -0.25, 0.75)], -1)[None]
    nxt = obs.at[..., 2:].set(0.125)
    policy, critic = obs_storage.store(obs, "uint8", actor_channels=2)
    assert policy.dtype == jnp.uint8 and critic.dtype == jnp.float32
    loaded = obs_storage.load((policy, critic))
    np.testing.assert_array_equal(np.asarray(loaded[0, 0, 0]), [0, 1, 0, 1, -0.25, 0.75])
    late = obs_storage.load(obs_storage.store(obs, "uint8", actor_channels=2, critic_from=nxt))
    np.testing.assert_array_equal(np.asarray(late[0, 0, 0]), [0, 1, 0.125, 0.125, 0.125, 0.125])
    frac, low, _ = obs_storage.cast_stats(obs, (policy, critic), actor_channels=2)
    assert float(frac) == pytest.approx(0.5) and float(low) == 0.5  # only the policy's channels count


def test_a_lossy_cast_is_logged_once_naming_the_values(caplog):
    rows = [{"update": 1, "seed": 0, "train/obs_cast_lossy_frac": 0.03, "train/obs_cast_lossy_min": 0.5,
             "train/obs_cast_lossy_max": 0.5}]
    assert "values 0.5 " in obs_cast_message(rows, "uint8")
    assert obs_cast_message([{"seed": 0, "train/obs_cast_lossy_frac": 0.0}], "uint8") is None
    warnings = HealthWarnings(run_config(SMALL_FORAGING).health)
    warnings.obs_dtype = "uint8"
    with caplog.at_level(logging.WARNING, logger="ppo_lab.judging.health"):
        warnings.log_rows(rows)
        warnings.log_rows(rows)
    assert sum("loses information" in r.message for r in caplog.records) == 1


def test_bad_dtype_fails_before_compiling_naming_the_valid_values():
    with pytest.raises(ConfigError) as err:
        run_config(SMALL_FORAGING + ["ppo.rollout_obs_dtype=int4"])
    assert err.value.key == "ppo.rollout_obs_dtype"
    assert "float32" in str(err.value) and "uint8" in str(err.value) and "bfloat16" in str(err.value)
    with pytest.raises(ConfigError):
        run_config(SMALL_FORAGING + ["ppo.value_loss=huber"])


# ----------------------------------------------------------------------------- the trainer
def _rollout(overrides):
    cfg = run_config(SMALL_FORAGING + overrides)
    comp = build(cfg, 1)
    hypers = comp.hypers.replica(0)
    state = comp.trainer.init(jax.random.PRNGKey(0), jax.random.PRNGKey(1), hypers, comp.trainer.num_updates)
    return jax.jit(comp.trainer.collect)(state, hypers).records


@pytest.mark.slow
def test_uint8_storage_keeps_the_rollout_and_its_log_probs_of_the_float_view():
    as_float = _rollout(["reward=ground_truth_blinded", "ppo.rollout_obs_dtype=float32"])
    as_uint8 = _rollout(["reward=ground_truth_blinded", "ppo.rollout_obs_dtype=uint8"])
    assert as_uint8.obs.dtype == jnp.uint8 and as_float.obs.dtype == jnp.float32
    for name in ("action", "log_prob", "value", "reward", "done"):
        np.testing.assert_array_equal(getattr(as_float, name), getattr(as_uint8, name))
    np.testing.assert_array_equal(np.trunc(np.asarray(as_float.obs)), np.asarray(as_uint8.obs, np.float32))
    assert 0.5 in np.unique(np.asarray(as_float.obs))  # poison was in view, and stored as 0
    frac, low, high = as_uint8.obs_cast
    assert float(jnp.max(frac)) > 0 and float(jnp.nanmin(low)) == 0.5 and float(jnp.nanmax(high)) == 0.5


@pytest.mark.slow
def test_privileged_rollout_casts_only_the_policy_channels_and_stores_the_next_view():
    keys = ["reward=ground_truth_blinded", "network.privileged_critic=true", "ppo.rollout_obs_dtype=uint8",
            "ppo.bootstrap_truncation=false"]
    at_step = _rollout(keys)
    late = _rollout(keys + ["ppo.privileged_view_after_step=true"])
    policy, critic = late.obs
    assert policy.dtype == jnp.uint8 and policy.shape[-1] == 2 and critic.dtype == jnp.float32 and critic.shape[-1] == 4
    np.testing.assert_array_equal(at_step.obs[0], policy)
    # The critic's view stored beside step t is the one of step t+1 (after the step).
    np.testing.assert_array_equal(late.obs[1][:-1], at_step.obs[1][1:])


# The shapes of test_foraging_end_to_end's reference-recipe run, so the two share its compiled
# programs (the chunk, init and the episodic evaluation: one foraging compile of each in the
# suite, the pair 36 s -> 21 s): the reward mode, the food and poison counts and the traced
# hyperparameters are data, not shapes.
REFERENCE_RECIPE_PROGRAMS = [
    "experiment=goodhart_reference", "scale=foraging_cpu", "network=mlp", "env.grid_size=16", "env.food_max=8",
    "env.poison_max=8", "env.max_steps=32", "ppo.num_envs=4", "ppo.num_steps=16", "ppo.total_timesteps=512",
    "ppo.update_epochs=1", "train.chunk_updates=8", "eval.episodes=2", "hardware.host_devices=1",
]


@pytest.mark.slow
def test_a_tiny_reference_run_trains_and_logs_the_cast(tmp_path: Path, caplog):
    with caplog.at_level(logging.WARNING, logger="ppo_lab.judging.health"):
        summary = train_run(REFERENCE_RECIPE_PROGRAMS + ["reward=proxy_mortal", "env.food_min=8", "env.poison_min=8",
                                                         "~env.evaluations.survival"],  # not what is tested here
                            tmp_path / "run")
    assert summary.status == "completed"
    rows = read_rows(tmp_path / "run")
    assert float(rows[0]["train/obs_cast_lossy_min"]) == 0.5
    assert sum("ppo.rollout_obs_dtype=uint8 loses information" in r.message for r in caplog.records) == 1


# ----------------------------------------------------------------------------- the other keys
def test_value_loss_max_of_means_against_a_hand_case():
    value, old, ret = jnp.asarray([1.0, 0.0]), jnp.asarray([0.0, 0.0]), jnp.asarray([0.0, 2.0])
    common = dict(log_prob=jnp.zeros(2), old_log_prob=jnp.zeros(2), advantages=jnp.asarray([1.0, -1.0]), value=value,
                  old_value=old, returns=ret, entropy=jnp.zeros(2), clip_eps=0.2, vf_coef=0.5, ent_coef=0.0)
    # e1 = (1, 4), clipped values (0.2, 0) -> e2 = (0.04, 4): mean of max = 4 (x 0.5), max of means = max(2.5, 2.02).
    assert float(ppo_loss_terms(**common).vf_loss) == pytest.approx(0.5 * (1 + 4) / 2)
    assert float(ppo_loss_terms(**common, value_loss="max_of_means").vf_loss) == pytest.approx(2.5)


def test_adam_eps_reaches_the_optimiser():
    cfg = run_config(SMALL_FORAGING + ["ppo.adam_eps=1e-8"])
    state = make_optimizer(cfg.ppo, 4, Hypers.of(cfg.ppo)).init({"w": jnp.zeros(3)})
    eps = optax.tree.get(state, "eps")
    assert float(eps) == pytest.approx(1e-8)


@pytest.mark.slow
def test_shared_torso_privileged_critic_is_a_value_head_on_the_actor_torso():
    cfg = network_config("mlp", activation="relu", privileged_critic=True, shared_torso=True, hidden_sizes=(8,))
    net = ActorCritic(8, cfg, actor_obs_channels=2, critic_plane_channels=2)
    obs = jax.random.uniform(jax.random.PRNGKey(0), (3, 5, 5, 6))
    params = net.init(jax.random.PRNGKey(1), obs)["params"]
    assert set(params) == {"actor_torso", "critic_combine", "policy_head", "value_head"}
    # features (8) + ground-truth pixels (5*5*2) + densities (2) -> 8
    assert params["critic_combine"]["kernel"].shape == (8 + 50 + 2, 8)
    # Without constant planes every extra channel is read pixel by pixel: 8 + 5*5*4.
    no_planes = ActorCritic(8, cfg, actor_obs_channels=2).init(jax.random.PRNGKey(1), obs)["params"]
    assert no_planes["critic_combine"]["kernel"].shape == (8 + 100, 8)
    logits, value = net.apply({"params": params}, obs)
    other = obs.at[..., 2:].set(0.0)
    logits2, value2 = net.apply({"params": params}, other)
    np.testing.assert_allclose(logits, logits2)  # the policy never sees the critic's channels
    assert not np.allclose(value, value2)
    np.testing.assert_allclose(net.apply({"params": params}, obs, method="value"), value, rtol=1e-6)
    _, v_main, v_extra = net.apply({"params": params}, obs, other, method="with_extra_values")
    np.testing.assert_allclose(v_main, value, rtol=1e-6)
    np.testing.assert_allclose(v_extra, value2, rtol=1e-6)


def _env(**env_keys):
    env_cfg = {"name": "foraging", "grid_size": 16, "food_min": 0, "food_max": 0, "poison_min": 0, "poison_max": 0,
               **env_keys}
    return build_foraging(env_cfg, {"name": "ground_truth"})


@pytest.mark.parametrize("tolerance, starves_at", [(1e-5, 100), (0.0, 101)])
def test_starvation_at_move_100_or_the_reference_101(tolerance, starves_at):
    env, params = _env(energy_tolerance=tolerance)
    _, state = env.reset_env(jax.random.PRNGKey(0), params)
    step = jax.jit(lambda s: env.transition(jax.random.PRNGKey(1), s, 0, params))
    for move in range(1, 102):
        state, events = step(state)
        if bool(events["died"]):
            break
    assert move == starves_at


@pytest.mark.parametrize("in_place", [False, True])
def test_respawn_in_place_keeps_the_agent_where_it_died(in_place):
    env, params = _env(respawn_in_place=in_place)
    _, state = env.reset_env(jax.random.PRNGKey(0), params)
    cells = {int(env.new_life(jax.random.PRNGKey(k), state, params).agent) for k in range(8)}
    assert (cells == {int(state.agent)}) == in_place


def test_goodhart_reference_turns_every_fidelity_key_on_and_the_fidelity_cell_matches():
    run = run_config(["experiment=goodhart_reference", "reward=ground_truth_blinded"])
    assert run.ppo.rollout_obs_dtype == "uint8" and run.ppo.adam_eps == 1e-8 and run.ppo.value_loss == "max_of_means"
    assert run.ppo.privileged_view_after_step and run.network.shared_torso and run.network.privileged_critic
    assert run.env["respawn_in_place"] is True and run.env["energy_tolerance"] == 0.0
    assert run.env["fresh_world_on_done"] is False and run.env["fixed_counts"] is True
    off = run_config(["experiment=goodhart_reference", "ppo.rollout_obs_dtype=float32"])
    assert off.ppo.rollout_obs_dtype == "float32" and off.ppo.adam_eps == 1e-8
    # conf/fidelity/reference.yaml sets exactly the experiment's keys (bar its scale and network kind).
    experiment = yaml.safe_load((ROOT / "conf/experiment/goodhart_reference.yaml").read_text())
    cell = yaml.safe_load((ROOT / "conf/fidelity/reference.yaml").read_text())
    assert {k: experiment[k] for k in ("env", "network", "ppo")} == cell
    lab = run_config(["experiment=goodhart_cpu"])
    assert (lab.ppo.rollout_obs_dtype, lab.ppo.adam_eps, lab.ppo.value_loss) == ("float32", 1e-5, "mean_of_max")
    assert lab.env["respawn_in_place"] is False and lab.env["energy_tolerance"] == 1e-5


# ----------------------------------------------------------------------------- the report
def test_fidelity_cells_table_tests_and_bar_on_a_hand_written_sweep(tmp_path):
    cells = [(m, r) for m in ("ground_truth", "ground_truth_blinded", "proxy_mortal") for r in ("lab", "lab_uint8")]
    cells += [("proxy_mortal", "reference"), ("proxy_mortal", "reference_float32")]
    jobs = [[f"reward={m}", f"+fidelity={r}", "seed=0", "num_seeds=3"] for m, r in cells]
    metrics = ("episode_return", "episode_length", *fd.METRICS)
    # The made-up values grow with the job's index: ground_truth's two cells differ (not identical).
    sweep = make_sweep(tmp_path / "sw", jobs, seeds_per_job=3, eval_metrics=metrics, group_of=jobs.index,
                       sweeper_params={"reward": "a,b", "+fidelity": "c,d"})
    col = sw.collect([sweep])
    assert fd.is_fidelity_sweep(col) and fd.cells_in(col) == cells
    rows = fd.cell_table(col, ["poison_per_1k"])
    assert len(rows) == len(cells) and all(r["n_seeds"] == 3 for r in rows)
    pairs = fd.comparisons(col)
    assert (("proxy_mortal", "reference"), ("proxy_mortal", "reference_float32")) in pairs and len(pairs) == 4
    tests = fd.pairwise_tests(col, ["energy_per_1k"])
    assert len(tests) == 4 and all(r["p_bonferroni"] >= r["p"] for r in tests)
    checks = fd.bar(col)
    assert len(checks) == 4 and checks[-1]["holds"] is False  # made-up ground_truth values differ per cell
    assert fd.same_seed_for_seed(col, "ground_truth", "lab", "lab", "food_share") is True


@pytest.mark.slow
def test_fidelity_sweep_is_three_modes_by_every_recipe_and_each_job_validates():
    proc = subprocess.run([sys.executable, "launch.py", "-cd", "sweeps", "-cn", "goodhart_fidelity", "--cfg", "all"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cfg = OmegaConf.create(proc.stdout)
    assert cfg.experiment == "goodhart_cpu" and cfg.num_seeds == 8
    jobs = expected_jobs_from_config(cfg)
    recipes = sorted(p.stem for p in (ROOT / "conf" / "fidelity").glob("*.yaml"))
    assert len(jobs) == 3 * len(recipes) == 33
    for job in jobs:
        run = run_config(["experiment=goodhart_cpu", *job])
        recipe = next(o.split("=", 1)[1] for o in job if "fidelity" in o)
        assert (run.ppo.rollout_obs_dtype == "uint8") == (recipe in ("lab_uint8", "reference") or
                                                          (recipe.startswith("reference_") and recipe != "reference_float32"))
