"""Recurrent policies, end to end through launch.py's `train`: on bsuite's
MemoryChain (a context bit seen on the first step, asked for on the last; returns +1 or -1,
chance 0) a GRU policy is near perfect and a feed-forward one at chance, over 4 vmapped seeds;
a GRU run killed after its first checkpoint resumes from it and still learns."""

from __future__ import annotations

import subprocess
import sys
import time
import logging
from collections import Counter

import gymnax
import jax
import jax.numpy as jnp
import mlflow
import numpy as np
import pytest

from ppo_lab.run.recorders.mlflow_policy import save_policy_model, seed_params_from_checkpoint
from conftest import ROOT, TINY, launch, log_messages, read_rows, read_summary, start_launch, train_run

pytestmark = pytest.mark.slow

MEMORY_CHAIN = ["experiment=memory_chain", "num_seeds=4", "hardware.host_devices=1"]


@pytest.fixture(scope="module")
def killed_gru_run(tmp_path_factory):
    """The GRU run, trained as a crash and a relaunch: launch.py killed after its first
    checkpoint, then resumed in this process. Returns (run dir, the resumed run's summary, its log)."""
    args = [*MEMORY_CHAIN, "network.recurrent=gru", "train.chunk_updates=4", "checkpoint.every_min=0.0001"]
    run_dir = tmp_path_factory.mktemp("gru") / "run"
    proc = start_launch(args, run_dir)
    try:
        while not list((run_dir / "checkpoints").glob("ckpt_*.json")):
            assert proc.poll() is None, proc.output()[-3000:]
            time.sleep(0.1)
    finally:
        proc.kill()  # a crash: no clean shutdown
        proc.wait(timeout=30)
    assert read_summary(run_dir)["status"] == "running"
    with log_messages("ppo_lab", logging.INFO) as log:
        summary = train_run(args, run_dir)
    return run_dir, summary, "\n".join(log)


@pytest.mark.timeout(300)
def test_memory_chain_gru_remembers_and_feed_forward_is_at_chance(killed_gru_run, tmp_path):
    _, gru, _ = killed_gru_run
    ff = train_run([*MEMORY_CHAIN, "network.recurrent=null"], tmp_path / "ff")
    assert gru.status == ff.status == "completed"
    assert len(gru.eval["episode_return"]) == 4
    assert np.mean(gru.eval["episode_return"]) >= 0.9, gru.eval
    assert np.mean(ff.eval["episode_return"]) <= 0.3, ff.eval


def test_a_killed_gru_run_resumes_from_its_first_checkpoint_and_still_learns(killed_gru_run):
    run_dir, s, log = killed_gru_run
    assert "RESUMING from this run's checkpoint" in log
    assert s.status == "completed" and s.resumed_from is not None and 0 < s.resumed_from < s.updates == 80
    counts = Counter((int(r["update"]), int(r["seed"])) for r in read_rows(run_dir))
    assert max(counts.values()) == 1, "duplicate (update, seed) rows"
    assert sorted(counts) == [(u, seed) for u in range(1, 81) for seed in range(4)]
    assert np.mean(s.eval["episode_return"]) >= 0.9, s.eval


@pytest.mark.timeout(300)
def test_a_gru_forager_runs_the_survival_evaluation_and_replays(tmp_path):
    """The foraging world with memory: training, the survival protocol (the state zeroed where an
    agent dies and is reborn) and a replay, each carrying the recurrent state."""
    run_dir = tmp_path / "run"
    args = ["env=foraging", "reward=ground_truth", "network=mlp", "network.recurrent=gru", "network.recurrent_size=8",
            "env.grid_size=16", "env.food_min=4", "env.food_max=8", "env.poison_min=4", "env.poison_max=8", "env.max_steps=32",
            "ppo.num_envs=4", "ppo.num_steps=16", "ppo.total_timesteps=1024", "ppo.num_minibatches=2",
            "train.chunk_updates=8", "eval.episodes=2", "hardware.host_devices=1",
            "++eval.survival_envs=4", "++eval.survival_steps=32"]
    s = train_run(args, run_dir)
    assert s.status == "completed"
    for name in ("efficiency_per_life", "survival_mean", "efficiency_per_life_greedy"):
        assert len(s.eval[name]) == 1 and np.isfinite(s.eval[name][0]), name
    proc = subprocess.run([sys.executable, "-m", "ppo_lab.cli", "replay", str(run_dir), "--steps", "12"], cwd=ROOT,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (run_dir / "replay_seed0.gif").exists()


@pytest.mark.timeout(300)
def test_the_mlflow_pyfunc_takes_and_returns_the_recurrent_state(killed_gru_run, tmp_path):
    """A GRU trained on MemoryChain, saved as an MLflow pyfunc and loaded back: played through
    `predict({"obs", "state"})` with the returned state fed back it answers the memory question;
    with the state zeroed at every step it is at chance."""
    run_dir = killed_gru_run[0]
    ckpt = sorted((run_dir / "checkpoints").glob("ckpt_*.msgpack"))[-1]
    params = tmp_path / "params.msgpack"
    params.write_bytes(seed_params_from_checkpoint(ckpt, 0))
    save_policy_model(tmp_path / "policy", run_dir / "config.yaml", params, {"seed": 0})
    model = mlflow.pyfunc.load_model(str(tmp_path / "policy"))
    assert model.metadata.metadata["recurrent"] == "gru" and model.metadata.metadata["state_size"] == 64

    env, env_params = gymnax.make("MemoryChain-bsuite")
    n = 64
    reset = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))
    step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))

    def play(carry_state: bool) -> float:
        obs, state = reset(jax.random.split(jax.random.PRNGKey(7), n), env_params)
        memory = np.zeros((n, 64), np.float32)
        total = np.zeros(n)
        for t in range(6):  # one episode: the answer is rewarded +1 or -1 on the last step
            out = model.predict({"obs": np.asarray(obs), "state": memory if carry_state else np.zeros_like(memory)})
            assert out["action"].dtype == np.int64 and out["state"].shape == (n, 64)
            memory = out["state"]
            obs, state, reward, terminated, truncated, _ = step(jax.random.split(jax.random.PRNGKey(t), n), state,
                                                               jnp.asarray(out["action"]), env_params)
            total += np.asarray(reward)
        assert bool(np.asarray(terminated).all())
        return float(total.mean())

    assert play(carry_state=True) >= 0.9
    assert abs(play(carry_state=False)) <= 0.4


@pytest.mark.timeout(300)
def test_a_gru_splits_one_seeds_envs_over_two_devices(tmp_path):
    """hardware.layout=envs: each device re-runs its own envs' sequences, gradients averaged."""
    run_dir = tmp_path / "run"
    args = [a for a in TINY if not a.startswith("hardware.host_devices")]
    launch([*args, "network.recurrent=gru", "network.recurrent_size=8", "hardware.host_devices=2", "hardware.layout=envs"],
           run_dir, timeout=240)
    s = read_summary(run_dir)
    assert s["status"] == "completed" and s["layout"] == {"mode": "envs", "num_devices": 2, "num_replicas": 2, "envs_per_replica": 2}
    assert len(read_rows(run_dir)) == 32 and np.isfinite(s["eval"]["episode_return"][0])
