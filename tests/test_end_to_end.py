"""End to end: run dir contract, resume, stopping. In-process through `train` (as launch.py
calls it) where no process matters; through launch.py for kills, signals and device layouts."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
import yaml

from conftest import ROOT, launch, read_rows, read_summary, run_cli, stamp_format, start_launch, tee_into, train_run, wait_for_rows
from ppo_lab.run.manifest import config_hash

pytestmark = pytest.mark.slow

METRICS = [
    "train/entropy", "train/approx_kl", "train/clip_frac", "train/pg_loss", "train/vf_loss",
    "train/explained_variance", "train/mean_episode_return", "train/mean_episode_length",
    "train/num_episodes", "train/learning_rate", "train/ent_coef", "train/clip_eps", "perf/sps",
]


def _keys(rows):
    return [(int(r["update"]), int(r["seed"])) for r in rows]


def _wait_for_rows(run_dir, n, proc, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if (run_dir / "metrics.csv").exists() and len(read_rows(run_dir)) >= n and list((run_dir / "checkpoints").glob("*.json")):
            return
        assert proc.poll() is None, proc.output()
        time.sleep(0.2)
    raise TimeoutError("no rows")


def test_run_directory_contract(tmp_path, tiny, caplog, capsys):
    run_dir = tmp_path / "run"
    caplog.set_level("INFO")
    returned = train_run([*tiny, "num_seeds=2"], run_dir)
    _closing_interval_is_aggregates(run_dir, capsys)
    assert "devices: 1 x cpu" in caplog.text
    assert returned.to_json() == read_summary(run_dir)
    for name in ("config.yaml", "metrics.csv", "summary.json", "checkpoints"):
        assert (run_dir / name).exists(), name
    assert "${" not in (run_dir / "config.yaml").read_text()  # resolved
    rows = read_rows(run_dir)
    assert list(rows[0])[:4] == ["update", "seed", "timesteps", "wall_s"]
    assert set(METRICS) <= set(rows[0])
    assert {"actions/0", "actions/1"} <= set(rows[0])
    updates = 2048 // (4 * 16)
    assert sorted(_keys(rows)) == [(u, s) for u in range(1, updates + 1) for s in (0, 1)]
    s = read_summary(run_dir)
    assert s["status"] == "completed" and s["seeds"] == [0, 1]
    assert s["updates"] == updates and s["timesteps"] == updates * 64
    for key in ("wall_s", "compile_s", "sps", "final", "eval", "resumed_from", "slurm_job_id", "versions"):
        assert key in s
    assert s["resumed_from"] is None and s["slurm_job_id"] is None
    assert {"jax", "flax", "optax"} <= set(s["versions"])
    # Both plays, and the headline as eval.deterministic names it (greedy by default).
    assert set(s["eval"]) == {f"episode_{m}{play}" for m in ("return", "length") for play in ("", "_sampled", "_greedy")}
    assert all(len(values) == 2 for values in s["eval"].values())
    assert s["eval"]["episode_return"] == s["eval"]["episode_return_greedy"]
    assert len(s["final"]["train/entropy"]) == 2
    manifest = json.loads((run_dir / "manifest.json").read_text())  # the reproducibility record
    assert manifest["config_hash"] == config_hash(yaml.safe_load((run_dir / "config.yaml").read_text()))
    assert manifest["layout"] == s["layout"] and manifest["process_count"] == 1
    assert manifest["devices"]["kinds"] == {"cpu": 1} and manifest["packages"]["jax"] == s["versions"]["jax"]


def _closing_interval_is_aggregates(run_dir, capsys):
    """The closing summary's interval for the seeds' evaluation is `ppo-lab aggregate`'s (one
    method: docs/statistics.md), said in the same digits."""
    from ppo_lab.judging.closing import _spec

    closing = capsys.readouterr().out
    assert run_cli(["aggregate", run_dir, "--out", run_dir.parent / "agg", "--no-plot"], capsys).returncode == 0
    with (run_dir.parent / "agg" / "aggregate.csv").open(newline="") as f:
        row = next(r for r in csv.DictReader(f) if r["metric"] == "eval/episode_return")
    mean, low, high = (float(row[k]) for k in ("mean", "ci_low", "ci_high"))
    spec = _spec(mean, low, high)
    line = next(line for line in closing.splitlines() if line.strip().startswith("episode_return"))
    # CartPole declares its return's bounds [0, 500]: Anderson's interval, named; 2 seeds marked
    assert line.endswith(f"{format(mean, spec)} [{format(low, spec)}, {format(high, spec)}] (Anderson, in [0, 500])"), (line, row)
    assert row["ci_method"] == "anderson" and row["small_sample"] == "True"
    assert "WARNING n=2 < 5: too few seeds to tell settings apart (wide intervals; docs/statistics.md)" in closing


def _comparable(rows):
    drop = {"wall_s", "perf/sps"}
    return [{k: v for k, v in r.items() if k not in drop} for r in rows]


def test_kill_then_rerun_resumes_to_identical_rows(tmp_path, tiny, caplog):
    # 1024 updates: enough that the kill lands mid-run (a pipelined tiny run finished 128
    # updates between two polls).
    # Every row trips a health check: summary.json's `health` must count the rows of both launches.
    args = [*tiny, "ppo.total_timesteps=65536", "train.chunk_updates=4", "checkpoint.every_min=0.0001",
            "health.clip_frac_max=-1"]
    reference = tmp_path / "reference"
    train_run(args, reference)

    run_dir = tmp_path / "interrupted"
    proc = start_launch(args, run_dir)
    _wait_for_rows(run_dir, 8, proc)
    proc.kill()  # a crash: no clean shutdown at all
    proc.wait(timeout=30)
    assert read_summary(run_dir)["status"] == "running"
    # The crash left its lock behind; its newest checkpoint when it died (maybe written just
    # before the kill: atomic writes are durable once they return) is where it resumes from.
    assert json.loads((run_dir / "run.lock").read_text())["pid"] == proc.pid
    last_checkpoint = max(int(p.stem.split("_")[1]) for p in (run_dir / "checkpoints").glob("ckpt_*.json"))

    caplog.set_level("INFO")
    train_run(args, run_dir)
    assert "RESUMING from this run's checkpoint" in caplog.text
    assert f"taking over the lock of {run_dir}: its process {proc.pid} on this host is gone" in caplog.text
    assert not (run_dir / "run.lock").exists(), "released at the end"
    rows, ref_rows = read_rows(run_dir), read_rows(reference)
    counts = Counter(_keys(rows))
    assert max(counts.values()) == 1, "duplicate (update, seed) rows"
    assert sorted(counts) == sorted(_keys(ref_rows))
    s = read_summary(run_dir)
    assert s["status"] == "completed" and s["updates"] == read_summary(reference)["updates"] == 1024
    assert s["resumed_from"] == last_checkpoint and 0 < s["resumed_from"] < 1024
    # Same state, same keys: the resumed run continues bit for bit.
    assert _comparable(rows) == _comparable(ref_rows)
    assert s["eval"] == read_summary(reference)["eval"]
    assert s["health"] == read_summary(reference)["health"] == {
        "clip_frac high": {"seeds": [0], "first_update": 1, "last_update": 1024, "rows": 1024}}


def test_two_launches_into_one_run_dir_one_trains_the_other_exits_2(tmp_path, tiny):
    """The same run launched twice a second apart (a requeue racing a manual relaunch): the
    first to the run dir's lock trains and completes, the other exits 2 at once naming it."""
    args = ["experiment=cartpole", *tiny, "train.chunk_updates=4"]
    run_dir = tmp_path / "run"
    logs = [tmp_path / "first.out", tmp_path / "second.out"]
    procs = []
    for i, log in enumerate(logs):
        if i:
            time.sleep(1)
        with log.open("w") as out:  # a file, not a pipe: the winner's output must never block it
            procs.append(subprocess.Popen([sys.executable, "launch.py", *args, f"hydra.run.dir={run_dir}"], cwd=ROOT,
                                          stdout=out, stderr=subprocess.STDOUT, text=True))
    codes = [p.wait(timeout=600) for p in procs]
    outputs = [log.read_text() for log in logs]
    assert sorted(codes) == [0, 2], (codes, outputs)
    refused = codes.index(2)
    assert re.search(r"error: the run directory .* is in use by another run \(host \S+, pid \d+, since ", outputs[refused])
    assert "compiled" not in outputs[refused], "refused before compiling"
    assert read_summary(run_dir)["status"] == "completed"
    counts = Counter(_keys(read_rows(run_dir)))
    assert max(counts.values()) == 1 and len(counts) == 2048 // 64, "duplicate (update, seed) rows"
    assert not (run_dir / "run.lock").exists()


