"""Launcher presets, the local-file mechanism, named sweeps and multiruns end to end (no SLURM).

The CartPole sweeps really run (tiny configs); the Goodhart sweeps are composed and their job
lists checked (training the foraging world is too slow for this suite).
"""

from __future__ import annotations

import csv
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from conftest import ROOT, TINY, read_summary, run_files, start_launch, wait_for_rows
from ppo_lab.analysis.sweep import expected_jobs_from_config

CONF = ROOT / "conf"
MODES = ["ground_truth", "ground_truth_blind", "ground_truth_blinded", "proxy_mortal", "proxy"]


def compose_in(conf_dir: Path, overrides: list[str]):
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        return compose(config_name="config", overrides=overrides, return_hydra_config=True)


def launcher_params(cfg) -> dict:
    """hydra.launcher resolved against the whole config, as Hydra instantiates it."""
    return OmegaConf.to_container(cfg.hydra.launcher, resolve=True)


def multirun(args: list[str], sweep_dir: Path, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "launch.py", *args, f"hydra.sweep.dir={sweep_dir}"]
    if "-cn" not in args:
        cmd.insert(2, "-m")
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return proc


def sweep_cfg(name: str, overrides: list[str]):
    """The full config (hydra node included) of `python launch.py -cd sweeps -cn NAME ...`."""
    proc = subprocess.run([sys.executable, "launch.py", "-cd", "sweeps", "-cn", name, *overrides, "--cfg", "all"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return OmegaConf.create(proc.stdout)


def aggregate_rows(sweep_dir: Path) -> list[dict]:
    with (sweep_dir / "aggregate.csv").open(newline="") as f:
        return list(csv.DictReader(f))


# ----------------------------------------------------------------------------- launchers
def test_basic_launcher_stays_the_default():
    cfg = compose_in(CONF, [])
    assert cfg.hydra.launcher._target_.endswith("BasicLauncher")
    assert cfg.hydra.callbacks.sweep._target_ == "ppo_lab.launching.callbacks.SweepCallback"


def test_slurm_preset_sizes_from_hardware_and_requeues():
    cpu = launcher_params(compose_in(CONF, ["hydra/launcher=slurm"]))
    gpu = launcher_params(compose_in(CONF, ["hydra/launcher=slurm", "hardware=gpu"]))
    assert cpu["_target_"] == "hydra_plugins.ppo_lab_launchers.SlurmLauncher"
    assert (cpu["cpus_per_task"], cpu["gpus_per_node"]) == (2, None)
    assert (gpu["cpus_per_task"], gpu["gpus_per_node"]) == (8, 1)
    assert cpu["max_num_timeout"] > 0 and cpu["additional_parameters"]["requeue"] is True
    assert cpu["signal_delay_s"] > 0 and cpu["wait"] is True
    assert cpu["partition"] is None and cpu["account"] is None and cpu["qos"] is None
    cli = launcher_params(compose_in(CONF, ["hydra/launcher=slurm", "hydra.launcher.partition=gpu", "hydra.launcher.account=me",
                                            "hydra.launcher.gpus_per_node=4"]))
    assert (cli["partition"], cli["account"], cli["gpus_per_node"]) == ("gpu", "me", 4)
    local = launcher_params(compose_in(CONF, ["hydra/launcher=local", "hardware=gpu"]))
    assert local["_target_"] == "hydra_plugins.ppo_lab_launchers.LocalLauncher" and local["gpus_per_node"] == 1


def test_launchers_instantiate_as_hydra_plugins():
    from hydra.core.plugins import Plugins
    from hydra.plugins.launcher import Launcher

    names = {f"{c.__module__}.{c.__name__}" for c in Plugins.instance().discover(Launcher)}
    assert {"hydra_plugins.ppo_lab_launchers.SlurmLauncher", "hydra_plugins.ppo_lab_launchers.LocalLauncher"} <= names


def test_cluster_values_from_the_git_ignored_local_file(tmp_path):
    conf = tmp_path / "conf"
    # A copy of conf/ without this machine's own local file (if any), plus a test one.
    shutil.copytree(CONF, conf, ignore=lambda d, names: [n for n in names if Path(d).name == "local" and n.endswith(".yaml")])
    (conf / "local").mkdir(exist_ok=True)
    (conf / "local" / "default.yaml").write_text(
        "slurm:\n  partition: gpu_long\n  account: proj42\n  qos: high\n  timeout_min: 30\n  setup: ['module load cuda']\n")
    p = launcher_params(compose_in(conf, ["hydra/launcher=slurm"]))
    assert (p["partition"], p["account"], p["qos"], p["timeout_min"], p["setup"]) == ("gpu_long", "proj42", "high", 30, ["module load cuda"])
    # The command line still wins over the file.
    p = launcher_params(compose_in(conf, ["hydra/launcher=slurm", "hydra.launcher.partition=debug"]))
    assert p["partition"] == "debug"
    # Git ignores the file; only the README is tracked.
    ignored = subprocess.run(["git", "check-ignore", "conf/local/default.yaml"], cwd=ROOT, capture_output=True, text=True)
    assert ignored.returncode == 0
    assert (CONF / "local" / "README.md").exists()


# ----------------------------------------------------------------------------- named sweeps
def test_goodhart_sweep_is_five_modes_of_eight_seeds():
    cfg = sweep_cfg("goodhart", ["experiment=cartpole"])  # the job list does not depend on the experiment
    jobs = expected_jobs_from_config(cfg)
    assert [j[0] for j in jobs] == [f"reward={m}" for m in MODES]
    assert cfg.seed == 0 and cfg.num_seeds == 8 and cfg.hydra.mode == "MULTIRUN"


@pytest.mark.slow
def test_goodhart_sweep_composes_with_the_goodhart_experiment():
    # The sweep's own experiment: it must exist (the sweep names it), not be skipped when missing.
    assert (CONF / "experiment" / "goodhart_cpu.yaml").exists()
    from ppo_lab.config import validate

    cfg = sweep_cfg("goodhart", [])
    assert cfg.experiment == "goodhart_cpu" and cfg.env.name == "foraging"
    jobs = expected_jobs_from_config(cfg)
    assert len(jobs) == 5
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        for job in jobs:
            job_cfg = compose(config_name="config", overrides=["experiment=goodhart_cpu", f"num_seeds={cfg.num_seeds}", *job])
            validate(OmegaConf.to_container(job_cfg, resolve=True))


@pytest.mark.slow
def test_rare_actions_sweep_crosses_floor_entropy_and_lr_at_a_batch_that_cuts_epochs():
    from ppo_lab.config import validate
    from ppo_lab.ppo.autoscale import apply_auto_scale

    cfg = sweep_cfg("rare_actions", [])
    assert cfg.experiment == "rare_actions" and cfg.env.name == "rare_actions" and cfg.num_seeds == 4
    lr = cfg.ppo.lr
    jobs = expected_jobs_from_config(cfg)
    assert {tuple(j[:3]) for j in jobs} == {
        (f"ppo.auto_scale_epoch_floor={f}", f"ppo.ent_coef_initial={e}", f"ppo.lr={x!r}")
        for f in (1, 2) for e in (0.1, 0.15, 0.2) for x in (lr, lr * 0.5)}
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        for job in jobs:
            job_cfg = compose(config_name="config", overrides=["experiment=rare_actions", *job])
            run = validate(OmegaConf.to_container(job_cfg, resolve=True))
            floor = run.ppo.auto_scale_epoch_floor
            # Auto-scaling acts: epochs cut to the floor, four times the minibatches.
            scaled = apply_auto_scale(run.ppo)
            assert (scaled.update_epochs, scaled.num_minibatches) == (floor, 16)
            assert run.ppo.ent_coef_final == run.ppo.ent_coef_initial  # a constant coefficient
    # The same grid over another experiment (it absorbs the former `tuning` sweep).
    assert len(expected_jobs_from_config(sweep_cfg("rare_actions", ["experiment=cartpole"]))) == 12


@pytest.mark.slow
def test_seed_and_lr_sweep_job_lists():
    cfg = sweep_cfg("seeds", ["experiment=cartpole", "sweep.seeds=12", "sweep.per_job=4"])
    assert [j[0] for j in expected_jobs_from_config(cfg)] == ["seed=0", "seed=4", "seed=8"] and cfg.num_seeds == 4
    cfg = sweep_cfg("lr", ["experiment=cartpole"])
    lrs = [float(j[0].split("=")[1]) for j in expected_jobs_from_config(cfg)]
    assert lrs == pytest.approx([cfg.ppo.lr * f for f in (0.25, 0.5, 1, 2, 4)])


# ----------------------------------------------------------------------------- real multiruns
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_seeds_both_ways_then_relaunch_skips_completed(tmp_path):
    """-m seed=0,4 num_seeds=4: 8 seeds (2 jobs of 4 vmapped), aggregated at the end; the
    same command again skips both completed runs."""
    sweep = tmp_path / "sweep"
    proc = multirun([*TINY, "seed=0,4", "num_seeds=4"], sweep)
    rows = aggregate_rows(sweep)
    ret = next(r for r in rows if r["metric"] == "eval/episode_return")
    assert int(ret["n_seeds"]) == 8 and ret["group"] == "cartpole"
    assert {"eval/episode_return", "eval/episode_length", "train/mean_episode_return", "train/entropy"} <= {r["metric"] for r in rows}
    assert read_summary(sweep / "0")["seeds"] == [0, 1, 2, 3] and read_summary(sweep / "1")["seeds"] == [4, 5, 6, 7]
    assert "aggregate of 2 run(s), 8 seed(s)" in proc.stdout
    assert (sweep / "curves.png").exists()

    before = {job: run_files(sweep / job) for job in ("0", "1")}
    again = multirun([*TINY, "seed=0,4", "num_seeds=4"], sweep)
    assert again.stdout.count("skipped (already completed)") == 2
    assert "compiled" not in again.stdout + again.stderr  # nothing built, nothing compiled
    assert {job: run_files(sweep / job) for job in ("0", "1")} == before  # nothing written
    assert int(next(r for r in aggregate_rows(sweep) if r["metric"] == "eval/episode_return")["n_seeds"]) == 8


# (the sweep, the jobs the signal stops, the jobs never started). Under the vmap launcher the
# learning rates share a program and the numbers of envs do not: two groups of two cells.
SIGNALLED = {"basic": (["seed=0,1"], ["0"], ["1"]),
             "vmap": (["hydra/launcher=vmap", "ppo.num_envs=4,8", "ppo.lr=1e-3,3e-4"], ["0", "1"], ["2", "3"])}


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("launcher", SIGNALLED)
def test_a_signal_stops_a_local_sweep_with_its_job(tmp_path, launcher):
    """SIGTERM (as Ctrl+C) during a sweep's first job (group): it stops as a run does
    (checkpointed, evaluated, `stopped`), and the sweep with it: exit 130, its later jobs never
    started, the resume command naming the sweep."""
    jobs, stopped, never = SIGNALLED[launcher]
    sweep = tmp_path / "sweep"
    proc = start_launch(["-m", *TINY, *jobs, "ppo.total_timesteps=4000000", f"hydra.sweep.dir={sweep}"],
                        tmp_path / "sweep_log")
    try:
        wait_for_rows(proc, sweep / stopped[-1])
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 130, proc.output()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    for job in stopped:
        summary = read_summary(sweep / job)
        assert summary["status"] == "stopped" and summary["stop_reason"] == "signal SIGTERM" and summary["eval"]
    assert not any((sweep / job).exists() for job in never), "the sweep went on to its next job"
    said = proc.output()
    assert "stopped: the sweep stopped with its job (signal SIGTERM); its later jobs were not started" in said
    assert f"ppo-lab resume {sweep}" in said, said[-3000:]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_failed_job_still_aggregates_the_rest(tmp_path):
    """Jobs that fail (here: a config error) do not stop the other jobs; the multirun exits
    non-zero, the sweep is aggregated anyway, and the failed seeds are named with the reason."""
    sweep = tmp_path / "sweep"
    proc = multirun([*TINY, "seed=0,1", "ppo.num_minibatches=2,3"], sweep, check=False)
    assert proc.returncode != 0
    assert "aggregating what there is" in proc.stdout + proc.stderr
    rows = aggregate_rows(sweep)
    n = {r["group"]: int(r["n_seeds"]) for r in rows if r["metric"] == "eval/episode_return"}
    assert n == {"ppo.num_minibatches=2": 2, "ppo.num_minibatches=3": 0}
    for seed in (0, 1):
        assert f"FAILED    ppo.num_minibatches=3 seed={seed} " in proc.stdout
    assert "ConfigError: invalid config: ppo.num_minibatches=3" in proc.stdout


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_named_seeds_sweep_runs(tmp_path):
    sweep = tmp_path / "sweep"
    multirun(["-cd", "sweeps", "-cn", "seeds", "experiment=cartpole", *TINY, "sweep.seeds=4", "sweep.per_job=2"], sweep)
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir() and not p.name.startswith(".")) == ["0", "1"]
    ret = next(r for r in aggregate_rows(sweep) if r["metric"] == "eval/episode_return")
    assert int(ret["n_seeds"]) == 4


@pytest.mark.slow
@pytest.mark.timeout(500)
def test_named_lr_sweep_runs(tmp_path):
    sweep = tmp_path / "sweep"
    multirun(["-cd", "sweeps", "-cn", "lr", "experiment=cartpole", *TINY, "num_seeds=1"], sweep, timeout=480)
    rows = [r for r in aggregate_rows(sweep) if r["metric"] == "eval/episode_return"]
    assert len(rows) == 5 and all(int(r["n_seeds"]) == 1 for r in rows)
    assert [float(r["ppo.lr"]) for r in rows] == pytest.approx([2.5e-3 * f for f in (0.25, 0.5, 1, 2, 4)])


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_local_submitit_launcher(tmp_path):
    sweep = tmp_path / "sweep"
    multirun(["hydra/launcher=local", *TINY, "seed=0,1"], sweep)
    jobs = (sweep / "jobs.json").read_text()
    assert '"outcome": "completed"' in jobs
    ret = next(r for r in aggregate_rows(sweep) if r["metric"] == "eval/episode_return")
    assert int(ret["n_seeds"]) == 2
