"""Sweeps through `hydra/launcher=slurm` on the real single-node cluster of slurm_up.sh.

    bash tests/cluster/slurm_up.sh && python -m pytest -m cluster tests/cluster; bash tests/cluster/slurm_down.sh

Each test runs `python launch.py -m hydra/launcher=slurm ...` as a user would and checks SLURM's
own accounting (sacct), the run dirs and the aggregate. Timings are printed (pytest -s shows them).
Without a cluster these tests skip and say why.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import ROOT, TINY, read_rows, read_summary
from slurm_helpers import cluster, run, wait_until  # noqa: F401 - cluster: the skip-unless-ready fixture

pytestmark = pytest.mark.cluster

# Two jobs share this 2-core node at a time.
SLURM = ["hydra/launcher=slurm", "hydra.launcher.cpus_per_task=1", "hydra.launcher.poll_s=0.5"]
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


def sacct(job_id: str, all_attempts: bool = False) -> list[dict]:
    args = ["sacct", "-n", "-X", "-P", "-o", "JobID,State,Submit,Start,End,Elapsed", "-j", job_id]
    if all_attempts:
        args.insert(1, "-D")
    out = run(*args)
    keys = ["JobID", "State", "Submit", "Start", "End", "Elapsed"]
    return [dict(zip(keys, line.split("|"))) for line in out.stdout.splitlines() if line.strip()]


def launch_cmd(args: list[str], sweep_dir: Path) -> list[str]:
    return [sys.executable, "launch.py", "-m", *SLURM, *TINY, *args, f"hydra.sweep.dir={sweep_dir}"]


def jobs_of(sweep_dir: Path) -> dict:
    return json.loads((sweep_dir / "jobs.json").read_text())["jobs"]


def aggregate_rows(sweep_dir: Path) -> list[dict]:
    with (sweep_dir / "aggregate.csv").open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.timeout(300)
def test_three_seed_sweep_completes_in_sacct_and_aggregates(cluster, tmp_path):
    sweep = tmp_path / "sweep"
    t0 = time.monotonic()
    proc = subprocess.run(launch_cmd(["seed=0,1,2"], sweep), cwd=ROOT, capture_output=True, text=True, timeout=280)
    wall = time.monotonic() - t0
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs = jobs_of(sweep)
    assert len(jobs) == 3
    for job in jobs.values():
        wait_until(lambda: (rows := sacct(job["job_id"])) and rows[-1]["State"] == "COMPLETED", 30, f"sacct: {job['job_id']} COMPLETED")
        assert job["state"] == "COMPLETED" and job["outcome"] == "completed"
        s = read_summary(sweep / str(job["num"]))
        assert s["status"] == "completed" and s["slurm_job_id"] == job["job_id"]
    rows = aggregate_rows(sweep)
    ret = next(r for r in rows if r["metric"] == "eval/episode_return")
    assert int(ret["n_seeds"]) == 3
    table = proc.stdout[proc.stdout.index("aggregate of"):]
    # The launcher's round trip, job by job: what SLURM saw (submit, start, end) against the wall.
    acct = {j["job_id"]: sacct(j["job_id"])[-1] for j in jobs.values()}
    print(f"\n3-seed sweep through hydra/launcher=slurm: {wall:.1f} s wall; jobs "
          + ", ".join(f"{i} (submit {a['Submit']}, start {a['Start']}, end {a['End']}, elapsed {a['Elapsed']})" for i, a in acct.items())
          + "\n" + table)

    # Relaunching the same sweep skips the completed runs (each job starts and returns at once).
    t0 = time.monotonic()
    again = subprocess.run(launch_cmd(["seed=0,1,2"], sweep), cwd=ROOT, capture_output=True, text=True, timeout=200)
    assert again.returncode == 0, again.stderr[-3000:]
    for num in range(3):
        log = (sweep / str(num) / "launch.log").read_text()
        assert "SKIPPING" in log
        assert read_summary(sweep / str(num))["resumed_from"] is None  # not trained again
    print(f"relaunch of the completed sweep (3 skipped jobs): {time.monotonic() - t0:.1f} s")


@pytest.mark.timeout(400)
def test_a_vectorized_grid_is_one_slurm_job_per_group(cluster, tmp_path):
    """hydra.launcher.vectorize=true: 3 learning rates x 2 seeds under a cap of 4 replicas are
    2 SLURM jobs, one training 2 cells as one program; every cell has its own run dir."""
    sweep = tmp_path / "sweep"
    args = ["num_seeds=2", "ppo.lr=1e-3,3e-4,1e-4", "hydra.launcher.vectorize=true", "hydra.launcher.max_replicas=4"]
    proc = subprocess.run(launch_cmd(args, sweep), cwd=ROOT, capture_output=True, text=True, timeout=380)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs = jobs_of(sweep)
    ids = [jobs[str(n)]["job_id"] for n in range(3)]
    assert ids[0] == ids[1] != ids[2]
    for num, job in ((int(n), j) for n, j in jobs.items()):
        wait_until(lambda: (rows := sacct(job["job_id"])) and rows[-1]["State"] == "COMPLETED", 30, f"sacct: {job['job_id']} COMPLETED")
        assert job["outcome"] == "completed"
        s = read_summary(sweep / str(num))
        assert s["status"] == "completed" and s["slurm_job_id"] == job["job_id"]
    assert read_summary(sweep / "0")["vmap_group"]["cells"] == 2


@pytest.mark.timeout(400)
def test_requeued_job_resumes_and_finishes_without_duplicate_rows(cluster, tmp_path):
    """`scontrol requeue` mid-training: SIGTERM -> the runner checkpoints and exits without a
    result -> SLURM requeues -> the same Hydra job starts in its own run dir, resumes from the
    checkpoint and completes; the launcher waits through it all."""
    sweep = tmp_path / "sweep"
    total_updates = 1600  # 4 envs x 16 steps each; the requeue lands at ~200-400 of them
    args = ["seed=0", f"ppo.total_timesteps={total_updates * 64}", "train.chunk_updates=16", "checkpoint.every_min=0.0001"]
    t0 = time.monotonic()
    stamp = lambda: f"{time.monotonic() - t0:6.1f}s"  # noqa: E731
    timeline = []
    proc = subprocess.Popen(launch_cmd(args, sweep), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        run_dir = sweep / "0"
        wait_until(lambda: (sweep / "jobs.json").exists(), 60, "jobs.json")
        job_id = next(iter(jobs_of(sweep).values()))["job_id"]
        timeline.append(f"{stamp()} submitted job {job_id}")
        wait_until(lambda: (run_dir / "metrics.csv").exists() and list((run_dir / "checkpoints").glob("ckpt_*.json")), 180, "first chunk")
        timeline.append(f"{stamp()} training (first checkpoint written)")
        wait_until(lambda: len(read_rows(run_dir)) >= 200, 120, "200 metric rows")
        rows_before = len(read_rows(run_dir))
        assert rows_before < total_updates, "training finished before the requeue: make it longer"
        holder = json.loads((run_dir / "run.lock").read_text())  # the job's lock, with its SLURM job id
        assert holder["slurm_job_id"] and holder["host"]
        assert run("scontrol", "requeue", job_id).returncode == 0
        timeline.append(f"{stamp()} scontrol requeue {job_id} at ~{rows_before} rows")
        wait_until(lambda: read_summary(run_dir)["status"] == "stopped", 60, "the first attempt to stop")
        stopped = read_summary(run_dir)
        timeline.append(f"{stamp()} first attempt stopped at update {stopped['updates']} ({stopped['stop_reason']})")
        assert not (run_dir / "run.lock").exists(), "a clean stop releases the lock"
        # As if the first attempt had died on another node without releasing it (a node lost,
        # SIGKILL after KillWait): the requeued job takes over its own job's lock at once.
        (run_dir / "run.lock").write_text(json.dumps({**holder, "host": "lost-node", "pid": 1, "heartbeat": time.time()}))
        # SLURM holds a requeued job for ~120 s (BeginTime); release it now to keep the test short.
        wait_until(lambda: run("squeue", "-h", "-j", job_id, "-o", "%T").stdout.strip() == "PENDING", 60, "requeued job pending")
        run("scontrol", "update", f"JobId={job_id}", "StartTime=now")
        wait_until(lambda: run("squeue", "-h", "-j", job_id, "-o", "%T").stdout.strip() == "RUNNING", 60, "requeued job running")
        timeline.append(f"{stamp()} requeued job running again")
        out, _ = proc.communicate(timeout=300)
        timeline.append(f"{stamp()} launcher returned (rc {proc.returncode})")
    finally:
        if proc.poll() is None:
            proc.kill()
            run("scancel", *[j["job_id"] for j in jobs_of(sweep).values()]) if (sweep / "jobs.json").exists() else None
    assert proc.returncode == 0, out[-4000:]
    s = read_summary(run_dir)
    assert s["status"] == "completed" and s["updates"] == total_updates
    assert 0 < s["resumed_from"] == stopped["updates"] < total_updates
    keys = Counter((int(r["update"]), int(r["seed"])) for r in read_rows(run_dir))
    assert max(keys.values()) == 1, "duplicate (update, seed) rows"
    assert sorted(keys) == [(u, 0) for u in range(1, total_updates + 1)]
    attempts = sacct(job_id, all_attempts=True)
    assert [a["State"] for a in attempts][-1] == "COMPLETED" and any(a["State"] == "REQUEUED" for a in attempts), attempts
    log_text = (run_dir / "launch.log").read_text()
    assert "RESUMING from this run's checkpoint" in log_text
    assert f"it was taken by this SLURM job ({holder['slurm_job_id']}) before it was requeued" in log_text
    assert not (run_dir / "run.lock").exists()
    assert int(next(r for r in aggregate_rows(sweep) if r["metric"] == "eval/episode_return")["n_seeds"]) == 1
    print("\nrequeue timeline:\n  " + "\n  ".join(timeline) + "\n  sacct -D: " + "; ".join(f"{a['State']} {a['Start']}..{a['End']}" for a in attempts))


@pytest.mark.timeout(300)
def test_cancelled_job_is_failed_in_the_aggregate_and_the_launcher_returns(cluster, tmp_path):
    sweep = tmp_path / "sweep"
    args = ["seed=0,1", "ppo.total_timesteps=51200", "train.chunk_updates=16"]  # job 1 is cancelled at its first chunk of 50
    t0 = time.monotonic()
    proc = subprocess.Popen(launch_cmd(args, sweep), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until(lambda: (sweep / "jobs.json").exists(), 60, "jobs.json")
        victim = jobs_of(sweep)["1"]["job_id"]
        wait_until(lambda: (sweep / "1" / "metrics.csv").exists(), 180, "job 1 training")
        assert run("scancel", victim).returncode == 0
        t_cancel = time.monotonic()
        out, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            run("scancel", *[j["job_id"] for j in jobs_of(sweep).values()])
    returned_s = time.monotonic() - t_cancel
    assert proc.returncode == 1, out[-3000:]  # a failed job makes the multirun fail...
    assert sacct(victim)[-1]["State"].startswith("CANCELLED")
    units = {int(r["seed"]): r for r in csv.DictReader((sweep / "runs.csv").open())}  # ...but it is aggregated
    assert units[1]["status"] == "failed" and units[1]["used"] == "False" and "CANCELLED" in units[1]["reason"]
    assert units[0]["status"] == "completed" and units[0]["used"] == "True"
    assert int(next(r for r in aggregate_rows(sweep) if r["metric"] == "eval/episode_return")["n_seeds"]) == 1
    assert f"FAILED    cartpole seed=1 (job 1: {sweep.resolve() / '1'})" in out
    print(f"\ncancelled job {victim}: launcher returned {returned_s:.1f} s after scancel (total {time.monotonic() - t0:.1f} s)")


@pytest.mark.timeout(300)
def test_submit_and_return_then_aggregate_later_from_any_shell(cluster, tmp_path):
    sweep = tmp_path / "sweep"
    t0 = time.monotonic()
    proc = subprocess.run(launch_cmd(["seed=0,1", "hydra.launcher.wait=false"], sweep), cwd=ROOT, capture_output=True, text=True, timeout=120)
    returned_s = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "not waiting" in proc.stdout and "ppo-lab aggregate" in proc.stdout
    assert not (sweep / "aggregate.csv").exists()
    jobs = jobs_of(sweep)
    assert all(not sacct(j["job_id"]) or sacct(j["job_id"])[-1]["State"] not in FINAL for j in jobs.values()), "returned before the jobs ran"
    # Later, from another shell (another cwd): wait for the jobs, then aggregate.
    agg = subprocess.run([sys.executable, "-m", "ppo_lab.cli", "aggregate", str(sweep), "--wait"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=240)
    assert agg.returncode == 0, agg.stderr[-3000:]
    assert all(sacct(j["job_id"])[-1]["State"] == "COMPLETED" for j in jobs.values())
    assert int(next(r for r in aggregate_rows(sweep) if r["metric"] == "eval/episode_return")["n_seeds"]) == 2
    print(f"\nsubmit-only launch returned in {returned_s:.1f} s; aggregate --wait finished {time.monotonic() - t0:.1f} s after launch")


@pytest.mark.timeout(400)
def test_optuna_study_through_slurm_records_trials_and_a_failed_job(cluster, tmp_path):
    """hydra/sweeper=optuna with hydra/launcher=slurm: every trial is a SLURM job, its objective
    read from its run dir; a job that fails (an invalid gamma) is a FAILED trial, not a crash."""
    import optuna
    from omegaconf import OmegaConf

    sweep = tmp_path / "study"
    args = ["hydra/sweeper=optuna", "hydra.sweeper.study_name=slurm", "hydra.sweeper.n_trials=2", "hydra.sweeper.n_jobs=2",
            "hydra.sweeper.sampler._target_=optuna.samplers.BruteForceSampler", "ppo.gamma=choice(0.99,1.5)"]
    proc = subprocess.run(launch_cmd(args, sweep), cwd=ROOT, capture_output=True, text=True, timeout=380)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    study = optuna.load_study(study_name="slurm", storage=f"sqlite:///{sweep / 'optuna.db'}")
    by_gamma = {t.params["ppo.gamma"]: t for t in study.trials}
    assert by_gamma[1.5].state.name == "FAIL"
    good = by_gamma[0.99]
    assert good.state.name == "COMPLETE"
    summary = read_summary(Path(good.user_attrs["run_dir"]))
    assert summary["slurm_job_id"] and good.value == pytest.approx(summary["eval"]["episode_return"][0])
    results = OmegaConf.load(sweep / "optimization_results.yaml")
    assert results.best_params == {"ppo.gamma": 0.99} and results.trials.failed == 1


@pytest.mark.timeout(400)
def test_populations_are_one_slurm_job_each_and_aggregate_across_populations(cluster, tmp_path):
    """docs/pbt.md: one SLURM job per population; several populations are a sweep over `seed`
    (spaced by the population size). PBT and random search, two populations each: four jobs,
    each a run of two members with its pbt.jsonl, and the sweep's populations.json."""
    sweep = tmp_path / "sweep"
    args = ["pbt.population=2", "pbt.interval_updates=4", "pbt.exploit=true,false", "seed=0,2"]
    proc = subprocess.run(launch_cmd(args, sweep), cwd=ROOT, capture_output=True, text=True, timeout=380)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs = jobs_of(sweep)
    assert len(jobs) == 4 and len({j["job_id"] for j in jobs.values()}) == 4
    for num, job in ((int(n), j) for n, j in jobs.items()):
        wait_until(lambda: (rows := sacct(job["job_id"])) and rows[-1]["State"] == "COMPLETED", 30, f"sacct: {job['job_id']} COMPLETED")
        s = read_summary(sweep / str(num))
        assert s["status"] == "completed" and s["slurm_job_id"] == job["job_id"]
        assert s["pbt"]["population"] == 2 and s["pbt"]["steps"] == 7 and len(s["seeds"]) == 2
        assert len((sweep / str(num) / "pbt.jsonl").read_text().splitlines()) == 7
    report = json.loads((sweep / "populations.json").read_text())
    assert sorted(len(g["populations"]) for g in report["groups"].values()) == [2, 2]
    assert len(report["improvement"]) == 1