def test_launch_into_a_run_dir_locked_from_another_host_changes_nothing(tmp_path, tiny):
    # A live holder on another host of a shared file system (its heartbeat is fresh): refused,
    # and the run dir's files are left as they were.
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    now = time.time()
    (run_dir / "run.lock").write_text(json.dumps({"host": "node-b", "pid": 77, "started": now - 60, "heartbeat": now,
                                                  "slurm_job_id": "1234", "token": "t"}))
    (run_dir / "config.yaml").write_text("theirs: 1\n")
    (run_dir / "metrics.csv").write_text("update,seed,timesteps,wall_s\n1,0,64,0.1\n")
    stamp_format(run_dir)  # a run dir of this lab's format: the lock, not the format, is what refuses it
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    proc = launch(tiny, run_dir, check=False, timeout=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "in use by another run (host node-b, pid 77, SLURM job 1234, since" in proc.stderr
    assert {name: (run_dir / name).read_bytes() for name in before} == before


def test_sigterm_stops_cleanly_and_a_rerun_finishes(tmp_path, tiny, caplog):
    args = [*tiny, "ppo.total_timesteps=200000", "train.chunk_updates=4"]
    run_dir = tmp_path / "run"
    proc = start_launch(args, run_dir)
    deadline = time.time() + 120
    while not ((run_dir / "metrics.csv").exists() and len(read_rows(run_dir)) >= 4):
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
    assert proc.returncode == 130, proc.output()[-3000:]  # stopped, not completed: a script can tell
    s = read_summary(run_dir)
    assert s["status"] == "stopped" and "SIGTERM" in s["stop_reason"]
    assert s["eval"]["episode_return"], "a stopped run is still evaluated"
    tail = proc.output().splitlines()[-15:]  # the closing summary says how to go on
    assert f"resume (continues from the last checkpoint): ppo-lab resume {run_dir}" in tail, tail
    stopped_at = s["updates"]
    assert stopped_at < 3125 and len(read_rows(run_dir)) == stopped_at

    # As if an older version that did not log `train/clip_eps` wrote it: the rerun widens the
    # header (the earlier rows blank there) rather than silently dropping the new values.
    rows = read_rows(run_dir)
    with (run_dir / "metrics.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[c for c in rows[0] if c != "train/clip_eps"], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)

    # Finishing it: re-run with a smaller budget that is still ahead of where it stopped (a
    # change of the LR schedule, so it must be allowed explicitly).
    total = (stopped_at + 4) * 64
    caplog.set_level("WARNING")
    train_run([*tiny, f"ppo.total_timesteps={total}", "train.chunk_updates=4", "allow_config_change=true"], run_dir)
    s = read_summary(run_dir)
    assert s["status"] == "completed" and s["resumed_from"] == stopped_at and s["updates"] == stopped_at + 4
    rows = read_rows(run_dir)
    assert sorted(Counter(_keys(rows))) == [(u, 0) for u in range(1, stopped_at + 5)]
    assert "new metric(s) train/clip_eps" in caplog.text
    assert [r["train/clip_eps"] != "" for r in rows] == [False] * stopped_at + [True] * 4


def test_stop_file_stops_cleanly(tmp_path, tiny):
    run_dir = tmp_path / "run"
    proc = start_launch([*tiny, "ppo.total_timesteps=200000", "train.chunk_updates=4"], run_dir)
    wait_for_rows(proc, run_dir)
    (run_dir / "STOP").touch()
    proc.wait(timeout=120)
    assert proc.returncode == 130, proc.output()[-3000:]
    s = read_summary(run_dir)
    assert s["status"] == "stopped" and s["stop_reason"] == "STOP file"
    assert list((run_dir / "checkpoints").glob("ckpt_*.json"))


def test_ctrl_c_stops_with_130_and_a_second_one_at_once_without_a_traceback(tmp_path, tiny):
    run_dir = tmp_path / "run"
    proc = start_launch([*tiny, "ppo.total_timesteps=200000", "train.chunk_updates=4"], run_dir)
    wait_for_rows(proc, run_dir)
    deadline = time.time() + 120
    proc.send_signal(signal.SIGINT)  # a clean stop after this chunk: checkpoint, evaluation, summary
    while "SIGINT received" not in proc.output():
        assert time.time() < deadline and proc.poll() is None, proc.output()[-3000:]
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)  # at once: in the chunk, the evaluation or the summary
    proc.wait(timeout=60)
    out = proc.output()
    assert proc.returncode == 130, out[-3000:]
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out[-3000:]
    assert f"ppo-lab resume {run_dir}" in out, out[-3000:]  # said at once, or by the closing summary it reached
    s = read_summary(run_dir)
    assert s["status"] == "stopped" and "SIGINT" in s["stop_reason"]
    assert list((run_dir / "checkpoints").glob("ckpt_*.json"))


def test_ctrl_c_on_a_run_piped_into_tee_stops_it(tmp_path, tiny, capsys):
    """`python launch.py ... | tee log`, then Ctrl+C: the terminal signals the whole pipeline,
    so tee ends at once and the run, stopping cleanly, finds its stdout gone. It ends stopped
    (exit 130), its closing summary in launch.log, nothing on the terminal's stderr."""
    run_dir = tmp_path / "run"
    terminal = (tmp_path / "stderr").open("w+")  # where the terminal shows the run's stderr
    cmd = [sys.executable, "launch.py", *tiny, "ppo.total_timesteps=200000", "train.chunk_updates=4", f"hydra.run.dir={run_dir}"]
    run = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=terminal, process_group=0)
    tee = tee_into(tmp_path / "log", run)
    try:
        # Ctrl+C once the first chunk's progress line has come through tee (a user sees it; on a
        # busy machine the rows may be written before tee has read the line).
        log = tmp_path / "log"
        while not ((run_dir / "metrics.csv").exists() and read_rows(run_dir)
                   and log.exists() and "update 4/3125" in log.read_text()):
            assert run.poll() is None, (tmp_path / "stderr").read_text()[-3000:]
            time.sleep(0.1)
        os.killpg(run.pid, signal.SIGINT)  # Ctrl+C: the terminal's foreground process group
        assert tee.wait(timeout=60) == -signal.SIGINT
        assert run.wait(timeout=120) == 130, (tmp_path / "stderr").read_text()[-3000:]
    finally:
        for proc in (run, tee):
            if proc.poll() is None:
                proc.kill()
    s = read_summary(run_dir)
    assert s["status"] == "stopped" and s["stop_reason"] == "signal SIGINT" and s["eval"]["episode_return"]
    assert (tmp_path / "stderr").read_text() == ""  # no BrokenPipeError, no logging error per line
    launch_log = (run_dir / "launch.log").read_text()
    assert "stdout is closed" in launch_log and "== stopped: signal SIGINT ==" in launch_log
    # The tools read it as what it is: stopped, resumable.
    assert "stopped" in run_cli(["watch", str(run_dir), "--once"], capsys).stdout
    run_cli(["aggregate", str(tmp_path)], capsys)
    [row] = list(csv.DictReader((tmp_path / "runs.csv").open()))
    assert row["status"] == "stopped"


