"""W&B and TensorBoard loggers with the real libraries, offline, read back from their files."""

from __future__ import annotations

import json
import os
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import ROOT, launch, metric_rows, open_loggers, read_rows, read_summary, run_config
from store_readers import read_offline_run, read_scalars, wandb_runs

from ppo_lab.rundir import LOGGERS, MetricsCSV, RunSummary

LOGGERS_ON = ["env=cartpole", "logger=[csv,wandb,tensorboard]", "num_seeds=2", "reward=default", "logger.wandb.group=mygroup"]
END = RunSummary(status="completed", seeds=[0, 1], eval={"episode_return": [111.0, 222.0], "episode_length": [11.0, 22.0]},
                 final={"train/mean_episode_return": [80.0, 81.0]})


def test_logger_group_composes_as_a_list():
    """`logger=[...]` picks the loggers by name; csv is the run's own metrics.csv, nothing to build."""
    cfg = run_config(["env=cartpole", "logger=[csv,wandb,tensorboard]"])
    assert set(cfg.logger) == {"csv", "wandb", "tensorboard"}
    assert cfg.logger["csv"].target is None and cfg.logger["wandb"].target and cfg.logger["tensorboard"].target


@pytest.mark.slow
def test_loggers_write_and_resume_without_double_logging(tmp_path):
    cfg = run_config(LOGGERS_ON)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # Session 1 in its own process, killed (os._exit) after logging updates 1..6: no finish.
    # W&B flushes its file often here, so the killed session leaves some updates in it. Its
    # last checkpoint was at update 4: the resumed session (same run dir) recomputes updates
    # 5 and 6 and goes on to 8.
    script = f"""
import os, sys, time
sys.path.insert(0, {str(Path(__file__).parent)!r})
from pathlib import Path
from conftest import metric_rows, open_loggers, run_config
from store_readers import read_offline_run
run_dir = Path({str(run_dir)!r})
loggers = open_loggers(run_dir, run_config({LOGGERS_ON!r}))
assert len(loggers) == 2  # csv is the runner's own metrics.csv
for lg in loggers:
    lg.log_rows(metric_rows(range(1, 5)))
    lg.log_rows(metric_rows(range(5, 7)))
files = list((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))
while not all(read_offline_run(f)["history"] for f in files):  # until W&B has written some of them
    time.sleep(0.1)
os._exit(9)
"""
    # Its own W&B service, as a killed run's process has: a service this test process started
    # earlier (WANDB_SERVICE, inherited) would outlive the kill and keep the run ID "in use".
    env = {**{k: v for k, v in os.environ.items() if k != "WANDB_SERVICE"}, "WANDB__TRANSACTION_LOG_FLUSH_INTERVAL": "0.1"}
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 9, proc.stderr[-3000:]
    MetricsCSV(run_dir / "metrics.csv").append(metric_rows(range(1, 5)))  # what the runner kept: up to the checkpoint
    ids = json.loads((run_dir / LOGGERS).read_text())["wandb"]["runs"]
    for lg in open_loggers(run_dir, cfg):
        lg.log_rows(metric_rows(range(5, 9)))
        lg.finish(replace(END, updates=8, timesteps=512))
    # The killed session's W&B folders hold an unknown part of updates 1..6: set aside, out of
    # what `wandb sync wandb/offline-run-*` uploads; the resumed session logged 1..4 from metrics.csv.
    unfinished = sorted((run_dir / "wandb" / "unfinished").glob("offline-run-*/run-*.wandb"))
    assert len(unfinished) == 2 and all(read_offline_run(f)["history"] for f in unfinished)
    # A relaunch of the finished run that trains on (a larger budget) adds updates 9 and 10 only.
    MetricsCSV(run_dir / "metrics.csv").append(metric_rows(range(5, 9)))
    for lg in open_loggers(run_dir, cfg):
        lg.log_rows(metric_rows(range(7, 11)))
        lg.finish(replace(END, updates=10, timesteps=640))

    state = json.loads((run_dir / LOGGERS).read_text())
    assert state["wandb"]["runs"] == ids and "open" not in state["wandb"]
    assert state["wandb"]["held"] == state["tensorboard"]["held"] == {"0": 10, "1": 10}
    assert len(list((run_dir / "wandb" / "unfinished").iterdir())) == 2  # nothing more set aside
    runs = wandb_runs(run_dir)
    assert sorted(runs) == [0, 1]
    for seed, run in runs.items():
        assert run["ids"] == {ids[str(seed)]}  # every session continued the same run id
        assert run["run"]["group"] == "mygroup" and run["run"]["job_type"] == "default"
        assert run["run"]["project"] == "ppo_lab"
        assert run["config"]["env"]["name"] == "cartpole" and run["config"]["ppo"]["num_steps"] == cfg.ppo.num_steps
        steps = [h["_step"] for h in run["history"]]
        assert steps == list(range(1, 11)), steps  # every update once, in order
        by_step = {h["_step"]: h for h in run["history"]}
        assert by_step[3]["train/entropy"] == pytest.approx(0.67 + seed)
        assert by_step[3]["timesteps"] == 192 and by_step[3]["actions/left"] == 0.5
        assert "train/mean_episode_return" not in by_step[2]  # NaN is not logged
        assert run["summary"]["eval/episode_return"] == [111.0, 222.0][seed]
        assert run["summary"]["final/train/mean_episode_return"] == [80.0, 81.0][seed]
        assert run["summary"]["status"] == "completed" and run["summary"]["updates"] == 10

    for seed in (0, 1):
        scalars = read_scalars(run_dir / "tb" / f"seed_{seed}")
        entropy = scalars["train/entropy"]
        assert [s for s, _ in entropy] == list(range(1, 11))
        assert dict(entropy)[3] == pytest.approx(0.67 + seed)
        assert [s for s, _ in scalars["charts/timesteps"]] == list(range(1, 11))
        assert scalars["eval/episode_return"] == [(8, [111.0, 222.0][seed]), (10, [111.0, 222.0][seed])]
        assert 2 not in dict(scalars["train/mean_episode_return"])


