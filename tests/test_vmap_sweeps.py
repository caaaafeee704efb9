"""Grids in one compiled program (hydra/launcher=vmap): traced hyperparameters, grouping,
per-cell run dirs, resume and relaunch, the replica cap."""

from __future__ import annotations

import csv
import json
import logging

import pytest

from conftest import TINY, compose_config, read_summary, train_run
from test_sweeps import multirun
from ppo_lab.config import validate
from ppo_lab.run.shared_program import shared_program_key
from ppo_lab.errors import ConfigError
from ppo_lab.launching.vmap_groups import announce, check_max_replicas, plan_groups

VMAP = ["hydra/launcher=vmap", *TINY, "num_seeds=2"]


def rows(run_dir, update: int) -> list[dict]:
    with (run_dir / "metrics.csv").open(newline="") as f:
        return [r for r in csv.DictReader(f) if int(r["update"]) == update]


def test_what_may_differ_within_one_program():
    base = validate(compose_config(TINY)).resolved
    key = shared_program_key(base)
    same = {**base, "seed": 7, "ppo": {**base["ppo"], "lr": 1e-4, "gamma": 0.9, "ent_coef_initial": 0.3}}
    assert shared_program_key(same) == key
    for ppo in ({"num_minibatches": 4}, {"anneal_lr": False}, {"entropy_floor": 0.5}):
        assert shared_program_key({**base, "ppo": {**base["ppo"], **ppo}}) != key, ppo
    assert shared_program_key({**base, "num_seeds": 3}) != key


def test_groups_split_under_the_replica_cap(caplog):
    keys = ["a", "a", "b", "a", "a", "a"]
    assert plan_groups(keys, [4] * 6, None) == [[0, 1, 3, 4, 5], [2]]
    assert plan_groups(keys, [4] * 6, 12) == [[0, 1, 3], [4, 5], [2]]  # 5 cells, 3 per process: 3 + 2
    assert plan_groups(keys, [4] * 6, 3) == [[0], [1], [3], [4], [5], [2]]  # a cell above the cap runs alone
    with caplog.at_level(logging.INFO):
        announce([[0], [1]], [4, 4])
        announce([[0, 1]], [4, 4])
    shared = [r for r in caplog.records if "none can share a program" in r.getMessage()]
    assert len(shared) == 1 and "ppo.lr" in shared[0].getMessage()
    for bad in (0, -1, 2.5, True, "4"):
        with pytest.raises(ConfigError, match="max_replicas"):
            check_max_replicas(bad)
    assert check_max_replicas(None) is None and check_max_replicas(8) == 8


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_grid_trains_in_one_program_with_a_run_dir_per_cell(tmp_path):
    """3 learning rates x 2 seeds under a cap of 4 replicas: one program of 2 cells and one job
    alone; each cell an ordinary run dir whose first update trains what its run alone trains;
    a relaunch skips them all; a relaunch with another config is refused for each."""
    sweep = tmp_path / "sweep"
    grid = [*VMAP, "ppo.lr=1e-3,3e-4,1e-4", "hydra.launcher.max_replicas=4"]
    proc = multirun(grid, sweep, timeout=580)
    out = proc.stdout + proc.stderr
    assert "3 jobs in 2 program(s) of cells x seeds: 2 x 2, 1 x 2" in out
    assert out.count("compiled one chunk of 8 updates for 4 replicas") == 1
    for job, lr in enumerate((1e-3, 3e-4, 1e-4)):
        run_dir = sweep / str(job)
        assert {"config.yaml", "metrics.csv", "summary.json", "checkpoints"} <= {p.name for p in run_dir.iterdir()}
        summary = read_summary(run_dir)
        assert summary["status"] == "completed" and summary["seeds"] == [0, 1] and summary["updates"] == 32
        assert len(rows(run_dir, 32)) == 2
    assert read_summary(sweep / "0")["vmap_group"]["cells"] == 2 and read_summary(sweep / "2")["vmap_group"] is None
    # A cell leaves what its run alone leaves; its replicas train with its own learning rate,
    # and its seeds' keys are their own.
    alone = tmp_path / "alone"
    train_run([*TINY, "num_seeds=2", "ppo.lr=3e-4"], alone)
    left = lambda run_dir: {p.name for p in run_dir.iterdir() if p.name != ".hydra" and p.suffix != ".log"}  # noqa: E731
    assert left(sweep / "1") == left(alone) == {"config.yaml", "manifest.json", "metrics.csv", "summary.json", "checkpoints"}
    for cell, single in zip(rows(sweep / "1", 1), rows(alone, 1)):
        for name in ("train/vf_loss", "train/entropy", "train/learning_rate"):
            assert float(cell[name]) == pytest.approx(float(single[name]), rel=1e-3), name
    assert rows(sweep / "0", 1)[0]["train/learning_rate"] != rows(sweep / "1", 1)[0]["train/learning_rate"]

    again = multirun(grid, sweep, timeout=300)
    assert again.stdout.count("skipped (already completed)") == 3
    refused = multirun([*grid, "ppo.clip_eps=0.1"], sweep, timeout=300, check=False)
    assert refused.returncode != 0 and (refused.stdout + refused.stderr).count("has another config") >= 3


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_stopped_group_resumes_its_cells_and_skips_the_completed(tmp_path):
    """Two cells of a group are asked to stop (their STOP files) and the third completes; the
    relaunch skips the completed cell and resumes the two, together, from their checkpoint."""
    sweep = tmp_path / "sweep"
    grid = [*VMAP, "ppo.lr=1e-3,3e-4,1e-4"]
    for job in ("0", "1"):
        (sweep / job).mkdir(parents=True)
        (sweep / job / "STOP").write_text("stop\n")
    multirun(grid, sweep, timeout=580)
    assert [read_summary(sweep / j)["status"] for j in "012"] == ["stopped", "stopped", "completed"]
    assert read_summary(sweep / "0")["updates"] == 8
    for job in ("0", "1"):
        (sweep / job / "STOP").unlink()
    proc = multirun(grid, sweep, timeout=580)
    out = proc.stdout + proc.stderr
    assert proc.stdout.count("skipped (already completed)") == 1
    assert out.count("RESUMING from this run's checkpoint at update 8") == 2
    assert "vmap group: 2 cells x 2 seeds = 4 replicas" in out
    for job in "012":
        summary = read_summary(sweep / job)
        assert summary["status"] == "completed" and summary["updates"] == 32
        with (sweep / job / "metrics.csv").open(newline="") as f:
            keys = [(r["update"], r["seed"]) for r in csv.DictReader(f)]
        assert len(keys) == len(set(keys)) == 64


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_submitit_launchers_vectorize_one_job_per_group(tmp_path):
    """hydra/launcher=local (the SLURM launcher's code, without a cluster) with vectorize=true:
    two learning rates are one submitit job that trains both cells, each in its own run dir."""
    sweep = tmp_path / "sweep"
    multirun(["hydra/launcher=local", "hydra.launcher.vectorize=true", *TINY, "num_seeds=2", "ppo.lr=1e-3,3e-4"], sweep,
             timeout=580)
    jobs = json.loads((sweep / "jobs.json").read_text())["jobs"]
    assert jobs["0"]["job_id"] == jobs["1"]["job_id"] and {j["outcome"] for j in jobs.values()} == {"completed"}
    for job in ("0", "1"):
        summary = read_summary(sweep / job)
        assert summary["status"] == "completed" and summary["vmap_group"]["cells"] == 2