def test_resume_from_another_run_dir(tmp_path, tiny, caplog):
    first = tmp_path / "first"
    train_run([*tiny, "ppo.total_timesteps=1024"], first)
    second = tmp_path / "second"
    caplog.set_level("INFO")
    train_run([*tiny, "ppo.total_timesteps=2048", f"resume={first}", "allow_config_change=true"], second)
    assert "RESUMING from" in caplog.text
    s = read_summary(second)
    assert s["resumed_from"] == 16 and s["updates"] == 32
    assert sorted(_keys(read_rows(second))) == [(u, 0) for u in range(1, 33)]


def test_early_stopping_on_target_return(tmp_path, tiny):
    run_dir = tmp_path / "run"
    train_run([*tiny, "ppo.total_timesteps=100000", "train.chunk_updates=2", "train.target_return=5", "train.patience=1", "train.return_window=2"], run_dir)
    s = read_summary(run_dir)
    assert s["status"] == "completed" and "target_return" in s["stop_reason"]
    assert s["updates"] < 100000 // 64
    # The loop dispatches the next chunk before it checks a stop condition; a stop drops that
    # chunk: rows, summary and the last checkpoint all end at the same update.
    from ppo_lab.rundir import latest_checkpoint, read_json

    assert max(int(row["update"]) for row in read_rows(run_dir)) == s["updates"]
    assert read_json(latest_checkpoint(run_dir / "checkpoints"))["update"] == s["updates"]


