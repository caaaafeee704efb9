"""The zoo (docs/results-zoo.md): every preset of conf/experiment/zoo composes and trains two
updates; the sweep runs exactly those presets, in sets, into a fixed dir per set; the table
renders real runs between its markers, with intervals, the reached column and the figure."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from conftest import ROOT, TINY, launch, read_summary, run_cli, train_run
from ppo_lab.analysis.sweep import expected_jobs_from_config
from ppo_lab.analysis.zoo_report import END, START
from ppo_lab.config_keys import group_options

PRESETS = [o for o in group_options("experiment") if o.startswith("zoo/")]
MINATAR = [p for p in PRESETS if p.endswith("_minatar")]
SEEDS = 2
# Two updates of each preset as it is (its envs, steps, network), two seeds, one short evaluation.
UPDATES = 2


def tiny(preset: str) -> list[str]:
    cfg = compose_preset(preset)
    batch = cfg.ppo.num_envs * cfg.ppo.num_steps
    return [f"experiment={preset}", f"ppo.total_timesteps={UPDATES * batch}", f"num_seeds={SEEDS}",
            "eval.episodes=1", "eval.max_steps=50", f"train.chunk_updates={UPDATES}", "hardware.host_devices=1"]


def compose_preset(preset: str, extra: list[str] = ()):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name="config", overrides=[f"experiment={preset}", *extra])


def test_the_zoo_has_its_minatar_presets():
    assert {"zoo/asterix_minatar", "zoo/breakout_minatar", "zoo/freeway_minatar", "zoo/space_invaders_minatar"} <= set(PRESETS)


@pytest.mark.slow
@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_trains_two_updates_and_has_reference_returns(preset, tmp_path):
    cfg = compose_preset(preset)
    assert cfg.experiment == preset and cfg.num_seeds == 8  # the table's 8 seeds, named as selected
    summary = train_run(tiny(preset), tmp_path / "run")
    assert summary.status == "completed" and summary.updates == UPDATES, summary.error
    assert summary.seeds == list(range(SEEDS)) and len(summary.eval["episode_return"]) == SEEDS
    # The table normalises by the env's `scores:` entry: every zoo env has one.
    entry = cfg.env.scores[cfg.env.gymnax_id]
    assert entry.reference != entry.random


def compose_sweep(overrides: list[str]):
    """`python launch.py -cd sweeps -cn zoo OVERRIDES` as Hydra composes it (conf/ on the search path)."""
    with initialize_config_dir(config_dir=str(ROOT / "sweeps"), version_base="1.3"):
        return compose(config_name="zoo", overrides=[*overrides, f"hydra.searchpath=[file://{ROOT / 'conf'}]"],
                       return_hydra_config=True)


def test_the_sweep_runs_every_preset_in_sets_into_a_fixed_dir():
    cfgs = {envs: compose_sweep([f"sweep.envs={envs}"]) for envs in ("all", "minatar", "others")}
    jobs = {envs: [j[0].removeprefix("experiment=") for j in expected_jobs_from_config(c)] for envs, c in cfgs.items()}
    assert sorted(jobs["all"]) == PRESETS and len(set(jobs["all"])) == len(PRESETS)
    assert sorted(jobs["minatar"]) == MINATAR and jobs["others"] == [p for p in jobs["all"] if p not in MINATAR]
    # Job k of a set is always the same env, and the dir is the same for the same set and platform:
    # the same command again finds its completed jobs (resumable).
    assert jobs["all"] == jobs["others"] + jobs["minatar"]
    assert cfgs["minatar"].hydra.sweep.dir == "outputs/sweeps/zoo/minatar/cpu"
    assert compose_sweep(["sweep.envs=minatar", "hardware=gpu"]).hydra.sweep.dir == "outputs/sweeps/zoo/minatar/gpu"
    # Each job trains its preset's own 8 seeds, vmapped.
    assert set(OmegaConf.to_container(cfgs["all"].hydra.sweeper.params)) == {"experiment"}


@pytest.fixture(scope="module")
def tiny_sweep(tmp_path_factory) -> Path:
    """A real multirun of two gymnax envs with `scores:` entries, 3 vmapped seeds each, tiny."""
    sweep = tmp_path_factory.mktemp("zoo") / "sweep"
    launch(["-m", *[o for o in TINY if not o.startswith(("env=", "eval.max_steps="))], "env=gymnax",
            "env.gymnax_id=CartPole-v1,Acrobot-v1", "num_seeds=3", "eval.max_steps=200",
            "hydra.callbacks.sweep.aggregate=false", f"hydra.sweep.dir={sweep}"])
    return sweep


@pytest.mark.slow
def test_the_table_renders_real_runs_between_the_markers(tiny_sweep, tmp_path, capsys):
    page = tmp_path / "results-zoo.md"
    page.write_text("# Zoo\nProse above.\n\n" + START + "\nold\n" + END + "\nProse below.\n")
    figure = tmp_path / "results-zoo.png"
    proc = run_cli(["zoo-table", tiny_sweep, "--out", page, "--figure", figure], capsys)
    assert proc.returncode == 0, proc.stderr
    text = page.read_text()
    assert text.startswith("# Zoo\nProse above.\n\n" + START) and text.endswith(END + "\nProse below.\n")
    assert "\nold\n" not in text and text.count(START) == 1
    rows = {cells[0]: cells for cells in (line.strip("| ").split(" | ") for line in text.splitlines())
            if cells[0] in ("CartPole-v1", "Acrobot-v1")}
    assert set(rows) == {"CartPole-v1", "Acrobot-v1"}
    steps = read_summary(tiny_sweep / "0")["timesteps"]
    for task, cells in rows.items():
        # the mean with its interval; the IQM without one: a bootstrap interval from 8 seeds
        assert cells[1].count("[") == 1 and cells[2].count("[") == 0, cells
        assert cells[3] == "3" and cells[4] == f"{steps:,}" and cells[5].endswith(" min")
        entry = OmegaConf.load(ROOT / "conf" / "env" / "gymnax.yaml").scores[task]
        assert "CPU device" in cells[6] and cells[7] == f"{entry.reference:.4g} ({entry.get('source', 'conf/env/gymnax.yaml')})"
        assert cells[8] == "no"  # a few updates reach no reference
    assert "IQM" in text and "optimality gap" in text and "2 envs" in text
    # The commands that made it: the sweep's own (from its multirun.yaml) and the renderer's.
    assert "python launch.py -m " in text and "env.gymnax_id=CartPole-v1,Acrobot-v1" in text
    assert f"ppo-lab zoo-table {tiny_sweep} --out {page}" in text
    assert figure.exists() and figure.stat().st_size > 0 and "(results-zoo.png)" in text
    # Again: the block is replaced, not added.
    assert run_cli(["zoo-table", tiny_sweep, "--out", page, "--figure", figure], capsys).returncode == 0
    assert page.read_text() == text


@pytest.mark.slow
def test_an_env_trained_twice_is_refused_not_counted_twice(tiny_sweep, tmp_path, capsys):
    shutil.copytree(tiny_sweep, tmp_path / "again")
    proc = run_cli(["zoo-table", tiny_sweep, tmp_path / "again", "--out", tmp_path / "p.md"], capsys)
    assert proc.returncode == 2 and "seed 0 is in both" in proc.stderr and not (tmp_path / "p.md").exists()


def test_reached_is_the_mean_against_the_reference():
    from ppo_lab.analysis.zoo_table import EnvRow
    from ppo_lab.estimators import mean_summary
    from ppo_lab.judging.headline import RETURN as METRIC

    def row(returns, reference):
        return EnvRow("T", list(range(len(returns))), returns, mean_summary(returns, METRIC), [], 0.0, [], 0.0, reference, "s")

    assert not row([20.0, 24.0, 28.0, 30.0, 26.0], 28.0).reached  # mean 25.6, though its interval passes 28
    assert row([27.0, 29.0, 28.0, 30.0, 26.0], 28.0).reached  # mean 28
    assert not row([20.0, 20.5, 21.0, 20.2, 20.8], 28.0).reached
    assert row([1.0], 28.0).reached is False and row([1.0], None).reached is None


def test_a_missing_dir_is_refused(tmp_path, capsys):
    proc = run_cli(["zoo-table", tmp_path / "nowhere", "--out", tmp_path / "p.md"], capsys)
    assert proc.returncode == 2 and "does not exist" in proc.stderr and not (tmp_path / "p.md").exists()
