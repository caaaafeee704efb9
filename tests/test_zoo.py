"""The zoo (docs/results-zoo.md): every preset of conf/experiment/zoo composes and trains two
updates, says its protocol and, changed, names gymnax-blines' config measured beside it; the
sweep runs exactly those presets, in sets, into a fixed dir per set; runs are kept as records
(`ppo-lab record`) and the table renders records as it renders runs, both plays, the verdict by
the mean, the aggregate with and without the envs whose reference says nothing; and the page
holds exactly what its committed records render."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from conftest import ROOT, TINY, launch, read_summary, run_cli, run_config, train_run
from ppo_lab.analysis import page_blocks
from ppo_lab.analysis import zoo_report as zr
from ppo_lab.analysis import zoo_table as zt
from ppo_lab.analysis.sweep import collect, expected_jobs_from_config
from ppo_lab.config_keys import group_options
from ppo_lab.errors import ConfigError
from ppo_lab.estimators import mean_summary
from ppo_lab.pages import registry
from ppo_lab.ppo.train import env_params_argument
from ppo_lab.run.build import build
from ppo_lab.run.evaluate import episode_runner

PRESETS = [o for o in group_options("experiment") if o.startswith("zoo/")]
MINATAR = [p for p in PRESETS if p.endswith("_minatar")]
STRAIGHT = [p for p in PRESETS if p.endswith("_blines")]
SEEDS = 2
# Two updates of each preset as it is (its envs, steps, network), two seeds, one short evaluation.
UPDATES = 2
GYMNAX = OmegaConf.load(ROOT / "conf" / "env" / "gymnax.yaml")
RECORDS = ROOT / "docs" / "records" / "zoo"
PAGE = ROOT / "docs" / "results-zoo.md"
PARITY = sorted((ROOT / "docs").glob("zoo_parity_*.json"))


def tiny(preset: str) -> list[str]:
    cfg = compose_preset(preset)
    batch = cfg.ppo.num_envs * cfg.ppo.num_steps
    return [f"experiment={preset}", f"ppo.total_timesteps={UPDATES * batch}", f"num_seeds={SEEDS}",
            "eval.episodes=1", "eval.max_steps=50", f"train.chunk_updates={UPDATES}", "hardware.host_devices=1"]


def compose_preset(preset: str, extra: list[str] = ()):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name="config", overrides=[f"experiment={preset}", *extra])


def test_the_zoo_has_its_presets_and_their_straight_translations():
    assert {"zoo/asterix_minatar", "zoo/breakout_minatar", "zoo/freeway_minatar", "zoo/space_invaders_minatar"} <= set(MINATAR)
    assert len(PRESETS) - len(STRAIGHT) == 15


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_says_its_protocol_and_reports_untuned_seeds(preset):
    cfg = compose_preset(preset)
    tags = cfg.tags.zoo
    entry = GYMNAX.scores[cfg.env.gymnax_id]
    assert cfg.experiment == preset and cfg.num_seeds == 8 and cfg.seed == 100
    assert tags.protocol.startswith(("as gymnax-blines", "changed: ")), tags.protocol
    # A changed preset names the straight translation beside it: a preset as gymnax-blines of the same env.
    beside = tags.get("straight_translation")
    assert (beside is not None) == tags.protocol.startswith("changed: ")
    if beside:
        other = compose_preset(beside)
        assert other.env.gymnax_id == cfg.env.gymnax_id and other.tags.zoo.protocol.startswith("as gymnax-blines")
        assert other.seed == cfg.seed and other.num_seeds == cfg.num_seeds
    # The seeds reported are none that chose its settings (seeds 0-7).
    if tags.get("tuned_on"):
        assert tags.tuned_on.startswith("seeds 0-7") and cfg.seed >= 8
    # As gymnax-blines: their budget to a batch (the lab rounds down to whole batches), their 164 evaluation episodes.
    if tags.protocol.startswith("as gymnax-blines"):
        batch = cfg.ppo.num_envs * cfg.ppo.num_steps
        assert entry.reference_steps - batch < cfg.ppo.total_timesteps <= entry.reference_steps
        assert cfg.eval.episodes == 164


def traced_program_shapes(cfg):
    """A run's programs for `cfg` traced, not compiled or run (`jax.eval_shape`), as a run of it
    builds them on one device: the env (its contract checked), network and trainer
    (`run.build`), one replica's state, a chunk of updates from it, and an evaluation of its
    parameters. Returns (state, state after the chunk, the chunk's metrics, the evaluation's)."""
    comp = build(cfg, num_devices=1)
    trainer, hypers = comp.trainer, comp.hypers.replica(0)
    env_params = env_params_argument(comp.env, comp.env_params)
    updates, key = jnp.asarray(trainer.num_updates, jnp.int32), jax.random.PRNGKey(0)
    state = jax.eval_shape(trainer.init, key, key, hypers, updates, env_params)
    after, metrics = jax.eval_shape(trainer.chunk, state, jnp.asarray(0, jnp.int32), hypers, updates, env_params)
    evaluation = jax.eval_shape(episode_runner(cfg, comp.env, comp.env_params, comp.network), state.params, key, jnp.bool_(True))
    return state, after, metrics, evaluation


@pytest.mark.slow
@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_builds_its_run_and_traces_its_training_and_evaluation(preset):
    """Each preset as it is (its env, steps, network), traced: a run of it validates, builds,
    and its update and evaluation programs take its env's observations and actions. The
    presets that share a program's code path differ in env and settings only (`TRAINED`)."""
    cfg = run_config(tiny(preset))
    assert cfg.seeds == [100, 101]
    state, after, metrics, evaluation = traced_program_shapes(cfg)
    assert jax.tree.map(lambda s: (s.shape, s.dtype), after) == jax.tree.map(lambda s: (s.shape, s.dtype), state)
    assert {m.shape[0] for m in jax.tree.leaves(metrics)} == {UPDATES}
    assert evaluation["episode_return"].shape == ()
    # The table normalises by the env's `scores:` entry: every zoo env has one.
    env = compose_preset(preset).env
    entry = env.scores[env.gymnax_id]
    assert entry.reference != entry.random