def test_timed_mode_stops_by_wall_time(tmp_path, tiny):
    run_dir = tmp_path / "run"
    train_run([*tiny, "ppo.total_timesteps=10000000", "train.chunk_updates=2", "train.duration_min=0.05"], run_dir)
    s = read_summary(run_dir)
    assert s["status"] == "timed_out" and "duration_min" in s["stop_reason"] and s["updates"] < 10000000 // 64
    assert s["eval"]["episode_return"]  # evaluated like any other ending


def test_deterministic_evaluation_repeats_bit_for_bit(tmp_path, tiny):
    run_dir = tmp_path / "run"
    train_run(tiny, run_dir)
    # Evaluated again in a fresh process, from the checkpoint: the same numbers as the run's own.
    proc = subprocess.run([sys.executable, "-m", "ppo_lab.cli", "evaluate", str(run_dir)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["eval"] == read_summary(run_dir)["eval"]
    # --sampled names the other play as the headline; the plays themselves are the same numbers.
    proc = subprocess.run([sys.executable, "-m", "ppo_lab.cli", "evaluate", str(run_dir), "--sampled"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    sampled, recorded = json.loads(proc.stdout)["eval"], read_summary(run_dir)["eval"]
    assert sampled["episode_return"] == recorded["episode_return_sampled"]
    plays = lambda evaluation: {k: v for k, v in evaluation.items() if k.endswith(("_sampled", "_greedy"))}  # noqa: E731
    assert plays(sampled) == plays(recorded) and len(plays(recorded)) == 4
