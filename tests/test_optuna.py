"""hydra/sweeper=optuna: the search-space syntax, the objective, and real studies on tiny
CartPole budgets (every trial recorded, a best value written, a relaunch continues the study,
a failing job is a failed trial)."""

from __future__ import annotations

import csv
import math
from dataclasses import replace
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from conftest import ROOT, TINY, read_summary

from ppo_lab.errors import ConfigError
from ppo_lab.judging.objective import Objective, ObjectiveError, job_result, objective_value, parse_objective
from ppo_lab.launching.command_line import override_text
from ppo_lab.launching.optuna_sweeper import search_space
from ppo_lab.rundir import RunSummary


def _sweep(args: list[str], sweep_dir: Path, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "launch.py", "-m", "hydra/sweeper=optuna", "env=cartpole", *TINY, f"hydra.sweep.dir={sweep_dir}", *args]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"sweep failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def _study(sweep_dir: Path, name: str):
    import optuna

    return optuna.load_study(study_name=name, storage=f"sqlite:///{sweep_dir / 'optuna.db'}")


def test_search_space_syntax():
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    space = search_space(
        {"ppo.lr": "tag(log, interval(1e-4, 1e-2))", "ppo.update_epochs": "int(interval(1, 8))",
         "network.hidden_sizes": "choice([64,64],[128])", "ppo.num_envs": "range(4, 20, 4)", "ppo.gamma": "0.9,0.99"},
        ["ppo.gae_lambda=interval(0.8, 0.99)", "ppo.gamma=0.97", "env=cartpole"],
    )
    d = space.distributions
    assert d["ppo.lr"] == FloatDistribution(1e-4, 1e-2, log=True)
    assert d["ppo.update_epochs"] == IntDistribution(1, 8)
    assert d["ppo.num_envs"] == IntDistribution(4, 16, step=4)  # range excludes its end, as in Hydra
    assert d["ppo.gae_lambda"] == FloatDistribution(0.8, 0.99)
    assert d["network.hidden_sizes"] == CategoricalDistribution(["[64,64]", "[128]"])
    assert "ppo.gamma" not in d and space.fixed == ["ppo.gamma=0.97", "env=cartpole"]  # the command line wins
    overrides = space.overrides({"ppo.lr": 0.001, "network.hidden_sizes": "[128]", "ppo.num_envs": 8})
    assert overrides == ["ppo.gamma=0.97", "env=cartpole", "ppo.lr=0.001", "network.hidden_sizes=[128]", "ppo.num_envs=8"]
    assert [override_text(v) for v in (None, True, 1e-05, "relu", "a b", [1, 2])] == ["null", "true", "1e-05", "relu", "'a b'", "[1,2]"]
    with pytest.raises(ValueError, match="needs a search space"):
        search_space({}, ["ppo.lr=0.1"])


