"""Tracking stores fail fast or degrade, never hang: an unreachable MLflow URI (a closed local
port) with and without on_unreachable=warn, W&B online without its server, bad settings, a
store that hangs or disappears mid-run (a real local MLflow server, started and stopped here
by its pid), and a TensorBoard writer whose disk fills up. Network: 127.0.0.1 only."""

from __future__ import annotations

import http.server
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import fill_when, free_port, launch, read_rows, read_summary, start_launch, train_run
from mlflow import MlflowClient

from ppo_lab.config import LoggerSpec
from ppo_lab.errors import ConfigError
from ppo_lab.run.recorders.mlflow_recorder import check_options
from ppo_lab.run.recorders.reachability import StoreUnreachable, check_stores, probe, remote_store, store_policy

CLOSED = "http://127.0.0.1:9"  # nothing listens on the discard port here
CHUNK_UPDATES = 8
SMALL = ["env=cartpole", "ppo.num_envs=4", "ppo.num_steps=16", "ppo.num_minibatches=2", "ppo.update_epochs=2",
         f"train.chunk_updates={CHUNK_UPDATES}", "eval.episodes=2", "eval.max_steps=32", "hardware.host_devices=1",
         "network.hidden_sizes=[8]", "ppo.total_timesteps=1024"]


# --- settings --------------------------------------------------------------------------------

@pytest.mark.parametrize("key, value, valid", [
    ("on_unreachable", "maybe", "error or warn"),
    ("connect_timeout_s", -1, "seconds > 0"),
    ("connect_timeout_s", 0, "seconds > 0"),
    ("connect_timeout_s", "ten", "seconds > 0"),
    ("connect_timeout_s", True, "seconds > 0"),
])
def test_bad_store_settings_are_config_errors_naming_key_value_and_valid(key, value, valid):
    with pytest.raises(ConfigError, match=re.escape(f"logger.mlflow.{key}={value!r}") + ".*" + valid):
        store_policy("mlflow", {key: value})
    assert store_policy("wandb", None) == (10.0, "error")


def test_bad_store_settings_stop_a_launch_before_anything_is_built(tmp_path):
    with pytest.raises(ConfigError, match="logger.mlflow.on_unreachable='maybe'"):
        train_run([*SMALL, "logger=[csv,mlflow]", "logger.mlflow.on_unreachable=maybe"], tmp_path / "run")
    with pytest.raises(ConfigError, match="logger.wandb.connect_timeout_s=-1"):
        train_run([*SMALL, "logger=[csv,wandb]", "logger.wandb.connect_timeout_s=-1"], tmp_path / "run")
    assert not (tmp_path / "run").exists()
    assert check_options({"connect_timeout_s": 2, "on_unreachable": "warn"})["on_unreachable"] == "warn"


def test_which_stores_are_remote(monkeypatch):
    assert remote_store("mlflow", {"tracking_uri": None}) is None
    assert remote_store("mlflow", {"tracking_uri": "sqlite:////tmp/x.db"}) is None
    assert remote_store("mlflow", {"tracking_uri": "http://host:5000"}) == "http://host:5000"
    assert remote_store("mlflow", {"tracking_uri": "postgresql+psycopg2://u@db/x"}) == "postgresql+psycopg2://u@db/x"
    assert remote_store("wandb", {"mode": "offline"}) is None and remote_store("tensorboard", {}) is None
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")
    assert remote_store("wandb", {"mode": "online"}) == "http://127.0.0.1:9"


# --- the probe: refused, silent, answering ---------------------------------------------------

def test_probe_of_a_closed_port_is_refused():
    assert "ConnectionRefusedError" in probe(CLOSED, 5)
    assert "ConnectionRefusedError" in probe("postgresql://u@127.0.0.1:9/db", 5)


def test_probe_of_a_server_that_never_answers_gives_up_at_the_timeout():
    with socket.socket() as listener:  # accepts connections (the kernel's backlog) but never replies
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        error = probe(f"http://127.0.0.1:{listener.getsockname()[1]}", 1.0)
    assert error is not None and ("timed out" in error or "no answer" in error), error


def _specs(loggers: dict) -> dict:
    """The `logger` section as validation gives it to check_stores: name -> LoggerSpec."""
    return {name: LoggerSpec(name, None if name == "csv" else f"ppo_lab.run.recorders.{name}", options)
            for name, options in loggers.items()}


