"""ppo_lab.analysis.aggregate on sweep dirs written by hand (the run dir contract), no training.

`make_sweep` writes what Hydra + the runner write (multirun.yaml, <n>/.hydra/overrides.yaml,
<n>/summary.json, <n>/metrics.csv, optionally jobs.json); test_notebooks.py reuses it.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import run_cli, stamp_format
from ppo_lab.analysis.aggregate import run_aggregate
from ppo_lab.analysis.sweep import collect
from ppo_lab.estimators import SUMMARY_KEYS, mean_summary

CONTRACT_TAIL = ["metric", *SUMMARY_KEYS]


def value(group_index: int, seed: int, metric: str) -> float:
    """A deterministic made-up value per (group, seed, metric)."""
    return 10.0 * (group_index + 1) + seed * 0.5 + (len(metric) % 7) * 0.1


def make_run(run_dir: Path, overrides: list[str], seeds: list[int], status: str = "completed",
             eval_metrics=("episode_return", "episode_length"), group_index: int = 0, updates: int = 4) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / ".hydra").mkdir(exist_ok=True)
    (run_dir / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    final_names = ["train/mean_episode_return", "train/entropy"]
    summary = {
        "status": status, "stop_reason": None if status == "completed" else "signal SIGTERM",
        "experiment": "toy", "seeds": seeds, "updates": updates,
        "final": {m: [value(group_index, s, m) for s in seeds] for m in final_names} if status != "running" else {},
        "eval": {m: [value(group_index, s, "eval/" + m) for s in seeds] for m in eval_metrics} if status in ("completed", "stopped", "timed_out") else {},
        "error": "RuntimeError: boom" if status == "failed" else None,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary))
    with (run_dir / "metrics.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["update", "seed", "timesteps", "wall_s", "train/mean_episode_return", "train/entropy"])
        for u in range(1, updates + 1):
            for s in seeds:
                w.writerow([u, s, u * 64, u * 0.1, value(group_index, s, "r") * u / updates, 0.6])
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"experiment": "toy", "seed": seeds[0], "num_seeds": len(seeds)}))
    stamp_format(run_dir)


def make_sweep(sweep_dir: Path, jobs: list[list[str]], task_overrides: list[str] | None = None,
               sweeper_params: dict | None = None, statuses: dict | None = None, skip: tuple = (),
               seeds_per_job: int = 1, eval_metrics=("episode_return", "episode_length"), group_of=None) -> Path:
    """A sweep dir whose multirun.yaml defines `jobs` (so the missing ones can be named)."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    multirun = {
        "seed": 0, "num_seeds": seeds_per_job, "experiment": "toy",
        "hydra": {"sweeper": {"params": sweeper_params or {}}, "overrides": {"task": task_overrides or []}},
    }
    (sweep_dir / "multirun.yaml").write_text(yaml.safe_dump(multirun))
    statuses = statuses or {}
    for num, overrides in enumerate(jobs):
        if num in skip:
            continue
        ov = dict(o.split("=", 1) for o in overrides)
        seed = int(ov.get("seed", 0))
        n = int(ov.get("num_seeds", seeds_per_job))
        gi = group_of(overrides) if group_of else 0
        make_run(sweep_dir / str(num), overrides, list(range(seed, seed + n)), statuses.get(num, "completed"),
                 eval_metrics=eval_metrics, group_index=gi)
    return sweep_dir


