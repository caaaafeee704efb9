"""Reproducibility: manifest.json, the config hash, hardware.deterministic, and `ppo-lab
reproduce` re-running a recorded run of each env family bit for bit on this machine.

The recorded runs (tests/fixtures/reproduce/<cpu_id>/<family>/: config.yaml, metrics.csv,
manifest.json; one set per CPU, tests/cpu_recordings.py) come from
`scripts/record_reproduce_fixtures.py`; a change that moves the numbers of any env family fails
here when it is made. Re-record them only when moving the numbers is intended.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import ROOT
from cpu_recordings import ATOL, RTOL, Outcome, names, recording, require_reproduced
from ppo_lab import rundir
from ppo_lab.judging.reproduction import compare_runs, format_comparison
from ppo_lab.run.manifest import config_hash
from ppo_lab.hardware import apply_deterministic
from ppo_lab.host_cpu import cpu_id, cpu_record, same_cpu
from ppo_lab.run.reproduce import main as reproduce_main
from ppo_lab.run.reproduce import rerun

# Training compared with recordings made by an optimised XLA build (as a user's run compiles).
pytestmark = pytest.mark.usefixtures("optimised_xla")

FIXTURES = ROOT / "tests" / "fixtures" / "reproduce"
FAMILIES = names(FIXTURES)
UPDATES = 4  # every recorded run has at least 4 (the re-run trains whole chunks of its own size)


def _copy(family: str, tmp_path: Path, recorded: Path | None = None) -> Path:
    """The recorded run (this CPU's, where there is one), its XLA cache pointed at this suite's
    (conftest): the recorded `.jax_cache` would leak compiled programs between suite runs. Where
    programs are cached changes no number (resuming ignores the key too); it does change the
    config's hash."""
    dest = tmp_path / family
    shutil.copytree(recorded or recording(FIXTURES, family), dest)
    suite_cache = os.environ.get("PPO_LAB_COMPILATION_CACHE_DIR")
    if suite_cache:
        cfg = yaml.safe_load((dest / "config.yaml").read_text())
        cfg["hardware"]["compilation_cache_dir"] = suite_cache
        (dest / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return dest


@pytest.mark.slow  # every family retrains its recorded run
@pytest.mark.parametrize("family", FAMILIES)
def test_recorded_run_reproduces_bit_for_bit(family, tmp_path):
    run = _copy(family, tmp_path)
    ran = rerun(run, UPDATES, tmp_path / "again")
    require_reproduced(FIXTURES, family, lambda recorded: _compared(recorded, tmp_path / "again", ran))
    manifest = rundir.read_manifest(tmp_path / "again")
    assert manifest["config_hash"] == config_hash(yaml.safe_load((run / "config.yaml").read_text()))
    assert manifest["devices"]["platform"] == "cpu" and manifest["process_count"] == 1
    assert {"lab", "python", "packages", "xla_flags", "layout", "deterministic", "cpu"} <= set(manifest)
    assert manifest["packages"]["jax"] and "commit" in manifest["lab"] and "dirty" in manifest["lab"]
    assert manifest["cpu"]["machine"] and isinstance(manifest["cpu"]["isa"], list)


def _compared(recorded: Path, again: Path, ran: int) -> Outcome:
    result = compare_runs(recorded, again, ran)
    assert result.updates == UPDATES, format_comparison(result, recorded, again)
    return Outcome(result.identical, result.within(RTOL, ATOL), format_comparison(result, recorded, again))


@pytest.mark.slow
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
    require_reproduced(FIXTURES, "envpool", lambda recorded: _compared(recorded, tmp_path / "again", ran))


@pytest.mark.slow
def test_cli_names_the_first_difference_and_the_manifest_fields(tmp_path, capsys):
    # The original: the recorded run as this machine trains it (a recording of another CPU
    # differs already in the last digits, which would come first).
    run = tmp_path / "cartpole"
    rerun(_copy("cartpole", tmp_path / "recorded"), 3, run)
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
    assert "1 value(s) differ; the largest:" in out and "train/entropy" in out.split("the largest:")[1]
    assert "packages.jax: '0.0.1' ->" in out
    # Accepted within a tolerance, said as close (0.5 on an entropy near 0.69: 0.42 relative)
    code = reproduce_main([str(run), "--updates", "3", "--out", str(tmp_path / "again2"), "--rtol", "0.5"])
    assert code == 0 and "close, not identical" in capsys.readouterr().out


def test_cli_refuses_a_dir_without_metrics(tmp_path, capsys):
    assert reproduce_main([str(tmp_path)]) == 2


def test_config_hash_is_canonical():
    cfg = yaml.safe_load((recording(FIXTURES, "cartpole") / "config.yaml").read_text())
    reordered = dict(reversed(list(cfg.items())))
    assert config_hash(cfg) == config_hash(reordered) == config_hash({**cfg, "hydra": {"x": 1}})
    assert config_hash({**cfg, "seed": 99}) != config_hash(cfg)
    for path in FIXTURES.glob("*/*/config.yaml"):  # as recorded: the hash of the config.yaml beside it
        recorded = yaml.safe_load(path.read_text())
        assert config_hash(recorded) == rundir.read_manifest(path.parent)["config_hash"], path


def test_deterministic_sets_xla_flags_on_gpu_only(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    monkeypatch.delenv("TF_CUDNN_DETERMINISTIC", raising=False)
    apply_deterministic("cpu")
    assert os.environ["XLA_FLAGS"] == "--xla_force_host_platform_device_count=2"
    apply_deterministic("gpu")
    flags = os.environ["XLA_FLAGS"].split()
    assert "--xla_gpu_deterministic_ops=true" in flags and "--xla_gpu_exclude_nondeterministic_ops=true" in flags
    assert "--xla_force_host_platform_device_count=2" in flags and os.environ["TF_CUDNN_DETERMINISTIC"] == "1"


def test_cpu_record_names_what_xla_compiles_for():
    intel = {"vendor_id": "GenuineIntel", "cpu family": "6", "model": "143", "model name": "Intel(R) Xeon(R) Platinum",
             "flags": "fpu sse4_2 avx avx2 fma avx512f avx512bw aes"}
    rec = cpu_record(intel)
    assert rec["vendor"] == "GenuineIntel" and rec["family"] == "6" and rec["model"] == "143"
    assert rec["isa"] == ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw"]  # aes changes no code XLA makes
    assert cpu_id(rec).endswith("GenuineIntel-6-143-avx512")
    assert same_cpu(rec, dict(rec, model_name="another name")) and not same_cpu(rec, dict(rec, isa=["avx2"]))
    # A recording that knew only the vendor matches no CPU exactly: it is compared within tolerance.
    assert not same_cpu({"machine": rec["machine"], "vendor": "GenuineIntel"}, rec)
    assert cpu_id({"machine": "x86_64", "vendor": "GenuineIntel"}) == "x86_64-GenuineIntel"


def test_comparison_sizes_each_difference(tmp_path):
    from ppo_lab.judging.reproduction import Comparison
    c = Comparison(rows=2, updates=1, differences=[(1, 0, "a", 1.0, 1.0005), (1, 1, "b", 2e-8, 3e-8)])
    assert c.largest()[2] == "b" and abs(c.largest()[5] - 1 / 3) < 1e-9
    assert not c.within(1e-3) and c.within(1e-3, atol=1e-6)
    nan = Comparison(rows=1, updates=1, differences=[(1, 0, "a", float("nan"), 1.0)])
    assert not nan.within(1.0, 1.0)
