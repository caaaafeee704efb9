"""One run across the tasks of a SLURM job step (docs/multihost.md) on the real
single-node cluster of slurm_up.sh: `srun` by hand, and `hydra/launcher=slurm` with two tasks.
Every process is detected from SLURM's variables (no hardware.* keys on the command line)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

from conftest import ROOT, TINY, read_rows, read_summary
from slurm_helpers import cluster, run, wait_until  # noqa: F401 - cluster: the skip-unless-ready fixture

pytestmark = pytest.mark.cluster


def assert_one_run_of_two_processes(run_dir, updates: int = 32) -> None:
    counts = Counter((int(r["update"]), int(r["seed"])) for r in read_rows(run_dir))
    assert set(counts) == {(u, s) for u in range(1, updates + 1) for s in (0, 1)} and set(counts.values()) == {1}
    summary = read_summary(run_dir)
    assert summary["status"] == "completed" and summary["devices"] == ["cpu:0", "cpu:2048"]


@pytest.mark.timeout(300)
def test_srun_of_two_tasks_is_one_run(cluster, tmp_path):
    run_dir = tmp_path / "run"
    cmd = ["srun", "--ntasks=2", "--cpus-per-task=1", "--time=5", sys.executable, "launch.py", *TINY, "num_seeds=2",
           f"hydra.run.dir={run_dir}"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "(SLURM)" in proc.stdout + proc.stderr  # "joining 2 processes (SLURM) at <node>:<port>"
    assert_one_run_of_two_processes(run_dir)


@pytest.mark.timeout(300)
def test_slurm_launcher_runs_each_sweep_point_as_one_job_of_two_tasks(cluster, tmp_path):
    sweep = tmp_path / "sweep"
    cmd = [sys.executable, "launch.py", "-m", "hydra/launcher=slurm", "hydra.launcher.cpus_per_task=1",
           "hydra.launcher.tasks_per_node=2", "hydra.launcher.nodes=1", "hydra.launcher.poll_s=0.5", *TINY,
           "num_seeds=2", "seed=0", "hydra.callbacks.sweep.aggregate=false", f"hydra.sweep.dir={sweep}"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert_one_run_of_two_processes(sweep / "0")


@pytest.mark.timeout(420)
def test_a_requeued_job_of_two_tasks_stops_together_and_resumes_exactly(cluster, tmp_path):
    """`scontrol requeue`: SIGTERM to both tasks -> they agree on the chunk, one checkpoint, both
    exit for requeue -> the requeued job's two tasks resume from it and complete, no duplicate rows."""
    sweep, total = tmp_path / "sweep", 800  # the requeue lands at ~100-200 updates
    cmd = [sys.executable, "launch.py", "-m", "hydra/launcher=slurm", "hydra.launcher.cpus_per_task=1",
           "hydra.launcher.tasks_per_node=2", "hydra.launcher.poll_s=0.5", *TINY, "num_seeds=2", "seed=0",
           f"ppo.total_timesteps={total * 64}", "train.chunk_updates=16", "checkpoint.every_min=0.0001",
           "hydra.callbacks.sweep.aggregate=false", f"hydra.sweep.dir={sweep}"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    run_dir, job_id = sweep / "0", None
    try:
        wait_until(lambda: (sweep / "jobs.json").exists(), 60, "jobs.json")
        job_id = next(iter(json.loads((sweep / "jobs.json").read_text())["jobs"].values()))["job_id"]
        wait_until(lambda: (run_dir / "metrics.csv").exists() and len(read_rows(run_dir)) >= 200, 180, "200 rows")
        assert run("scontrol", "requeue", job_id).returncode == 0
        wait_until(lambda: read_summary(run_dir)["status"] == "stopped", 60, "both tasks to stop")
        stopped = read_summary(run_dir)
        wait_until(lambda: run("squeue", "-h", "-j", job_id, "-o", "%T").stdout.strip() == "PENDING", 60, "requeued job pending")
        run("scontrol", "update", f"JobId={job_id}", "StartTime=now")
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
            if job_id:
                run("scancel", job_id)
    assert proc.returncode == 0, out[-4000:]
    summary = read_summary(run_dir)
    assert summary["status"] == "completed" and 0 < summary["resumed_from"] == stopped["updates"] < total
    keys = Counter((int(r["update"]), int(r["seed"])) for r in read_rows(run_dir))
    assert max(keys.values()) == 1 and len(keys) == total * 2