# Trained for real: a discrete policy on flat observations and MinAtar's frames (the 4 MinAtar
# presets are one network on 10x10 frames of a few channels). The presets' other code paths
# train elsewhere on the same gymnax envs: a continuous policy with normalised observations and
# rewards (experiment=pendulum, tests/test_continuous_end_to_end.py) and a GRU
# (experiment=memory_chain, tests/test_recurrent_end_to_end.py).
TRAINED = ["zoo/cartpole", "zoo/breakout_minatar"]


@pytest.mark.slow
@pytest.mark.parametrize("preset", TRAINED)
def test_a_preset_of_each_code_path_trains_two_updates_and_is_evaluated(preset, tmp_path):
    summary = train_run(tiny(preset), tmp_path / "run")
    assert summary.status == "completed" and summary.updates == UPDATES, summary.error
    assert summary.seeds == [100, 101]
    for name in ("episode_return", "episode_return_sampled", "episode_return_greedy"):
        assert len(summary.eval[name]) == SEEDS


def test_an_unknown_constructor_argument_is_refused_by_name(tmp_path):
    with pytest.raises(ConfigError) as err:
        train_run([*TINY, "env=gymnax", "env.gymnax_id=FourRooms-misc", "env.kwargs={use_visual_ob: true}"], tmp_path / "run")
    assert "env.kwargs.use_visual_ob" in str(err.value) and "use_visual_obs" in str(err.value)


def compose_sweep(overrides: list[str]):
    """`python launch.py -cd sweeps -cn zoo OVERRIDES` as Hydra composes it (conf/ on the search path)."""
    with initialize_config_dir(config_dir=str(ROOT / "sweeps"), version_base="1.3"):
        return compose(config_name="zoo", overrides=[*overrides, f"hydra.searchpath=[file://{ROOT / 'conf'}]"],
                       return_hydra_config=True)


