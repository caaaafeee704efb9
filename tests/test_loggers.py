"""W&B and TensorBoard loggers with the real libraries, offline, read back from their files."""

from __future__ import annotations

import json
import os
import math
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, launch, read_rows, read_summary

from ppo_lab.run.recorders import make_loggers
from ppo_lab.run.recorders.tensorboard_logger import read_scalars
from ppo_lab.run.recorders.wandb_logger import STATE_FILE, read_offline_run


def _cfg(tmp_path, extra=()):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from ppo_lab.config import validate

    conf = Path(__file__).resolve().parent.parent / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = compose("config", overrides=["env=cartpole", "logger=[csv,wandb,tensorboard]", "num_seeds=2", *extra])
    return validate(OmegaConf.to_container(cfg, resolve=True))


def _rows(updates, seeds=(0, 1)):
    return [
        {"update": u, "seed": s, "timesteps": 64 * u, "wall_s": 0.1 * u, "train/entropy": 0.7 - 0.01 * u + s,
         "train/mean_episode_return": float("nan") if u == 2 else 10.0 * u + s, "actions/left": 0.5, "perf/sps": 1000.0}
        for u in updates for s in seeds
    ]


def _wandb_runs(run_dir: Path) -> dict:
    """seed -> merged record of every offline session of that seed's W&B run."""
    out = {}
    for path in sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb")):
        rec = read_offline_run(path)
        if not rec["run"]:
            continue  # a session killed before W&B flushed anything
        seed = rec["config"]["seed"]
        merged = out.setdefault(seed, {"ids": set(), "history": [], "summary": {}, "run": rec["run"], "config": rec["config"]})
        merged["ids"].add(rec["run"]["id"])
        merged["history"] += rec["history"]
        merged["summary"].update(rec["summary"])
    return out


def test_logger_group_composes_as_a_list(tmp_path):
    cfg = _cfg(tmp_path)
    assert set(cfg.logger) == {"csv", "wandb", "tensorboard"}
    wandb = cfg.logger["wandb"]
    assert wandb.options["mode"] == "offline" and wandb.options["project"] == "ppo_lab"
    assert wandb.target == "ppo_lab.run.recorders.wandb_logger.make_logger"
    assert cfg.logger["csv"].target is None  # metrics.csv is the run's own file


@pytest.mark.slow
def test_loggers_write_and_resume_without_double_logging(tmp_path):
    cfg = _cfg(tmp_path, ["reward=default", "logger.wandb.group=mygroup"])
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # First session in its own process, killed (os._exit) after logging updates 1..6: no
    # finish. Its last checkpoint was at update 4, so the resumed session (same run dir)
    # re-computes updates 5 and 6 and goes on to 8.
    script = f"""
import os, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from test_loggers import _cfg, _rows
from ppo_lab.run.recorders import make_loggers
from pathlib import Path
cfg = _cfg(None, {["reward=default", "logger.wandb.group=mygroup"]!r})
loggers = make_loggers(Path({str(run_dir)!r}), cfg)
assert len(loggers) == 2  # csv is the runner's own metrics.csv
for lg in loggers:
    lg.log_rows(_rows(range(1, 5)))
    lg.log_rows(_rows(range(5, 7)))
os._exit(9)
"""
    # Its own W&B service, as a killed run's process has: a service this test process started
    # earlier (WANDB_SERVICE, inherited) would outlive the kill and keep the run ID "in use".
    env = {k: v for k, v in os.environ.items() if k != "WANDB_SERVICE"}
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 9, proc.stderr[-3000:]
    from ppo_lab.rundir import MetricsCSV

    MetricsCSV(run_dir / "metrics.csv").append(_rows(range(1, 5)))  # what the runner kept: up to the checkpoint
    ids_before = json.loads((run_dir / "wandb" / STATE_FILE).read_text())["ids"]
    loggers = make_loggers(run_dir, cfg)
    for lg in loggers:
        lg.log_rows(_rows(range(5, 9)))
        lg.finish({"status": "completed", "seeds": [0, 1], "updates": 8, "timesteps": 512,
                   "eval": {"episode_return": [111.0, 222.0], "episode_length": [11.0, 22.0]},
                   "final": {"train/mean_episode_return": [80.0, 81.0]}})

    state = json.loads((run_dir / "wandb" / STATE_FILE).read_text())
    assert state["ids"] == ids_before and state["last_logged"] == {"0": 8, "1": 8}
    # W&B lost the killed session's unflushed updates; they came back from metrics.csv (1..4)
    runs = _wandb_runs(run_dir)
    assert sorted(runs) == [0, 1]
    for seed, run in runs.items():
        assert run["ids"] == {ids_before[str(seed)]}  # the resumed session continued the same run id
        assert run["run"]["group"] == "mygroup" and run["run"]["job_type"] == "default"
        assert run["run"]["project"] == "ppo_lab"
        assert run["config"]["env"]["name"] == "cartpole" and run["config"]["ppo"]["num_steps"] == cfg.ppo.num_steps
        steps = [h["_step"] for h in run["history"]]
        assert steps == list(range(1, 9)), steps  # every update once, in order
        by_step = {h["_step"]: h for h in run["history"]}
        assert by_step[3]["train/entropy"] == pytest.approx(0.67 + seed)
        assert by_step[3]["timesteps"] == 192 and by_step[3]["actions/left"] == 0.5
        assert "train/mean_episode_return" not in by_step[2]  # NaN is not logged
        assert run["summary"]["eval/episode_return"] == [111.0, 222.0][seed]
        assert run["summary"]["final/train/mean_episode_return"] == [80.0, 81.0][seed]
        assert run["summary"]["status"] == "completed"

    for seed in (0, 1):
        scalars = read_scalars(run_dir / "tb" / f"seed_{seed}")
        entropy = scalars["train/entropy"]
        assert [s for s, _ in entropy] == list(range(1, 9))  # purge_step dropped the first 5, 6
        assert dict(entropy)[3] == pytest.approx(0.67 + seed)
        assert [s for s, _ in scalars["charts/timesteps"]] == list(range(1, 9))
        assert scalars["eval/episode_return"] == [(8, [111.0, 222.0][seed])]
        assert 2 not in dict(scalars["train/mean_episode_return"])


def test_unknown_wandb_mode_is_a_config_error(tmp_path):
    from ppo_lab.errors import ConfigError

    cfg = _cfg(tmp_path, ["logger.wandb.mode=sometimes"])
    with pytest.raises(ConfigError, match="logger.wandb.mode"):
        make_loggers(tmp_path, cfg)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_launch_with_all_loggers(tmp_path, tiny):
    run_dir = tmp_path / "run"
    launch([*tiny, "num_seeds=2", "logger=[csv,wandb,tensorboard]"], run_dir)
    summary, rows = read_summary(run_dir), read_rows(run_dir)
    assert summary["status"] == "completed"
    runs = _wandb_runs(run_dir)
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
