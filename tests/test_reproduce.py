"""Reproducibility: manifest.json, the config hash, hardware.deterministic, and `ppo-lab
reproduce` re-running a recorded run of each env family bit for bit on this machine.

The recorded runs (tests/fixtures/reproduce/<family>/: config.yaml, metrics.csv, manifest.json)
come from `scripts/record_reproduce_fixtures.py`; a change that moves the numbers of any env
family fails here when it is made. Re-record them only when moving the numbers is intended.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import ROOT
from ppo_lab import rundir
from ppo_lab.analysis.reproduction import compare_runs, format_comparison
from ppo_lab.config import config_hash
from ppo_lab.hardware import apply_deterministic
from ppo_lab.run.reproduce import main as reproduce_main
from ppo_lab.run.reproduce import rerun

FIXTURES = ROOT / "tests" / "fixtures" / "reproduce"
FAMILIES = sorted(p.name for p in FIXTURES.iterdir())
# Brax's program takes ~16 s of one core to compile cold; recorded with the config of the slow
# test_brax_env_trains_and_evaluates, it loads from the suite's cache beside it (~2 s): slow too.
SLOW = {"brax"}
UPDATES = 4  # every recorded run has at least 4 (the re-run trains whole chunks of its own size)


def _copy(family: str, tmp_path: Path) -> Path:
    """The recorded run, its XLA cache pointed at this suite's (conftest): the recorded
    `.jax_cache` would leak compiled programs between suite runs. Where programs are cached
    changes no number (resuming ignores the key too); it does change the config's hash."""
    dest = tmp_path / family
    shutil.copytree(FIXTURES / family, dest)
    suite_cache = os.environ.get("PPO_LAB_COMPILATION_CACHE_DIR")
    if suite_cache:
        cfg = yaml.safe_load((dest / "config.yaml").read_text())
        cfg["hardware"]["compilation_cache_dir"] = suite_cache
        (dest / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return dest


@pytest.mark.parametrize("family", [pytest.param(f, marks=pytest.mark.slow) if f in SLOW else f for f in FAMILIES])
def test_recorded_run_reproduces_bit_for_bit(family, tmp_path):
    run = _copy(family, tmp_path)
    ran = rerun(run, UPDATES, tmp_path / "again")
    result = compare_runs(run, tmp_path / "again", ran)
    assert result.identical, format_comparison(result, run, tmp_path / "again")
    assert result.updates == UPDATES
    manifest = rundir.read_manifest(tmp_path / "again")
    assert manifest["config_hash"] == config_hash(yaml.safe_load((run / "config.yaml").read_text()))
    assert manifest["devices"]["platform"] == "cpu" and manifest["process_count"] == 1
    assert {"lab", "python", "packages", "xla_flags", "layout", "deterministic"} <= set(manifest)
    assert manifest["packages"]["jax"] and "commit" in manifest["lab"] and "dirty" in manifest["lab"]


def test_envpool_numbers_do_not_depend_on_its_thread_count(tmp_path):
    """EnvPool steps its pool synchronously and each C++ env draws from its own generator
    (seeded env.seed + k), so the recorded 1-thread run is reproduced by 2 threads; a run with
    `env.num_threads: null` (all cores) may then move between machines without moving a number."""
    pytest.importorskip("envpool", reason="needs the envpool extra: pip install -e '.[envpool]'")
    run = _copy("envpool", tmp_path)
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    assert cfg["env"]["num_threads"] == 1
    cfg["env"]["num_threads"] = 2
    (run / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    ran = rerun(run, UPDATES, tmp_path / "again")
    result = compare_runs(FIXTURES / "envpool", tmp_path / "again", ran)
    assert result.identical, format_comparison(result, FIXTURES / "envpool", tmp_path / "again")


def test_cli_names_the_first_difference_and_the_manifest_fields(tmp_path, capsys):
    run = _copy("cartpole", tmp_path)
    lines = (run / "metrics.csv").read_text().splitlines()
    header = lines[0].split(",")
    col = header.index("train/entropy")
    cells = lines[2].split(",")  # update 2, seed 0
    cells[col] = str(float(cells[col]) + 0.5)
    lines[2] = ",".join(cells)
    (run / "metrics.csv").write_text("\n".join(lines) + "\n")
    manifest = rundir.read_manifest(run)
    manifest["packages"]["jax"] = "0.0.1"
    rundir.write_manifest(run, manifest)
    code = reproduce_main([str(run), "--updates", "3", "--out", str(tmp_path / "again")])
    out = capsys.readouterr().out
    assert code == 1
    assert "DIFFERENT: first at update 2, seed 0, train/entropy" in out
    assert "packages.jax: '0.0.1' ->" in out


def test_cli_refuses_a_dir_without_metrics(tmp_path, capsys):
    assert reproduce_main([str(tmp_path)]) == 2


def test_config_hash_is_canonical():
    cfg = yaml.safe_load((FIXTURES / "cartpole" / "config.yaml").read_text())
    reordered = dict(reversed(list(cfg.items())))
    assert config_hash(cfg) == config_hash(reordered) == config_hash({**cfg, "hydra": {"x": 1}})
    assert config_hash({**cfg, "seed": 99}) != config_hash(cfg)
    for family in FAMILIES:  # as recorded: the hash of the config.yaml beside it
        recorded = yaml.safe_load((FIXTURES / family / "config.yaml").read_text())
        assert config_hash(recorded) == rundir.read_manifest(FIXTURES / family)["config_hash"], family


def test_deterministic_sets_xla_flags_on_gpu_only(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    monkeypatch.delenv("TF_CUDNN_DETERMINISTIC", raising=False)
    apply_deterministic("cpu")
    assert os.environ["XLA_FLAGS"] == "--xla_force_host_platform_device_count=2"
    apply_deterministic("gpu")
    flags = os.environ["XLA_FLAGS"].split()
    assert "--xla_gpu_deterministic_ops=true" in flags and "--xla_gpu_exclude_nondeterministic_ops=true" in flags
    assert "--xla_force_host_platform_device_count=2" in flags and os.environ["TF_CUDNN_DETERMINISTIC"] == "1"