def test_probe_of_a_server_that_answers_even_404_passes():
    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_error(404)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert probe(f"http://127.0.0.1:{server.server_address[1]}", 2) is None
        kept, disabled = check_stores(_specs({"csv": {}, "mlflow": {"tracking_uri": f"http://127.0.0.1:{server.server_address[1]}"}}))
        assert list(kept) == ["csv", "mlflow"] and disabled == []
    finally:
        server.shutdown()


# --- unreachable at start: exit 2, or go on without it ---------------------------------------

@pytest.mark.timeout(120)
def test_unreachable_mlflow_uri_exits_2_before_building_naming_it(tmp_path):
    """`logger=[csv,mlflow] logger.mlflow.tracking_uri=http://127.0.0.1:9` exits with code 2
    naming the URI, before anything is built or compiled (it hung 12.5 minutes before)."""
    run_dir = tmp_path / "run"
    proc = launch([*SMALL, "logger=[csv,mlflow]", f"logger.mlflow.tracking_uri={CLOSED}"], run_dir, timeout=90, check=False)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"the store at {CLOSED} is unreachable" in proc.stderr and "Connection refused" in proc.stderr
    assert "on_unreachable=warn" in proc.stderr and "Traceback" not in proc.stderr
    assert "compiled" not in proc.stdout + proc.stderr
    assert not run_dir.exists()  # nothing trained, nothing left behind


@pytest.mark.timeout(120)
def test_unreachable_mlflow_uri_with_warn_trains_without_it(tmp_path, caplog):
    run_dir = tmp_path / "run"
    summary = train_run([*SMALL, "logger=[csv,mlflow]", f"logger.mlflow.tracking_uri={CLOSED}",
                         "logger.mlflow.on_unreachable=warn", "logger.mlflow.connect_timeout_s=3"], run_dir)
    assert summary.status == "completed" and summary.updates == 16
    [entry] = summary.loggers_disabled
    assert entry["logger"] == "mlflow" and entry["uri"] == CLOSED and entry["when"] == "start"
    assert "ConnectionRefusedError" in entry["error"]
    assert read_summary(run_dir)["loggers_disabled"] == summary.loggers_disabled
    assert len(read_rows(run_dir)) == 16 and not (run_dir / "loggers.json").exists()
    assert "logger mlflow disabled" in caplog.text


def test_wandb_online_without_its_server_is_refused_or_skipped(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_BASE_URL", CLOSED)
    args = [*SMALL, "logger=[csv,wandb]", "logger.wandb.mode=online", "logger.wandb.connect_timeout_s=2"]
    with pytest.raises(StoreUnreachable, match=re.escape(f"logger.wandb: the store at {CLOSED} is unreachable")):
        train_run(args, tmp_path / "a")
    kept, disabled = check_stores(_specs({"csv": {}, "wandb": {"mode": "online", "on_unreachable": "warn"}}))
    assert list(kept) == ["csv"] and disabled[0]["logger"] == "wandb"


# --- mid-run: a store that hangs, then one that disappears (a real MLflow server) ------------

@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """`mlflow server` on a free local port with its own SQLite store, in its own process
    group (its workers are children); stopped here by that group's id."""
    root = tmp_path_factory.mktemp("mlflow_server")
    port = free_port()
    cmd = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
           "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}", "--default-artifact-root", str(root / "artifacts")]
    log = (root / "server.log").open("w")
    # Tracking only: without its job runner the server starts 2 processes instead of 10 (eight
    # Huey consumers, each importing MLflow, about 25 s of CPU beside the test's runs).
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 150  # a loaded 2-core machine takes 25-35 s to start it
    while probe(uri + "/health", 1) is not None:
        if proc.poll() is not None or time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"mlflow server did not start: {(root / 'server.log').read_text()[-2000:]}")
        time.sleep(0.5)
    server = {"proc": proc, "uri": uri, "db": f"sqlite:///{root / 'mlflow.db'}"}
    yield server
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGCONT)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    log.close()


def _run_and_cut(server, run_dir: Path, cut, timeout_s: int = 2):
    """Launch a run logging to `server`; once MLflow holds some of its rows, call `cut`.
    Returns (the updates metrics.csv held just after the cut, the output, the summary)."""
    args = [*[a for a in SMALL if not a.startswith("ppo.total_timesteps")], "ppo.total_timesteps=65536",
            "logger=[csv,mlflow]", f"logger.mlflow.tracking_uri={server['uri']}",
            f"logger.mlflow.connect_timeout_s={timeout_s}", "logger.mlflow.artifacts=false"]
    proc = start_launch(args, run_dir)
    try:
        deadline = time.monotonic() + 120
        while not ((run_dir / "loggers.json").exists() and (run_dir / "metrics.csv").exists()
                   and len(read_rows(run_dir)) >= 40):
            assert proc.poll() is None and time.monotonic() < deadline, proc.output()[-3000:]
            time.sleep(0.05)
        cut()
        held_at_cut = len(read_rows(run_dir))
        proc.wait(180)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = proc.output()
    assert proc.returncode == 0, out[-3000:]
    return held_at_cut, out, read_summary(run_dir)