def read_csv(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_vmapped_seeds_count_as_seeds_two_jobs_of_four_give_eight(tmp_path):
    """`-m seed=0,4 num_seeds=4`: two jobs, four vmapped seeds each -> one group of 8 seeds."""
    jobs = [["seed=0", "num_seeds=4"], ["seed=4", "num_seeds=4"]]
    sweep = make_sweep(tmp_path / "sw", jobs, task_overrides=["seed=0,4", "num_seeds=4"], seeds_per_job=4)
    out = run_aggregate([sweep], quiet=True)
    rows = read_csv(sweep / "aggregate.csv")
    assert {r["group"] for r in rows} == {"toy"}
    ret = next(r for r in rows if r["metric"] == "eval/episode_return")
    assert int(ret["n_seeds"]) == 8
    expected = mean_summary([value(0, s, "eval/episode_return") for s in range(8)], "eval/episode_return")
    for key in SUMMARY_KEYS[1:]:
        assert float(ret[key]) == pytest.approx(expected[key])
    assert not out["problems"]
    assert (sweep / "curves.png").stat().st_size > 1000


def test_groups_by_overrides_other_than_seed_with_contract_columns(tmp_path):
    lrs, ents = ["0.001", "0.002"], ["0.1", "0.15"]
    jobs = [[f"ppo.lr={lr}", f"ppo.ent_coef_initial={e}", f"seed={s}", "env=cartpole"] for lr in lrs for e in ents for s in (0, 1, 2)]
    sweep = make_sweep(tmp_path / "sw", jobs, task_overrides=["ppo.lr=0.001,0.002", "ppo.ent_coef_initial=0.1,0.15", "seed=0,1,2", "env=cartpole"],
                       group_of=lambda ov: lrs.index(ov[0].split("=")[1]) * 2 + ents.index(ov[1].split("=")[1]))
    run_aggregate([sweep], quiet=True)
    with (sweep / "aggregate.csv").open() as f:
        header = next(csv.reader(f))
    # group, the swept keys (env is the same everywhere: not swept), metric, the statistics.
    assert header == ["group", "ppo.lr", "ppo.ent_coef_initial", *CONTRACT_TAIL, "ci_method", "small_sample", "logged_frac"]
    rows = read_csv(sweep / "aggregate.csv")
    groups = sorted({r["group"] for r in rows})
    assert groups == sorted(f"ppo.lr={lr},ppo.ent_coef_initial={e}" for lr in lrs for e in ents)
    metrics = {r["metric"] for r in rows}
    assert {"eval/episode_return", "eval/episode_length", "train/mean_episode_return", "train/entropy"} <= metrics
    for r in rows:
        assert int(r["n_seeds"]) == 3
        assert float(r["ci_low"]) <= float(r["mean"]) <= float(r["ci_high"])
        assert r["iqm_ci_low"] == r["iqm_ci_high"] == ""  # 3 seeds: no bootstrap interval (from 8)
    r = next(r for r in rows if r["group"] == "ppo.lr=0.002,ppo.ent_coef_initial=0.15" and r["metric"] == "eval/episode_return")
    assert r["ppo.lr"] == "0.002" and r["ppo.ent_coef_initial"] == "0.15"
    assert float(r["mean"]) == pytest.approx(np.mean([value(3, s, "eval/episode_return") for s in range(3)]))


def test_failed_missing_stopped_running_are_named_and_do_not_block(tmp_path, capsys):
    jobs = [[f"seed={s}"] for s in range(6)]
    sweep = make_sweep(tmp_path / "sw", jobs, task_overrides=["seed=0,1,2,3,4,5"],
                       statuses={1: "failed", 2: "stopped", 3: "running"}, skip=(4,))
    # job 5: a run dir Hydra made, but the job died before the runner wrote anything.
    import shutil

    for name in ("summary.json", "metrics.csv", "config.yaml"):
        (sweep / "5" / name).unlink()
    out = run_aggregate([sweep])
    printed = capsys.readouterr().out
    rows = read_csv(sweep / "aggregate.csv")
    assert int(next(r for r in rows if r["metric"] == "eval/episode_return")["n_seeds"]) == 1  # only seed 0
    units = {int(r["seed"]): r for r in read_csv(sweep / "runs.csv")}
    assert {s: units[s]["status"] for s in units} == {0: "completed", 1: "failed", 2: "stopped", 3: "running", 4: "missing", 5: "missing"}
    assert [units[s]["used"] for s in range(6)] == ["True"] + ["False"] * 5
    assert "boom" in units[1]["reason"]
    for seed, word in [(1, "FAILED"), (2, "STOPPED"), (3, "RUNNING"), (4, "MISSING"), (5, "MISSING")]:
        line = next(line for line in out["problems"] if f"seed={seed} " in line)
        assert line.startswith(word) and str(sweep / str(seed)) in line
        assert line in printed
    assert "5 seed(s) NOT in the statistics" in printed
    shutil.rmtree(sweep / "0")
    # Nothing usable at all: still writes, with n_seeds 0, and names every seed.
    out = run_aggregate([sweep], quiet=True)
    assert len(out["problems"]) == 6


def test_include_stopped_and_cancelled_job_from_jobs_json(tmp_path):
    jobs = [[f"seed={s}"] for s in range(3)]
    sweep = make_sweep(tmp_path / "sw", jobs, task_overrides=["seed=0,1,2"], statuses={1: "stopped", 2: "stopped"})
    record = {"launcher": "slurm", "wait": True, "jobs": {
        "0": {"num": 0, "job_id": "7_0", "overrides": jobs[0], "state": "COMPLETED", "outcome": "completed", "error": None},
        "1": {"num": 1, "job_id": "7_1", "overrides": jobs[1], "state": "CANCELLED by 0", "outcome": "failed", "error": "UncompletedJobError"},
        "2": {"num": 2, "job_id": "7_2", "overrides": jobs[2], "state": "COMPLETED", "outcome": "completed", "error": None},
    }}
    (sweep / "jobs.json").write_text(json.dumps(record))
    out = run_aggregate([sweep], quiet=True, include_stopped=True)
    units = {u.seed: u for u in out["collection"].units}
    # The run dir says "stopped" (SIGTERM), SLURM says CANCELLED: a failed seed, never used.
    assert units[1].status == "failed" and not units[1].used and "7_1 CANCELLED" in units[1].run.reason
    assert units[2].status == "stopped" and units[2].used  # --include-stopped
    n = next(r for r in out["rows"] if r["metric"] == "eval/episode_return")["n_seeds"]
    assert n == 2


def test_several_dirs_and_plain_run_dirs(tmp_path):
    a = make_sweep(tmp_path / "a", [["seed=0", "ppo.lr=0.1"], ["seed=1", "ppo.lr=0.1"]], task_overrides=["seed=0,1", "ppo.lr=0.1"])
    b = tmp_path / "runs"
    make_run(b / "r1", ["seed=2", "ppo.lr=0.1"], [2])
    make_run(b / "r2", ["seed=0", "ppo.lr=0.2"], [0], group_index=1)
    out = run_aggregate([a, b], out_dir=tmp_path / "out", quiet=True)
    rows = read_csv(tmp_path / "out" / "aggregate.csv")
    n = {r["group"]: int(r["n_seeds"]) for r in rows if r["metric"] == "eval/episode_return"}
    assert n == {"ppo.lr=0.1": 3, "ppo.lr=0.2": 1}
    assert len(out["collection"].runs) == 4


def test_cli_prints_table_and_writes_files(tmp_path, capsys):
    sweep = make_sweep(tmp_path / "sw", [[f"seed={s}", f"reward={m}"] for m in ("a", "b") for s in (0, 1)],
                       task_overrides=["seed=0,1", "reward=a,b"], group_of=lambda ov: 0 if ov[1].endswith("a") else 1)
    proc = run_cli(["aggregate", sweep], capsys)
    assert proc.returncode == 0, proc.stderr
    assert "reward=a" in proc.stdout and "reward=b" in proc.stdout and "eval/episode_return" in proc.stdout
    for name in ("aggregate.csv", "runs.csv", "curves.png"):
        assert (sweep / name).exists(), name
    bad = run_cli(["aggregate", tmp_path / "nope"], capsys)
    assert bad.returncode != 0 and "does not exist" in bad.stderr


def test_scaled_resolver_and_expected_jobs(tmp_path):
    from omegaconf import OmegaConf

    from ppo_lab.analysis.sweep import expected_jobs_from_config
    from ppo_lab.resolvers import scaled

    assert scaled(0.001, 1, 0.5) == "0.001,0.0005"
    cfg = OmegaConf.create({"ppo": {"lr": 0.002}, "hydra": {"sweeper": {"params": {"ppo.lr": "${ppo_lab.scaled:${ppo.lr},1,0.5}", "seed": "range(0,8,4)"}},
                                                             "overrides": {"task": ["env=cartpole"]}}})
    jobs = expected_jobs_from_config(cfg)
    assert jobs == [["ppo.lr=0.002", "seed=0", "env=cartpole"], ["ppo.lr=0.002", "seed=4", "env=cartpole"],
                    ["ppo.lr=0.001", "seed=0", "env=cartpole"], ["ppo.lr=0.001", "seed=4", "env=cartpole"]]
    assert math.isclose(float(jobs[2][0].split("=")[1]), 0.001)


def test_a_sweeps_records_aggregate_as_its_runs_criteria_from_the_whole_history(tmp_path, capsys):
    """`ppo-lab record --name-by-dir` keeps a sweep's jobs with their overrides (so they group as
    the jobs did) and each seed's criteria from the whole metrics.csv, of which the record keeps a
    few rows: every unit's values, the criteria included, are the runs' own."""
    jobs = [[f"ppo.lr={lr}", f"seed={s}"] for lr in (1, 2) for s in (0, 1)]
    sweep = make_sweep(tmp_path / "sweep", jobs, group_of=lambda o: int(o[0][-1]))
    for run_dir in sorted(p for p in sweep.iterdir() if p.is_dir()):
        make_run(run_dir, yaml.safe_load((run_dir / ".hydra" / "overrides.yaml").read_text()),
                 [int(run_dir.name) % 2], group_index=int(run_dir.name) // 2, updates=50)
    records = tmp_path / "records"
    proc = run_cli(["record", sweep, "--into", records, "--name-by-dir", "--points", "5"], capsys)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in records.iterdir()) == ["0", "1", "2", "3"]
    assert len((records / "0" / "metrics.csv").read_text().splitlines()) == 1 + 5  # a header and 5 of 50 updates

    def units(d):
        col = collect([d])
        return col.groups, sorted((u.group, u.seed, tuple(sorted(u.values.items()))) for u in col.units)

    assert units(records) == units(sweep)
    groups, found = units(records)
    assert groups == ["ppo.lr=1", "ppo.lr=2"]
    assert all(dict(values)["criteria/final_return"] > 0 for _, _, values in found)


def test_a_benchmark_run_is_recorded_whole_and_a_run_that_did_not_complete_is_refused(tmp_path, capsys):
    run = tmp_path / "bench"
    run.mkdir()
    for name, content in (("config.yaml", "experiment: toy\n"), ("manifest.json", "{}"),
                          ("benchmark.json", json.dumps({"status": "completed", "sps": 1234.5}))):
        (run / name).write_text(content)
    proc = run_cli(["record", run, "--into", tmp_path / "records", "--name-by-dir"], capsys)
    assert proc.returncode == 0, proc.stderr
    kept = tmp_path / "records" / "bench"
    assert sorted(p.name for p in kept.iterdir()) == ["benchmark.json", "config.yaml", "manifest.json", "record.json"]
    assert json.loads((kept / "benchmark.json").read_text())["sps"] == 1234.5
    (run / "benchmark.json").write_text(json.dumps({"status": "stopped"}))
    proc = run_cli(["record", run, "--into", tmp_path / "again"], capsys)
    assert proc.returncode == 2 and "stopped: only a completed run is recorded" in proc.stderr
    assert not (tmp_path / "again").exists()