def test_a_logger_added_on_relaunch_gets_the_history_from_metrics_csv(tmp_path):
    """TensorBoard added to a run trained to update 4 without it: its event files have every update."""
    MetricsCSV(tmp_path / "metrics.csv").append(metric_rows(range(1, 5)))
    (tensorboard,) = open_loggers(tmp_path, run_config(["env=cartpole", "logger=[csv,tensorboard]", "num_seeds=2"]))
    tensorboard.log_rows(metric_rows(range(5, 7)))
    tensorboard.finish(replace(END, updates=6))
    for seed in (0, 1):
        assert [s for s, _ in read_scalars(tmp_path / "tb" / f"seed_{seed}")["train/entropy"]] == list(range(1, 7))


def test_unknown_wandb_mode_is_a_config_error(tmp_path):
    from ppo_lab.errors import ConfigError

    cfg = run_config(["env=cartpole", "logger=[csv,wandb]", "logger.wandb.mode=sometimes"])
    with pytest.raises(ConfigError, match="logger.wandb.mode"):
        open_loggers(tmp_path, cfg)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_launch_with_all_loggers(tmp_path, tiny):
    run_dir = tmp_path / "run"
    launch([*tiny, "num_seeds=2", "logger=[csv,wandb,tensorboard]"], run_dir)
    summary, rows = read_summary(run_dir), read_rows(run_dir)
    assert summary["status"] == "completed"
    runs = wandb_runs(run_dir)
    assert sorted(runs) == [0, 1]
    for seed, run in runs.items():
        assert run["run"]["group"] == "cartpole" and run["run"]["job_type"] == "default"
        assert run["config"]["seed"] == seed
        csv_rows = {int(r["update"]): r for r in rows if int(r["seed"]) == seed}
        assert [h["_step"] for h in run["history"]] == sorted(csv_rows)
        for h in run["history"]:
            assert h["train/entropy"] == pytest.approx(float(csv_rows[h["_step"]]["train/entropy"]), rel=1e-5)
        assert run["summary"]["eval/episode_return"] == pytest.approx(summary["eval"]["episode_return"][seed])
        scalars = read_scalars(run_dir / "tb" / f"seed_{seed}")
        assert [s for s, _ in scalars["train/approx_kl"]] == sorted(csv_rows)
        for step, value in scalars["train/approx_kl"]:
            assert value == pytest.approx(float(csv_rows[step]["train/approx_kl"]), rel=1e-5, abs=1e-9)
        assert scalars["eval/episode_return"][0][1] == pytest.approx(summary["eval"]["episode_return"][seed])
        assert all(math.isfinite(v) for _, v in scalars["train/entropy"])
    assert not (Path.cwd() / "wandb").exists() or (run_dir / "wandb").exists()  # W&B files under the run dir
