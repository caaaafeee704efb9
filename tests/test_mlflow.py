"""The MLflow recorder with the real library and a real local SQLite store, read back through
MLflow's own client: runs, params, metric histories, artifacts, resume, the model registry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import ROOT, metric_rows, open_loggers, read_summary, run_config, train_run

from ppo_lab.errors import ConfigError
from ppo_lab.run.recorders.mlflow_recorder import check_options, convergence
from ppo_lab.rundir import LOGGERS, MetricsCSV, RunSummary


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One store for the module: creating MLflow's tables costs seconds."""
    return tmp_path_factory.mktemp("mlflow")


def _client(store: Path):
    from mlflow import MlflowClient

    uri = f"sqlite:///{store / 'mlflow.db'}"
    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def _cfg(store: Path, extra=()):
    return run_config(["env=cartpole", "logger=[csv,mlflow]", "num_seeds=2", f"logger.mlflow.dir={store}", *extra])


def _history(client, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def test_options_are_checked(store):
    assert check_options(None)["dir"] == "outputs/mlflow"
    with pytest.raises(ConfigError, match="logger.mlflow.trackinguri"):
        check_options({"trackinguri": "x"})
    with pytest.raises(ConfigError, match="logger.mlflow.register_if"):
        check_options({"register_if": {"metric": "eval/episode_return"}})
    with pytest.raises(ConfigError, match="register_if.direction"):
        check_options({"register_if": {"metric": "eval/episode_return", "threshold": 1, "direction": "up"}})


def test_convergence_rules():
    rule = {"metric": None, "threshold": None, "direction": "maximize"}
    stopped = RunSummary(status="completed", stop_reason="train.target_return=475 reached (best 480.00)",
                         final={"train/mean_episode_return": [480.0, 470.0]}, eval={"episode_return": [500.0, 20.0]})
    assert convergence(stopped, 1, 475.0, rule).startswith("early stopping")  # the job's own criterion
    ran_out = replace(stopped, stop_reason="total_timesteps reached")
    assert convergence(ran_out, 0, 475.0, rule).startswith("train/mean_episode_return 480.00")
    assert convergence(ran_out, 1, 475.0, rule) is None
    assert convergence(ran_out, 0, None, rule) is None
    threshold = {"metric": "eval/episode_return", "threshold": 100.0, "direction": "maximize"}
    assert convergence(ran_out, 0, None, threshold) == "eval/episode_return 500 >= 100"
    assert convergence(ran_out, 1, None, threshold) is None
    assert convergence(replace(stopped, status="failed"), 0, 475.0, threshold) is None


@pytest.mark.slow
def test_resume_continues_the_same_runs_and_logs_each_update_once(store, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # Session 1 in its own process logs updates 1..6 and dies without finishing; its last
    # checkpoint was at update 4, so the resumed session recomputes 5, 6 and goes on to 8.
    script = f"""
import os, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from pathlib import Path
from conftest import metric_rows, open_loggers
from test_mlflow import _cfg
cfg = _cfg(Path({str(store)!r}), ["logger.mlflow.experiment_name=resume_test"])
(recorder,) = open_loggers(Path({str(run_dir)!r}), cfg)
recorder.log_rows(metric_rows(range(1, 5)))
recorder.log_rows(metric_rows(range(5, 7)))
os._exit(9)
"""
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 9, proc.stderr[-3000:]
    ids = json.loads((run_dir / LOGGERS).read_text())["mlflow"]

    cfg = _cfg(store, ["logger.mlflow.experiment_name=resume_test"])
    (recorder,) = open_loggers(run_dir, cfg)
    assert recorder.parent == ids["parent"] and {str(s): r for s, r in recorder.run_ids.items()} == ids["runs"]
    assert recorder.held == {0: 6, 1: 6}  # read back from MLflow itself
    recorder.log_rows(metric_rows(range(5, 9)))
    recorder.finish(RunSummary(status="completed", stop_reason="total_timesteps reached", seeds=[0, 1], updates=8,
                               eval={"episode_return": [111.0, 222.0]}, final={"train/mean_episode_return": [80.0, 81.0]}))

    client = _client(store)
    assert sorted(recorder.run_ids) == [0, 1]  # one MLflow run per seed: the loop below checks both
    for seed, run_id in recorder.run_ids.items():
        entropy = _history(client, run_id, "train/entropy")
        assert [s for s, _ in entropy] == list(range(1, 9))  # every update once
        assert dict(entropy)[3] == pytest.approx(0.67 + seed)
        assert 2 not in dict(_history(client, run_id, "train/mean_episode_return"))  # NaN is not logged
        run = client.get_run(run_id)
        assert run.info.status == "FINISHED" and run.data.tags["mlflow.parentRunId"] == ids["parent"]
        assert run.data.metrics["eval/episode_return"] == [111.0, 222.0][seed]
        assert run.data.params["seed"] == str(seed) and run.data.params["env.name"] == "cartpole"
        assert "ppo_lab.registered_model" not in run.data.tags  # no target, no threshold: nothing registered
    parent = client.get_run(ids["parent"])
    assert parent.data.metrics["eval/episode_return"] == pytest.approx(166.5)  # the mean over seeds
    assert len(client.search_runs([parent.info.experiment_id])) == 3


def test_a_logger_added_on_relaunch_gets_the_history_from_metrics_csv(store, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    MetricsCSV(run_dir / "metrics.csv").append(metric_rows(range(1, 5)))  # trained to update 4 without MLflow
    cfg = _cfg(store, ["logger.mlflow.experiment_name=backfill_test"])
    (recorder,) = open_loggers(run_dir, cfg)
    recorder.log_rows(metric_rows(range(5, 7)))
    client = _client(store)
    assert sorted(recorder.run_ids) == [0, 1]  # one MLflow run per seed: the loop below checks both
    for seed, run_id in recorder.run_ids.items():
        assert [s for s, _ in _history(client, run_id, "train/entropy")] == list(range(1, 7))
        assert dict(_history(client, run_id, "timesteps"))[2] == 128


def test_a_population_tags_each_member_and_marks_the_best(store, tmp_path):
    """A population's members (docs/pbt.md) are seeds: each MLflow run is tagged with its member
    and, at the end, whether it is the best; `member` is an identity, not a metric; `pbt/lr` a series."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    cfg = _cfg(store, ["num_seeds=1", "pbt.population=2", "logger.mlflow.experiment_name=population_test",
                       "logger.mlflow.artifacts=false"])
    (recorder,) = open_loggers(run_dir, cfg)
    recorder.log_rows([{**r, "member": r["seed"], "pbt/lr": 1e-3 * (r["seed"] + 1)} for r in metric_rows(range(1, 4))])
    recorder.finish(RunSummary(status="completed", seeds=[0, 1], updates=3, final={"member": [0, 1]}, pbt={"best_member": 1}))
    client = _client(store)
    assert sorted(recorder.run_ids) == [0, 1]
    for seed, run_id in recorder.run_ids.items():
        run = client.get_run(run_id)
        assert run.data.tags["ppo_lab.member"] == str(seed)
        assert run.data.tags["ppo_lab.pbt_best_member"] == ("true" if seed == 1 else "false")
        assert "member" not in run.data.metrics and "final/member" not in run.data.metrics
        assert [v for _, v in _history(client, run_id, "pbt/lr")] == pytest.approx([1e-3 * (seed + 1)] * 3)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_run_logs_runs_artifacts_and_registers_a_policy_that_acts(store, tmp_path, tiny):
    run_dir = tmp_path / "run"
    summary = train_run([*tiny, "num_seeds=2", "logger=[csv,mlflow]", f"logger.mlflow.dir={store}",
                         "logger.mlflow.experiment_name=mlflow_launch", "train.target_return=5"], run_dir)
    assert read_summary(run_dir) == summary.to_json()
    assert summary.status == "completed"
    client = _client(store)
    exp = client.get_experiment_by_name("mlflow_launch")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"  # MLflow 3's UI opens it as model training
    runs = client.search_runs([exp.experiment_id])
    parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    children = {int(r.data.tags["ppo_lab.seed"]): r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    assert sorted(children) == [0, 1] and len(runs) == 3
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} == {"config.yaml", "summary.json", "curves.png", "checkpoint"}
    ckpt = {Path(a.path).name for a in client.list_artifacts(parent.info.run_id, "checkpoint")}
    assert ckpt == {f"ckpt_{summary.updates}.msgpack", f"ckpt_{summary.updates}.json"}
    assert parent.data.params["ppo.num_envs"] == "4" and parent.data.params["num_seeds"] == "2"
    versions = {}
    for seed, run in children.items():
        assert run.info.status == "FINISHED" and run.data.params["seed"] == str(seed)
        assert run.data.params["ppo.lr"] == str(json.loads(parent.data.params["ppo.lr"]))
        assert len(client.get_metric_history(run.info.run_id, "train/entropy")) == summary.updates
        assert run.data.metrics["eval/episode_return"] == pytest.approx(summary.eval["episode_return"][seed])
        assert {"config.yaml", "summary.json", "curves.png", "policy"} <= {a.path for a in client.list_artifacts(run.info.run_id)}
        name, version = run.data.tags["ppo_lab.registered_model"].split("/")
        mv = client.get_model_version(name, version)
        assert mv.tags["seed"] == str(seed) and float(mv.tags["eval/episode_return"]) == pytest.approx(summary.eval["episode_return"][seed], rel=1e-5)
        assert mv.run_id == run.info.run_id
        versions[seed] = f"models:/{name}/{version}"
    assert sorted(versions) == [0, 1]  # both seeds converged (target 5) and were registered

    # The registered model loads in a fresh process and maps env observations to valid actions.
    script = f"""
import json, sys
import jax, numpy as np, gymnax, mlflow
mlflow.set_tracking_uri({f"sqlite:///{store / 'mlflow.db'}"!r})
env, params = gymnax.make("CartPole-v1")
obs = np.stack([np.asarray(env.reset(k, params)[0]) for k in jax.random.split(jax.random.PRNGKey(3), 7)])
out = {{}}
for seed, uri in {versions!r}.items():
    actions = mlflow.pyfunc.load_model(uri).predict(obs)
    out[seed] = [np.asarray(actions).dtype.kind, np.asarray(actions).tolist()]
print(json.dumps(out))
"""
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for seed in ("0", "1"):
        kind, actions = out[seed]
        assert kind == "i" and len(actions) == 7 and set(actions) <= {0, 1}
