"""Evaluation along training (eval.every_updates, run/along.py): its rows in evals.csv, their
resume after SIGKILL, chunks that end on evaluations, and nothing of it when it is off."""

from __future__ import annotations

import csv
import logging
import math
import time
from collections import Counter
from pathlib import Path

import flax.serialization
import jax
import pytest

from conftest import TINY, read_rows, read_summary, run_config, start_launch, train_run
from ppo_lab import rundir
from ppo_lab.errors import ConfigError
from ppo_lab.run.build import chunk_updates
from ppo_lab.run.resume import ResumeError
from ppo_lab.rundir.checkpoints import state_path

# 32 updates of 2 seeds, an evaluation every 8 (chunks of 8: they end on them).
ALONG = [*TINY, "num_seeds=2", "eval.every_updates=8", "eval.along_episodes=2", "eval.kl_states=32"]
TRAINING = ["train/entropy", "train/approx_kl", "train/mean_episode_return", "train/pg_loss", "train/vf_loss"]
ALONG_PROGRAMS = ("held_out_states", "policy_distances")


def read_evals(run_dir: Path) -> list[dict]:
    with (Path(run_dir) / "evals.csv").open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def along_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("along") / "run"
    return run_dir, train_run(ALONG, run_dir)


def test_one_row_per_evaluation_and_seed(along_run):
    run_dir, summary = along_run
    rows = read_evals(run_dir)
    assert [(int(r["update"]), int(r["seed"])) for r in rows] == [(u, s) for u in (0, 8, 16, 24, 32) for s in (0, 1)]
    for r in rows:
        assert int(r["timesteps"]) == 64 * int(r["update"])
        for name in ("eval/episode_return", "eval/episode_length", "eval/kl_from_initial", "eval/distance"):
            assert r[name] != "", name
        assert float(r["eval/distance"]) == pytest.approx(math.sqrt(float(r["eval/kl_from_initial"])), rel=1e-6)
    first, later = rows[:2], rows[2:]
    assert all(float(r["eval/kl_from_initial"]) == 0.0 and r["eval/kl_from_previous"] == "" for r in first)
    assert all(float(r["eval/kl_from_initial"]) > 0 and float(r["eval/kl_from_previous"]) > 0 for r in later)
    assert summary.status == "completed" and summary.along_eval_s > 0
    walls = [float(r["wall_s"]) for r in rows if r["seed"] == "0"]
    assert walls == sorted(walls)


def test_evaluating_changes_nothing_trained(along_run, tmp_path):
    """The same run without evaluations along training (and its chunks of 8, not cut) trains
    the same numbers, seed for seed: its evaluations draw keys of their own and touch no state
    training reads."""
    run_dir, _ = along_run
    off = tmp_path / "off"
    train_run([*TINY, "num_seeds=2"], off)
    pick = lambda rows: [[r[k] for k in ("update", "seed", *TRAINING)] for r in rows]  # noqa: E731
    assert pick(read_rows(off)) == pick(read_rows(run_dir))


def test_off_costs_nothing(tmp_path, caplog):
    """Off (the default): no program of it traced or compiled, no policy anchors in the state
    or its checkpoint, no evals.csv, nothing in summary.json."""
    run_dir = tmp_path / "run"
    jax.config.update("jax_log_compiles", True)
    try:
        with caplog.at_level(logging.WARNING, logger="jax"):
            summary = train_run([*TINY, "checkpoint.every_min=1e-9"], run_dir)
    finally:
        jax.config.update("jax_log_compiles", False)
    traced = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Finished tracing")]
    assert any("chunk" in m for m in traced), "the log shows what was traced"
    assert not [m for m in traced if any(name in m for name in ALONG_PROGRAMS)]
    assert summary.status == "completed" and summary.along_eval_s is None
    assert not (run_dir / "evals.csv").exists()
    raw = flax.serialization.msgpack_restore(state_path(rundir.list_checkpoints(run_dir / "checkpoints")[-1]).read_bytes())
    assert raw["policy_anchors"] is None


def test_on_its_programs_compile_once(tmp_path, caplog):
    jax.config.update("jax_log_compiles", True)
    try:
        with caplog.at_level(logging.WARNING, logger="jax"):
            train_run([*ALONG, "eval.every_updates=4"], tmp_path / "run")
    finally:
        jax.config.update("jax_log_compiles", False)
    traced = Counter(name for r in caplog.records for name in ALONG_PROGRAMS
                     if r.getMessage().startswith("Finished tracing") and f" {name} " in r.getMessage())
    assert traced == {name: 1 for name in ALONG_PROGRAMS}, "one trace each for 9 evaluations of 2 seeds"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigkill_and_relaunch_keeps_every_evaluation_once_and_bit_for_bit(along_run, tmp_path):
    """Killed mid-run and relaunched: no duplicate and no missing evaluation, and the values of
    the uninterrupted run (the ones after the checkpoint done again, bit for bit)."""
    longer = [*ALONG, "ppo.total_timesteps=32768", "eval.every_updates=16", "train.chunk_updates=16",
              "checkpoint.every_min=1e-9"]
    whole = tmp_path / "whole"
    train_run(longer, whole)
    run_dir = tmp_path / "killed"
    proc = start_launch(longer, run_dir)
    deadline = time.monotonic() + 240
    while len(rundir.list_checkpoints(run_dir / "checkpoints")) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.kill()
    proc.wait(timeout=30)
    assert read_summary(run_dir)["status"] == "running", "killed mid-run"
    summary = train_run(longer, run_dir)
    assert summary.status == "completed" and summary.resumed_from is not None
    rows, expected = read_evals(run_dir), read_evals(whole)
    keys = [(r["update"], r["seed"]) for r in rows]
    assert len(keys) == len(set(keys)) == 2 * (512 // 16 + 1)
    strip = lambda rs: [{k: v for k, v in r.items() if k != "wall_s"} for r in rs]  # noqa: E731
    assert strip(rows) == strip(expected)


def test_chunks_end_on_evaluations_and_on_the_update_a_run_resumes_from():
    cfg = run_config([*TINY, "eval.every_updates=6", "train.chunk_updates=8"])
    assert chunk_updates(cfg, cfg.ppo) == 6
    assert chunk_updates(run_config([*TINY, "eval.every_updates=12", "train.chunk_updates=8"]), cfg.ppo) == 6
    # Resumed at update 4 (a relaunch with another train.chunk_updates): chunks of 2 reach 6, 12, ...
    assert chunk_updates(cfg, cfg.ppo, start_update=4) == 2
    assert chunk_updates(run_config([*TINY, "train.chunk_updates=8"]), cfg.ppo, start_update=4) == 8  # off: as it was


def test_zero_is_off_and_a_negative_cadence_is_refused():
    assert not run_config([*TINY, "eval.every_updates=0"]).eval.along
    with pytest.raises(ConfigError, match="eval.every_updates.*null or 0"):
        run_config([*TINY, "eval.every_updates=-2"])


def test_the_cadence_is_fixed_within_a_run(along_run, tmp_path):
    run_dir, _ = along_run
    with pytest.raises(ResumeError, match="eval.every_updates cannot change within a run"):
        train_run([*ALONG, "eval.every_updates=16", "ppo.total_timesteps=4096", "allow_config_change=true"], run_dir)