def test_the_sweep_runs_every_preset_in_sets_into_a_fixed_dir():
    sets = ("all", "others", "minatar", "blines", "minatar_blines")
    cfgs = {envs: compose_sweep([f"sweep.envs={envs}"]) for envs in sets}
    jobs = {envs: [j[0].removeprefix("experiment=") for j in expected_jobs_from_config(c)] for envs, c in cfgs.items()}
    assert sorted(jobs["all"]) == PRESETS and len(set(jobs["all"])) == len(PRESETS)
    assert sorted(jobs["minatar"]) == MINATAR and sorted(jobs["blines"] + jobs["minatar_blines"]) == STRAIGHT
    # Job k of a set is always the same preset, and the dir is the same for the same set and
    # platform: the same command again finds its completed jobs (resumable).
    assert jobs["all"] == jobs["others"] + jobs["minatar"] + jobs["blines"] + jobs["minatar_blines"]
    assert cfgs["minatar"].hydra.sweep.dir == "outputs/sweeps/zoo/minatar/cpu"
    assert compose_sweep(["sweep.envs=minatar", "hardware=gpu"]).hydra.sweep.dir == "outputs/sweeps/zoo/minatar/gpu"
    # Each job trains its preset's own 8 seeds, vmapped: the sweep sets no seed of its own.
    assert set(OmegaConf.to_container(cfgs["all"].hydra.sweeper.params)) == {"experiment"}
    assert "seed" not in OmegaConf.load(ROOT / "sweeps" / "zoo.yaml")


@pytest.fixture(scope="module")
def tiny_sweep(tmp_path_factory) -> Path:
    """A real multirun of two gymnax envs with `scores:` entries, 3 vmapped seeds each, tiny."""
    sweep = tmp_path_factory.mktemp("zoo") / "sweep"
    launch(["-m", *[o for o in TINY if not o.startswith(("env=", "eval.max_steps="))], "env=gymnax",
            "env.gymnax_id=CartPole-v1,Acrobot-v1", "num_seeds=3", "eval.max_steps=200",
            "hydra.callbacks.sweep.aggregate=false", f"hydra.sweep.dir={sweep}"])
    return sweep


def table_rows(text: str) -> dict[str, list[str]]:
    return {cells[0]: cells for cells in (line.strip("| ").split(" | ") for line in text.splitlines())
            if cells[0] in ("CartPole-v1", "Acrobot-v1")}


@pytest.mark.slow
def test_the_table_renders_real_runs_between_the_markers(tiny_sweep, tmp_path, capsys):
    page = tmp_path / "results-zoo.md"
    page.write_text("# Zoo\nProse above.\n\n" + zr.START + "\nold\n" + zr.END + "\nProse below.\n")
    figure = tmp_path / "results-zoo.png"
    proc = run_cli(["zoo-table", tiny_sweep, "--out", page, "--figure", figure], capsys)
    assert proc.returncode == 0, proc.stderr
    text = page.read_text()
    assert text.startswith("# Zoo\nProse above.\n\n" + zr.START) and text.endswith(zr.END + "\nProse below.\n")
    assert "\nold\n" not in text and text.count(zr.START) == 1
    rows = table_rows(text)
    assert set(rows) == {"CartPole-v1", "Acrobot-v1"}
    summary = read_summary(tiny_sweep / "0")
    for task, cells in rows.items():
        entry = GYMNAX.scores[task]
        # a run without an experiment is its env's row, no protocol said; seeds 0-2
        assert cells[1:4] == ["-", "-", "0-2"]
        assert cells[4] == f"{summary['timesteps']:,} ({entry.reference_steps:,}: fewer)"
        # sampled and greedy: a mean with its interval; the IQM without one (a bootstrap interval from 8 seeds)
        assert cells[5].count("[") == 1 and cells[6].count("[") == 0 and cells[7].count("[") == 1, cells
        assert cells[8] == f"{entry.reference:.4g} ({entry.source})"
        assert cells[9] == "no / no" and cells[10].endswith(" min")  # a few updates reach no reference
    assert "on AMD EPYC" in text or "CPU device(s)." in text  # one hardware for every row: said once
    # CartPole's reference is its max: left out of the aggregate's second pair, and said why.
    assert "| 2 | sampled |" in text and "| 1 (without those below) | greedy |" in text
    assert "CartPole-v1: reference at the ceiling (500, the max)" in text
    assert "Reached by the mean, over the 2 envs' presets: 0 of 2 sampled" in text
    # The commands that made it: the sweep's own (from its multirun.yaml) and the renderer's.
    assert "python launch.py -m " in text and "env.gymnax_id=CartPole-v1,Acrobot-v1" in text
    assert f"ppo-lab zoo-table {tiny_sweep} --out {page}" in text
    assert figure.exists() and figure.stat().st_size > 0 and "(results-zoo.png)" in text
    # Again: the block is replaced, not added.
    assert run_cli(["zoo-table", tiny_sweep, "--out", page, "--figure", figure], capsys).returncode == 0
    assert page.read_text() == text