def test_the_sweeper_is_a_hydra_plugin_and_the_named_sweep_composes():
    from hydra.core.plugins import Plugins
    from hydra.plugins.sweeper import Sweeper

    assert "hydra_plugins.ppo_lab_optuna.OptunaSweeper" in {f"{c.__module__}.{c.__name__}" for c in Plugins.instance().discover(Sweeper)}
    proc = subprocess.run([sys.executable, "launch.py", "-cd", "sweeps", "-cn", "optuna_cartpole", "--cfg", "all"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cfg = OmegaConf.create(proc.stdout)
    assert cfg.hydra.sweeper._target_ == "hydra_plugins.ppo_lab_optuna.OptunaSweeper" and cfg.hydra.mode == "MULTIRUN"
    assert "${" not in cfg.hydra.sweep.dir  # fixed: a relaunch continues the study
    assert parse_objective(cfg.optimize) == Objective("eval/episode_return", "maximize", "mean")
    assert cfg.experiment == "cartpole" and cfg.ppo.total_timesteps == 30000
    space = search_space(OmegaConf.to_container(cfg.hydra.sweeper.params), [])
    for key in space.distributions:  # every searched key exists in the config it overrides
        assert OmegaConf.select(cfg, key) is not None, key


def test_objective_from_a_summary():
    summary = RunSummary(status="completed", eval={"episode_return": [10.0, 20.0, 30.0, 1000.0]},
                         final={"train/mean_episode_return": [1.0, 2.0, 3.0, 4.0]})
    assert objective_value(summary, parse_objective(None))[0] == pytest.approx(265.0)
    assert objective_value(summary, parse_objective({"reduce": "iqm"}))[0] == pytest.approx(25.0)  # middle half: 20, 30
    assert objective_value(summary, parse_objective({"metric": "final/train/mean_episode_return"}))[0] == pytest.approx(2.5)
    assert objective_value(summary, parse_objective({"metric": "train/mean_episode_return"}))[0] == pytest.approx(2.5)  # bare name: eval, then final
    assert objective_value(replace(summary, status="timed_out"), parse_objective(None))[1] == [10.0, 20.0, 30.0, 1000.0]
    with pytest.raises(ObjectiveError, match="ended failed"):
        objective_value(replace(summary, status="failed"), parse_objective(None))
    with pytest.raises(ObjectiveError, match="it has eval/episode_length, eval/episode_return, final/train/mean_episode_return"):
        objective_value(replace(summary, eval={"episode_return": [1.0], "episode_length": [2.0]}), parse_objective({"metric": "eval/nope"}))
    with pytest.raises(ConfigError, match="optimize.direction"):
        parse_objective({"direction": "up"})
    with pytest.raises(ConfigError, match="optimize.reduce"):
        parse_objective({"reduce": "median"})
    assert job_result(summary, {"optimize": {"metric": "eval/episode_return"}}) == pytest.approx(265.0)
    assert job_result(summary, {}) is summary
    assert math.isnan(job_result(replace(summary, status="stopped"), {"optimize": {"metric": "eval/episode_return"}}))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_study_records_every_trial_writes_the_best_and_continues_when_relaunched(tmp_path):
    sweep_dir = tmp_path / "study"
    args = ["num_seeds=2", "ppo.lr=tag(log, interval(1e-3, 3e-2))", "hydra.sweeper.study_name=tiny",
            "hydra.sweeper.sampler.seed=0", "optimize.reduce=iqm"]
    _sweep([*args, "hydra.sweeper.n_trials=4"], sweep_dir)
    study = _study(sweep_dir, "tiny")
    assert [t.number for t in study.trials] == [0, 1, 2, 3]
    assert all(t.state.name == "COMPLETE" for t in study.trials)
    for trial in study.trials:
        run_dir = Path(trial.user_attrs["run_dir"])
        assert run_dir == sweep_dir / str(trial.number)
        summary = read_summary(run_dir)
        assert summary["seeds"] == [0, 1]
        assert trial.value == pytest.approx(sum(summary["eval"]["episode_return"]) / 2)  # IQM of 2 values = mean
        assert summary_lr(run_dir) == pytest.approx(trial.params["ppo.lr"])
    assert len({t.params["ppo.lr"] for t in study.trials}) == 4
    results = OmegaConf.load(sweep_dir / "optimization_results.yaml")
    assert results.best_value == pytest.approx(study.best_value) and results.best_params == study.best_params
    assert results.trials.complete == 4 and results.trials.failed == 0

    first = {t.number: (t.params, t.value) for t in study.trials}
    _sweep([*args, "hydra.sweeper.n_trials=1"], sweep_dir)  # the same sweep dir: the same study, one more trial
    study = _study(sweep_dir, "tiny")
    assert [t.number for t in study.trials] == [0, 1, 2, 3, 4]
    assert {t.number: (t.params, t.value) for t in study.trials[:4]} == first
    assert study.trials[4].state.name == "COMPLETE" and (sweep_dir / "4" / "summary.json").exists()
    assert study.trials[4].params["ppo.lr"] not in {p["ppo.lr"] for p, _ in first.values()}  # the sampler moved on
    results = OmegaConf.load(sweep_dir / "optimization_results.yaml")
    assert results.trials.total == 5 and results.best_value == pytest.approx(study.best_value)
    rows = list(csv.DictReader((sweep_dir / "runs.csv").open()))  # aggregated: every trial, none "missing"
    assert len({r["run_dir"] for r in rows}) == 5 and {r["status"] for r in rows} == {"completed"}


def summary_lr(run_dir: Path) -> float:
    from ppo_lab.rundir import read_config

    return read_config(run_dir)["ppo"]["lr"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_failing_job_is_a_failed_trial_with_the_local_launcher(tmp_path):
    sweep_dir = tmp_path / "study"
    # gamma=1.5 is invalid: that job raises a config error in its own process (hydra/launcher=local).
    proc = _sweep(["hydra/launcher=local", "ppo.gamma=choice(0.99,1.5)", "hydra.sweeper.n_trials=2", "hydra.sweeper.n_jobs=2",
                   "hydra.sweeper.sampler._target_=optuna.samplers.BruteForceSampler", "hydra.sweeper.study_name=failing"], sweep_dir)
    assert proc.returncode == 0
    study = _study(sweep_dir, "failing")
    states = {t.params["ppo.gamma"]: t for t in study.trials}
    assert states[1.5].state.name == "FAIL" and "ppo.gamma" in states[1.5].user_attrs["error"]
    assert states[0.99].state.name == "COMPLETE"
    assert states[0.99].value == pytest.approx(read_summary(sweep_dir / str(states[0.99].number))["eval"]["episode_return"][0])
    results = OmegaConf.load(sweep_dir / "optimization_results.yaml")
    assert results.best_params == {"ppo.gamma": 0.99} and results.trials.failed == 1


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_batch_of_trials_trains_as_one_program(tmp_path):
    """hydra.sweeper.batch_size=3: three trials asked at once; the two valid ones (they differ
    only in the traced ppo.gamma) train as one program of 2 cells x 2 seeds; the invalid one
    is a failed trial; the study and optimization_results.yaml as with any launcher."""
    sweep_dir = tmp_path / "study"
    proc = _sweep(["num_seeds=2", "ppo.gamma=choice(0.9,0.99,1.5)", "hydra.sweeper.n_trials=3", "hydra.sweeper.batch_size=3",
                   "hydra.sweeper.sampler._target_=optuna.samplers.BruteForceSampler", "hydra.sweeper.study_name=batch"],
                  sweep_dir)
    out = proc.stdout + proc.stderr
    assert out.count("compiled one chunk of 8 updates for 4 replicas") == 1
    study = _study(sweep_dir, "batch")
    trials = {t.params["ppo.gamma"]: t for t in study.trials}
    assert trials[1.5].state.name == "FAIL" and "ppo.gamma" in trials[1.5].user_attrs["error"]
    for gamma in (0.9, 0.99):
        summary = read_summary(sweep_dir / str(trials[gamma].number))
        assert trials[gamma].state.name == "COMPLETE" and summary["vmap_group"]["cells"] == 2
        assert trials[gamma].value == pytest.approx(sum(summary["eval"]["episode_return"]) / 2)
    results = OmegaConf.load(sweep_dir / "optimization_results.yaml")
    assert results.trials.complete == 2 and results.trials.failed == 1
