"""Continuous runs end to end through launch.py: gymnax Pendulum (normalisers on, several
seeds), a Brax env, and a kill (SIGKILL) after the first checkpoint that resumes from it with
the observation statistics restored."""

from __future__ import annotations

import signal
import time
from collections import Counter

import flax.serialization
import gymnax
import jax
import mlflow
import numpy as np
import pytest

from ppo_lab.analysis import aggregate
from ppo_lab.rundir.checkpoints import list_checkpoints, state_path

from conftest import launch, read_rows, read_summary, start_launch, train_run
from store_readers import wandb_runs as read_wandb_runs

PENDULUM = [
    "experiment=pendulum", "ppo.num_envs=4", "ppo.num_steps=16", "ppo.total_timesteps=2048",
    "ppo.num_minibatches=2", "ppo.update_epochs=2", "train.chunk_updates=8", "eval.episodes=2",
    "eval.max_steps=50", "hardware.host_devices=1",
]


def _obs_stats(run_dir):
    latest = list_checkpoints(run_dir / "checkpoints")[-1]
    raw = flax.serialization.msgpack_restore(state_path(latest).read_bytes())
    return raw["params"]["params"]["obs_norm"], raw


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_pendulum_with_normalisers_over_two_seeds(tmp_path):
    s = train_run([*PENDULUM, "num_seeds=2"], tmp_path / "run")
    assert s.status == "completed" and s.updates == 32
    assert len(s.eval["episode_return"]) == 2 and all(np.isfinite(s.eval["episode_return"]))
    rows = read_rows(tmp_path / "run")
    assert {"actions/mean_0", "actions/std_0", "train/entropy", "train/approx_kl", "train/clip_frac"} <= set(rows[0])
    stats, raw = _obs_stats(tmp_path / "run")
    # per seed: each replica's statistics from its own 32 x 64 observations (plus the 1e-4 prior)
    assert np.allclose(stats["count"], 32 * 64 + 1e-4)
    assert not np.allclose(stats["mean"][0], stats["mean"][1])
    assert raw["reward_norm"]["count"].shape == (2,)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_brax_env_trains_and_evaluates(tmp_path):
    s = train_run(["env=brax", "env.id=inverted_pendulum", "env.max_steps=50", "ppo.num_envs=4", "ppo.num_steps=8",
                   "ppo.total_timesteps=256", "ppo.num_minibatches=2", "ppo.update_epochs=1", "train.chunk_updates=8",
                   "eval.episodes=2", "hardware.host_devices=1", "ppo.normalize_obs=true"], tmp_path / "run")
    assert s.status == "completed" and s.updates == 8
    length = s.eval["episode_length"][0]
    assert 1 <= length <= 50 and s.eval["episode_return"][0] == pytest.approx(length)  # reward 1 per step upright


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_pendulum_killed_after_first_checkpoint_resumes_with_its_statistics(tmp_path):
    # 256 updates of 64 steps; the kill lands at the first checkpoint, after a chunk of 8 (PENDULUM's:
    # the programs of test_pendulum_with_normalisers' run, compiled once in the suite).
    updates = 256
    args = [*PENDULUM, f"ppo.total_timesteps={updates * 64}", "checkpoint.every_min=0.0001", "num_seeds=2",
            "ppo.normalize_obs=true"]
    run_dir = tmp_path / "run"
    proc = start_launch(args, run_dir)
    deadline = time.time() + 240
    while not list_checkpoints(run_dir / "checkpoints"):
        assert proc.poll() is None, proc.output()[-3000:]
        assert time.time() < deadline, "no checkpoint in time"
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert read_summary(run_dir)["status"] == "running"
    saved, _ = _obs_stats(run_dir)  # the newest checkpoint now: what the relaunch resumes from
    saved_update = int(list_checkpoints(run_dir / "checkpoints")[-1].stem.split("_")[-1])

    s = train_run(args, run_dir)
    assert s.status == "completed" and s.updates == updates
    assert s.resumed_from == saved_update and 0 < s.resumed_from < updates
    counts = Counter((int(r["update"]), int(r["seed"])) for r in read_rows(run_dir))
    assert sorted(counts) == [(u, seed) for u in range(1, updates + 1) for seed in (0, 1)]
    assert max(counts.values()) == 1
    # the statistics went on from the checkpoint's: every observation of every update counted once
    final, _ = _obs_stats(run_dir)
    assert np.allclose(saved["count"], saved_update * 64 + 1e-4)
    assert np.allclose(final["count"], updates * 64 + 1e-4)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_one_seed_split_over_two_devices_counts_every_envs_observations(tmp_path):
    """hardware.layout=envs: each device steps half of the seed's envs; the statistics combine
    both halves (psum), so they count all 4 envs' observations and rewards, not one device's 2."""
    launch([*PENDULUM, "hardware.host_devices=2", "hardware.layout=envs", "num_seeds=1", "ppo.total_timesteps=512"],
           tmp_path / "run")
    assert read_summary(tmp_path / "run")["layout"]["mode"] == "envs"
    stats, raw = _obs_stats(tmp_path / "run")
    assert np.allclose(stats["count"], 8 * 16 * 4 + 1e-4)  # 8 updates x 16 steps x 4 envs
    assert np.allclose(raw["reward_norm"]["count"], 8 * 16 * 4 + 1e-4)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_continuous_run_through_every_logger_the_mlflow_policy_and_aggregate(tmp_path):
    """The per-dimension action metrics reach W&B (offline), TensorBoard and MLflow; the
    registered pyfunc plays float actions inside the bounds; aggregate reads the run."""
    store, run_dir = tmp_path / "mlflow", tmp_path / "run"
    # In a process of its own: W&B's service, started in this one, would be inherited by every
    # later test's subprocess.
    launch([*PENDULUM, "num_seeds=2", "logger=[csv,mlflow,wandb,tensorboard]", f"logger.mlflow.dir={store}",
            "logger.mlflow.experiment_name=pendulum", "train.target_return=-100000"], run_dir, timeout=400)
    s = read_summary(run_dir)
    assert s["status"] == "completed" and not s.get("loggers_disabled")
    wandb_runs = read_wandb_runs(run_dir)
    assert sorted(wandb_runs) == [0, 1]
    assert all("actions/std_0" in row for row in wandb_runs[0]["history"] if "train/entropy" in row)
    assert list((run_dir / "tb" / "seed_1").glob("events.out.tfevents.*"))

    mlflow.set_tracking_uri(f"sqlite:///{store / 'mlflow.db'}")
    client = mlflow.MlflowClient()
    runs = client.search_runs([client.get_experiment_by_name("pendulum").experiment_id])
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(children) == 2 and all("actions/mean_0" in r.data.metrics for r in children)
    name, version = children[0].data.tags["ppo_lab.registered_model"].split("/")
    env, params = gymnax.make("Pendulum-v1")
    obs = np.stack([np.asarray(env.reset(k, params)[0]) for k in jax.random.split(jax.random.PRNGKey(3), 7)])
    actions = mlflow.pyfunc.load_model(f"models:/{name}/{version}").predict(obs)
    assert actions.dtype == np.float32 and actions.shape == (7, 1) and np.all(np.abs(actions) <= 2.0)

    result = aggregate.run_aggregate([run_dir], plot=False)
    assert len(result["collection"].runs) == 1 and not result["problems"]
    table = result["paths"]["aggregate"].read_text()
    assert "eval/episode_return" in table