@pytest.mark.slow
def test_records_render_as_their_runs(tiny_sweep, tmp_path, capsys):
    records = tmp_path / "records"
    proc = run_cli(["record", tiny_sweep, "--into", records, "--points", "5"], capsys)
    assert proc.returncode == 0, proc.stderr
    # Named by the run dir where the run has no experiment: the sweep's jobs 0 and 1.
    assert sorted(p.name for p in records.iterdir()) == ["0", "1"]
    for job in ("0", "1"):
        kept = sorted(p.name for p in (records / job).iterdir())
        assert kept == [".hydra", "config.yaml", "manifest.json", "metrics.csv", "record.json", "summary.json"]
        assert (records / job / "summary.json").read_bytes() == (tiny_sweep / job / "summary.json").read_bytes()
        lines = (records / job / "metrics.csv").read_text().splitlines()
        assert lines[0] == "update,seed,timesteps,train/mean_episode_return" and len(lines) == 1 + 5 * 3
        record = json.loads((records / job / "record.json").read_text())
        assert record["updates_per_seed"] == 5 and record["updates_per_seed_in_run"] == 2048 // 64
    from_runs, from_records = tmp_path / "runs.md", tmp_path / "records.md"
    assert run_cli(["zoo-table", tiny_sweep, "--out", from_runs], capsys).returncode == 0
    assert run_cli(["zoo-table", records, "--out", from_records], capsys).returncode == 0
    # The same table, aggregates and notes; only the commands that made them differ.
    head = lambda path: path.read_text().split("Made by:")[0]  # noqa: E731
    assert head(from_runs) == head(from_records) and table_rows(head(from_records))
    # Recorded again: replaced. Refused: a name two runs would take, a run that did not complete.
    assert run_cli(["record", tiny_sweep / "0", "--into", records], capsys).returncode == 0
    proc = run_cli(["record", tiny_sweep / "0", records / "0", "--into", tmp_path / "again"], capsys)
    assert proc.returncode == 2 and "would both be recorded as '0'" in proc.stderr and not (tmp_path / "again").exists()
    stopped = tmp_path / "stopped"
    shutil.copytree(tiny_sweep / "1", stopped)
    summary = json.loads((stopped / "summary.json").read_text())
    (stopped / "summary.json").write_text(json.dumps({**summary, "status": "stopped"}))
    proc = run_cli(["record", stopped, "--into", tmp_path / "again"], capsys)
    assert proc.returncode == 2 and "stopped: only a completed run is recorded" in proc.stderr


@pytest.mark.slow
def test_a_preset_trained_twice_is_refused_not_counted_twice(tiny_sweep, tmp_path, capsys):
    shutil.copytree(tiny_sweep, tmp_path / "again")
    proc = run_cli(["zoo-table", tiny_sweep, tmp_path / "again", "--out", tmp_path / "p.md"], capsys)
    assert proc.returncode == 2 and "seed 0 is in both" in proc.stderr and not (tmp_path / "p.md").exists()


def row(sampled, greedy=None, reference=28.0, name="T", task="T", translation=None, max_return=None):
    greedy = sampled if greedy is None else greedy
    r = zt.ZooRow(name, task, seeds=list(range(len(sampled))), returns={"sampled": sampled, "greedy": greedy},
                  ref=None if reference is None else zt.Reference(0.0, reference, "s", None, max_return),
                  straight_translation=translation)
    r.stats = {play: mean_summary(values, f"eval/episode_return_{play}") for play, values in r.returns.items()}
    return r


def test_reached_is_the_mean_against_the_reference_in_each_play():
    assert not row([20.0, 24.0, 28.0, 30.0, 26.0]).reached()  # mean 25.6, though its interval passes 28
    assert row([27.0, 29.0, 28.0, 30.0, 26.0]).reached()  # mean 28
    r = row([20.0, 20.5, 21.0, 20.2, 20.8], greedy=[28.0, 29.0, 30.0, 28.0, 28.0])
    assert r.reached() is False and r.reached("sampled") is False and r.reached("greedy") is True
    assert zr._verdict(r) == "no / yes"
    assert row([1.0]).reached() is False and row([1.0], reference=None).reached() is None
    # Each seed's return is a float32 mean over episodes: 164 returns of 1 average to 1 - 2**-24, at the reference 1.
    ones = float(np.float32(164) * np.float32(1 / 164))
    assert ones == 1 - 2**-24 and row([ones] * 8, reference=1.0).reached() is True
    assert row([0.999] * 8, reference=1.0).reached() is False and row([-1e-4] * 8, reference=0.0).reached() is False