def _check_unaffected(run_dir: Path, summary: dict, held_at_cut: int) -> int:
    """Training and the run dir's own files went on: completed, every row once; MLflow was
    disabled at the first chunk it failed, one request after the cut (the host loop waits for
    each logger: a request that hung would have held every later chunk). Returns that update."""
    assert summary["status"] == "completed" and summary["updates"] == 1024
    keys = [(r["update"], r["seed"]) for r in read_rows(run_dir)]
    assert len(keys) == len(set(keys)) == 1024
    [entry] = summary["loggers_disabled"]
    assert entry["logger"] == "mlflow" and entry["when"].startswith("update ")
    disabled_update = int(entry["when"].split()[1])
    # metrics.csv takes a chunk's rows before MLflow does: the chunk MLflow failed on is at most
    # the one after those metrics.csv held at the cut.
    assert disabled_update <= held_at_cut + CHUNK_UPDATES, (disabled_update, held_at_cut)
    return disabled_update


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_store_that_hangs_then_one_that_disappears_mid_run(mlflow_server, tmp_path):
    pgid = mlflow_server["proc"].pid
    # 1. The server stops answering (SIGSTOP: connections are accepted, nothing replies). The
    #    request gives up after connect_timeout_s (2 s), and the run goes on without MLflow.
    held_at_cut, out, summary = _run_and_cut(mlflow_server, tmp_path / "hang", lambda: os.killpg(pgid, signal.SIGSTOP))
    try:
        _check_unaffected(tmp_path / "hang", summary, held_at_cut)
        assert "timed out" in summary["loggers_disabled"][0]["error"].lower()
        assert "logger mlflow disabled at update" in out
    finally:
        os.killpg(pgid, signal.SIGCONT)
    # 2. The server goes away (stopped by its pid): refused at once, disabled, run unaffected.
    held_at_cut, out, summary = _run_and_cut(mlflow_server, tmp_path / "gone", lambda: (
        os.killpg(pgid, signal.SIGTERM), mlflow_server["proc"].wait(60)))
    disabled_update = _check_unaffected(tmp_path / "gone", summary, held_at_cut)
    # What MLflow kept is a prefix of the run: every update before the cut, none twice.
    client = MlflowClient(tracking_uri=mlflow_server["db"])
    runs = client.search_runs([client.get_experiment_by_name("cartpole").experiment_id],
                              filter_string=f"tags.`ppo_lab.run_dir` = '{(tmp_path / 'gone').resolve()}'")
    [seed_run] = [r for r in runs if "ppo_lab.seed" in r.data.tags]
    steps = sorted(m.step for m in client.get_metric_history(seed_run.info.run_id, "timesteps"))
    # (MLflow's rows trail metrics.csv's on a busy machine: how many it holds at the cut is not fixed.)
    assert steps == list(range(1, len(steps) + 1)) and 1 <= len(steps) <= disabled_update


# --- a full disk under the TensorBoard writer ------------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(180)
def test_tensorboard_on_a_full_disk_is_disabled_and_the_run_completes(small_disk, tmp_path, caplog):
    run_dir = tmp_path / "run"  # on the ordinary disk; only TensorBoard writes to the small one
    stop = threading.Event()
    filler = fill_when("tb/seed_0/events.out.tfevents.*", small_disk, 0, stop)
    try:
        summary = train_run([*[a for a in SMALL if not a.startswith("ppo.total_timesteps")], "ppo.total_timesteps=16384",
                             "train.chunk_updates=2", "logger=[csv,tensorboard]",
                             f"logger.tensorboard.subdir={small_disk / 'tb'}"], run_dir)
    finally:
        stop.set()
        filler.join(5)
    assert summary.status == "completed" and summary.updates == 256
    [entry] = summary.loggers_disabled
    assert entry["logger"] == "tensorboard" and "No space left" in entry["error"] and entry["when"].startswith("update ")
    assert len(read_rows(run_dir)) == 256 and read_summary(run_dir)["loggers_disabled"] == [entry]
    assert "logger tensorboard disabled" in caplog.text