@pytest.mark.timeout(300)
def test_no_replicas_fails_before_launching(tmp_path):
    sweep = tmp_path / "sweep"
    proc = multirun(["hydra/launcher=vmap", *TINY, "ppo.lr=1e-3,3e-4", "hydra.launcher.max_replicas=0"], sweep, check=False)
    assert proc.returncode == 2
    assert "error: invalid config: hydra.launcher.max_replicas=0" in proc.stderr and "Traceback" not in proc.stderr
    assert not sweep.exists()


def test_a_bad_cell_fails_alone(tmp_path):
    """A group's cells each hold their own run dir's lock: a cell whose dir another live run
    holds (here one on another host, heartbeat fresh) fails before anything compiles or is
    written there, as does a cell that cannot be one (a population); the other cell trains and
    releases its lock."""
    import time

    from ppo_lab.rundir.lock import RunDirLocked
    from ppo_lab.run.entry import train_cells

    free, locked, population = tmp_path / "0", tmp_path / "1", tmp_path / "2"
    locked.mkdir()
    now = time.time()
    holder = json.dumps({"host": "node-b", "pid": 5, "started": now, "heartbeat": now, "slurm_job_id": None, "token": "t"})
    (locked / "run.lock").write_text(holder)
    cfgs = [compose_config([*TINY, f"ppo.lr={lr}"]) for lr in (1e-3, 3e-4)]
    cfgs.append(compose_config([*TINY, "pbt.population=2", "pbt.interval_updates=8"]))
    results = train_cells(cfgs, [free, locked, population])
    assert results[0].status == "completed" and results[0].vmap_group["cells"] == 1
    assert isinstance(results[1], RunDirLocked) and "host node-b, pid 5" in str(results[1])
    assert isinstance(results[2], ConfigError) and results[2].key == "pbt.population" and not population.exists()
    assert sorted(p.name for p in locked.iterdir()) == ["run.lock"] and (locked / "run.lock").read_text() == holder
    assert not (free / "run.lock").exists()