def test_a_reference_at_its_ceiling_or_at_random_says_nothing():
    # By hand: CartPole's 500 is its max; DeepSea's 0 is within 1% of the way from random
    # (-0.0008) to the max (0.99); MemoryChain's 0.1 is 10% of the way from 0 to 1; no max: no verdict.
    assert zt.Reference(22.1, 500.0, "s", 150000, 500.0).uninformative == "reference at the ceiling (500, the max)"
    assert "at random play's return" in zt.Reference(-0.0008, 0.0, "s", None, 0.99).uninformative
    assert zt.Reference(0.0, 0.1, "s", None, 1.0).uninformative is None
    assert zt.Reference(-1229.0, -130.0, "s").uninformative is None


def test_the_aggregate_counts_one_preset_per_env_with_and_without_the_uninformative():
    ceiling = row([1.0] * 8, reference=1.0, name="zoo/c", task="C", max_return=1.0)
    preset = row([float(v) for v in range(20, 28)], name="zoo/p", task="P", translation="zoo/p_blines")
    blines = row([0.0] * 8, name="zoo/p_blines", task="P")
    rows = [ceiling, preset, blines]
    assert [r.name for r in zt.compared_rows(rows)] == ["zoo/c", "zoo/p"]
    assert zt.left_out(zt.compared_rows(rows)) == {"C": "reference at the ceiling (1, the max)"}
    every = zt.normalised_aggregates(rows, "sampled", reps=200)
    without = zt.normalised_aggregates(rows, "sampled", leave_out=("C",), reps=200)
    assert every["tasks"] == ["C", "P"] and without["tasks"] == ["P"]
    # By hand: P's scores are its returns / 28; the IQM of 20..27 is the mean of 22..25, 23.5.
    assert without["aggregates"]["iqm"]["point"] == pytest.approx(23.5 / 28)
    with pytest.raises(ValueError, match="P has two presets"):
        zt.compared_rows([preset, row([0.0] * 8, name="zoo/other", task="P")])


def test_the_steps_per_seed_say_the_reference_budget():
    r = row([1.0] * 8)
    for ours, theirs, said in ((149760, 150000, "149,760 (the same)"), (5_000_000, 10_000_000, "5M (10M: fewer)"),
                               (2_000_000, 250_000, "2M (250,000: more)")):
        r.steps_per_seed, r.ref = [ours], zt.Reference(0.0, 1.0, "s", theirs)
        assert zr._budget(r) == said


def test_a_missing_dir_is_refused(tmp_path, capsys):
    proc = run_cli(["zoo-table", tmp_path / "nowhere", "--out", tmp_path / "p.md"], capsys)
    assert proc.returncode == 2 and "does not exist" in proc.stderr and not (tmp_path / "p.md").exists()


def test_the_page_holds_exactly_what_its_records_render(tmp_path):
    """docs/results-zoo.md's table and its side by side with PureJaxRL are what `ppo-lab docs`
    renders from the committed records, and `ppo-lab zoo-table` run as the page names it (the
    same renderer) writes the page again; the records hold every preset a CPU measures, with
    the straight translations beside them, on the 8 held-out seeds."""
    text = PAGE.read_text()
    assert registry.ZOO_COMMAND in text and [b.name for b in registry.ZOO_BLOCKS] == ["zoo-table", "zoo-parity"]
    for block in registry.ZOO_BLOCKS:
        assert page_blocks.current(text, block.name) == block.text(ROOT), block.name
    page = tmp_path / "results-zoo.md"
    shutil.copy(PAGE, page)
    zr.render([RECORDS], page, tmp_path / "results-zoo.png", registry.ZOO_COMMAND, parity=PARITY)
    assert page.read_text() == text
    assert [p.relative_to(ROOT).as_posix() for p in PARITY] == list(registry.ZOO_PARITY)
    rows = zt.zoo_rows(collect([RECORDS]))
    # every preset a CPU trains and its straight translation (MinAtar's, a GPU's work, may join them)
    assert {p for p in PRESETS if "_minatar" not in p} <= {r.name for r in rows} <= set(PRESETS)
    assert all(r.seeds == list(range(100, 108)) and not r.not_used for r in rows)
