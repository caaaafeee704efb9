"""Benchmark mode, the compilation cache and the performance suite (--quick).

No speed ratios are asserted (machines vary): only that everything is measured, positive and
finite, under the contract's JSON keys.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import HANG_S, ROOT
from ppo_lab.bench.configs import env_overrides, known_env
from ppo_lab.bench.suite import keep_or_remove

pytestmark = pytest.mark.slow

ENV_KEYS = ("env_sps", "rollout_sps", "train_sps")
TOP_KEYS = ("seed_process_wall_s", "seeds16_vmapped_wall_s", "devices2_speedup", "compile_s_cold", "compile_s_warm")


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def check_benchmark_runs(workdir: Path) -> None:
    """The suite's fresh processes (kept with --keep) are `launch.py ... benchmark=true` runs:
    benchmark.json under the contract's keys and no model or metrics saved; the one of them that
    reran a config with a warm `hardware.compilation_cache_dir` found the program there."""
    cold, warm, devices1 = (json.loads((workdir / name / "benchmark.json").read_text())
                            for name in ("01_seed1_cold", "02_seed1_warm", "04_devices1"))
    for bench in (cold, warm, devices1):
        for key in ("sps", "compile_s", "wall_s", "peak_host_memory_mb"):
            assert _positive(bench[key]), key
        assert "device_memory_mb" in bench  # None on CPU: the backend reports none
        assert bench["config"]["benchmark"] is True and bench["status"] == "completed"
    assert cold["timesteps"] == 16 * 128 * 2 and devices1["config"]["num_seeds"] == 2
    for run_dir in workdir.glob("0*_*"):
        assert not (run_dir / "metrics.csv").exists(), run_dir
        assert not (run_dir / "checkpoints").exists() or not any((run_dir / "checkpoints").iterdir()), run_dir
    cache = workdir / "cache_seed1"
    assert any(p.name.startswith("jit_chunk") for p in cache.iterdir()), list(cache.iterdir())
    # The warm process loaded every program the cold one wrote to the cache and wrote none
    # itself (a miss compiles and writes its entry again): each entry is older than its start.
    warm_started = (workdir / "02_seed1_warm" / ".hydra" / "config.yaml").stat().st_mtime
    assert all(p.stat().st_mtime < warm_started for p in cache.iterdir()), sorted(p.name for p in cache.iterdir())


@pytest.mark.long  # fresh processes and cold compiles are what it measures (README "Tests")
@pytest.mark.timeout(HANG_S + 60)
def test_performance_suite_quick(tmp_path):
    out = tmp_path / "bench.json"
    # One env: every env goes through the same measurement code, and a second (the default
    # foraging) cost about 15 s of compiling on 2 cores.
    proc = subprocess.run([sys.executable, "-m", "ppo_lab.cli", "benchmark", "--quick", "--envs", "cartpole", "--keep", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=HANG_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(out.read_text())
    try:
        check_benchmark_runs(Path(result["kept"]))
    finally:
        shutil.rmtree(result["kept"], ignore_errors=True)
    expected_envs = ["cartpole"]
    assert sorted(result["envs"]) == sorted(expected_envs), proc.stderr[-2000:]
    for env in expected_envs:
        for key in ENV_KEYS:
            assert _positive(result[env][key]), (env, key)
        r = result["envs"][env]
        assert r["num_envs"] == 8 and r["num_steps"] == 16  # the quick sizes
        for part in ("env", "rollout", "train_chunk"):
            assert _positive(r["compile_s"][part]), (env, part)
        # The env's share of a training step: its time per env step over a training step's.
        share = r["time_share"]
        assert _positive(share["env"]) and share["env"] == pytest.approx(r["train_sps"] / r["env_sps"]), share
        # Policy and update are differences of timings (clipped at 0, noisy on a loaded machine);
        # the three parts together cover the whole step, more only when noise misorders them.
        assert all(math.isfinite(v) for v in share.values()) and sum(share.values()) >= 1 - 1e-9, share
    # The same network with a GRU, in the same run (--quick: the first env's only).
    assert sorted(result["recurrent"]) == ["cartpole"]
    gru = result["recurrent"]["cartpole"]
    assert _positive(gru["gru_train_sps"]) and gru["mlp_train_sps"] == result["cartpole"]["train_sps"]
    for key in TOP_KEYS:
        assert _positive(result[key]), key
    assert result["purejaxrl_cartpole"] is None  # full suite only
    side = result["purejaxrl_side_by_side"]  # PureJaxRL is not a dependency: measured when given
    if os.environ.get("PPO_LAB_PUREJAXRL"):
        assert all(_positive(case["ratio"]) for case in side["cases"].values()), side
    else:
        assert "no PureJaxRL checkout given" in side["skipped"]
    assert "accelerator" not in result  # CPU without --accelerator
    assert set(result["bar"]) == {"seeds16_speedup", "devices2_speedup", "compile_cache_speedup"}
    for env in expected_envs:
        assert env in proc.stdout  # the table


@pytest.mark.timeout(HANG_S + 60)
def test_accelerator_section_at_toy_size(tmp_path):
    out = tmp_path / "accel.json"
    """A row in a fresh process, as a GPU lease runs it: a variant's overrides over the reference."""
    proc = subprocess.run([sys.executable, "-m", "ppo_lab.bench.accel", "--quick", "--seeds", "2", "--precisions", "bf16",
                           "--variants", "users_minibatches", "hardware.host_devices=1", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=HANG_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    (row,) = json.loads(out.read_text())["rows"]
    assert row["variant"] == "users_minibatches" and row["num_minibatches"] == 4  # the variant's override won
    assert row["status"] == "ok" and row["seeds"] == 2 and row["precision"] == "bf16" and row["conv"] == "im2col"
    for key in ("sps", "memory_gb", "compile_s", "matrix_fraction", "flops_per_step"):
        assert _positive(row[key]), key
    assert "steps/s" in proc.stdout and "users_minibatches" in proc.stdout
    refused = subprocess.run([sys.executable, "-m", "ppo_lab.bench.accel", "--variants", "fast"], cwd=ROOT,
                             capture_output=True, text=True, timeout=HANG_S)
    assert refused.returncode == 2 and "--variants fast: one of ['baseline'" in refused.stderr


@pytest.mark.timeout(120)
def test_side_by_side_says_why_it_is_skipped(tmp_path):
    out = tmp_path / "side.json"
    env = {k: v for k, v in os.environ.items() if k != "PPO_LAB_PUREJAXRL"}
    proc = subprocess.run([sys.executable, "-m", "ppo_lab.bench.sidebyside", "--purejaxrl", str(tmp_path), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=110, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "no purejaxrl/ppo.py" in json.loads(out.read_text())["skipped"] and "skipped" in proc.stdout


@pytest.mark.slow
@pytest.mark.timeout(HANG_S + 60)
def test_envpool_threads_sequential_and_parallel(tmp_path):
    """`--envs envpool:<task>`: env-only and training steps/s per thread count (1 and all cores)
    under the env's entry; `--no-processes` skips the timed runs."""
    pytest.importorskip("envpool", reason="needs the envpool extra")
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "ppo_lab.cli", "benchmark", "--quick", "--no-processes",
                           "--envs", "envpool:CartPole-v1", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=HANG_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(out.read_text())
    entry = result["envs"]["envpool:CartPole-v1"]
    assert entry["overrides"][:2] == ["env=envpool", "env.id=CartPole-v1"]
    threads = sorted({"1", str(result["machine"]["cores"])}, key=int)
    for key in ("env_sps_threads", "train_sps_threads"):
        assert list(entry[key]) == threads and all(_positive(v) for v in entry[key].values()), entry[key]
        assert result["envpool:CartPole-v1"][key] == entry[key]
    assert "timed_threads" not in entry and "threads ->" in proc.stdout


def test_the_fresh_process_runs_are_kept_or_removed(tmp_path):
    kept, removed = tmp_path / "kept", tmp_path / "removed"
    for folder in (kept, removed):
        (folder / "01_seed1_cold").mkdir(parents=True)
    result = {"envs": {"envpool:CartPole-v1": {"timed_threads": {"1": 10.0}}}}
    keep_or_remove(kept, True, result, ["envpool:CartPole-v1"])
    assert result["kept"] == str(kept) and (kept / "01_seed1_cold").is_dir()
    keep_or_remove(removed, False, result, ["envpool:CartPole-v1"])
    assert not removed.exists()
    assert result["envs"]["envpool:CartPole-v1"]["timed_threads"] == {"1": 10.0, "run_dirs_removed": "kept only with --keep"}


def test_a_family_task_selects_its_experiment_or_the_family():
    assert env_overrides("envpool:CoinrunEasy-v0") == ["experiment=coinrun"]  # the task's own preset
    assert env_overrides("gymnasium:Acrobot-v1") == ["env=gymnasium", "env.id=Acrobot-v1"]
    assert known_env("envpool:Pong-v5") and not known_env("nosuchfamily:Pong-v5")


def _side_by_side(cpu: dict, lab: list[float], peer: list[float]) -> dict:
    case = {"num_envs": 4, "num_seeds": 1, "lab_layout": {"mode": "seeds", "num_devices": 1},
            "lab_sps": max(lab), "purejaxrl_sps": max(peer), "ratio": max(lab) / max(peer), "bar": 0.95,
            "pass": max(lab) / max(peer) >= 0.95, "samples": {"lab": lab, "purejaxrl": peer}}
    return {"cpu": cpu, "date": "2026-11-28", "jax": "0.10.2", "rounds": len(lab), "cases": {"seed1_envs4": case}}


def test_the_per_cpu_record_keeps_one_entry_per_cpu_and_renders_every_round(tmp_path):
    from ppo_lab.bench import markdown, sidebyside  # noqa: PLC0415 - sidebyside imports jax
    from ppo_lab.host_cpu import cpu_id  # noqa: PLC0415
    amd = {"machine": "x86_64", "vendor": "AuthenticAMD", "model_name": "AMD EPYC", "family": "25", "model": "17", "isa": ["avx2"]}
    intel = {**amd, "vendor": "GenuineIntel", "model_name": "Intel Xeon", "family": "6", "model": "85"}
    record = tmp_path / "benchmark_cpu.json"
    sidebyside.keep_record(record, "sidebyside", _side_by_side(amd, [90_000.0, 100_000.0], [110_000.0, 104_000.0]))
    sidebyside.keep_record(record, "sidebyside", _side_by_side(intel, [50_000.0], [80_000.0]))
    sidebyside.keep_record(record, "sidebyside", _side_by_side(amd, [97_000.0, 99_000.0], [100_000.0, 101_000.0]))  # anew
    cpus = json.loads(record.read_text())["cpus"]
    assert sorted(cpus) == sorted([cpu_id(amd), cpu_id(intel)])
    assert cpus[cpu_id(amd)]["sidebyside"]["cases"]["seed1_envs4"]["samples"]["lab"] == [97_000.0, 99_000.0]
    text = markdown.render_file(record)
    assert "**AMD EPYC** (family 25 model 17)" in text and "**Intel Xeon**" in text
    # The best round of each side: 99,000 / 101,000 = 0.98x; every round's figures listed.
    assert "| 1 seed x 4 envs | 99,000 / 101,000 | **0.98x** (meets 0.95x) | 97k / 100k, 99k / 101k |" in text
    assert "| 1 seed x 4 envs | 50,000 / 80,000 | **0.62x** (below 0.95x) | 50k / 80k |" in text


def test_the_update_parts_are_its_loops_found_in_its_jaxpr_and_shares_of_the_gap():
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415
    from ppo_lab.bench import update_parts  # noqa: PLC0415

    def update(x):
        x, traj = jax.lax.scan(lambda c, _: (c + 1.0, c), x, None, 8)  # the rollout: 8 steps
        _, adv = jax.lax.scan(lambda c, t: (c + t, c), 0.0, traj, reverse=True)  # GAE
        inner = lambda c, _: (c * 0.5, None)  # noqa: E731
        x, _ = jax.lax.scan(lambda c, _: jax.lax.scan(inner, c, None, 2), x + adv.sum(), None, 3)  # 3 epochs of 2
        return x

    def train(x):
        return jax.lax.scan(lambda c, _: (jax.jit(update)(c), None), x, None, 5)[0]  # 5 updates

    body = update_parts.update_body(jax.make_jaxpr(train)(jnp.float32(0)).jaxpr, 5)
    scans = update_parts.find_scans(body, 8, 3)
    assert sorted(scans) == ["epochs", "gae", "rollout"] and scans["gae"].params["reverse"]
    compiled, args = update_parts.scan_us(scans["rollout"])
    assert [a.shape for a in args] == [()] and jax.tree.leaves(compiled(*args))[1].shape == (8,)
    lab = [{"rollout": 30, "gae": 5, "epochs": 50, "update": 100, "without_metrics": 95, "without_guard": 98, "run": 110}]
    peer = [{"rollout": 30, "gae": 5, "epochs": 40, "update": 80, "run": 84}, {"rollout": 31, "gae": 6, "epochs": 41,
                                                                               "update": 82, "run": 83}]
    result = update_parts.breakdown(lab, peer)
    parts = {name: (p["lab_us"], p["purejaxrl_us"], p["share_of_gap"]) for name, p in result["parts"].items()}
    # Best rounds: gap 110 - 83 = 27: epochs 10 of it, metrics 5, guard 2, rest (100 - 92 = 8) less the
    # peer's 5: 3, host 10 less the peer's first call (83 - 80 = 3): 7.
    assert parts["epochs"] == (50, 40, 10 / 27) and parts["metrics"] == (5, 0.0, 5 / 27) and parts["guard"] == (2, 0.0, 2 / 27)
    assert parts["rest"] == (8, 5, 3 / 27) and parts["host"] == (10, 3, 7 / 27) and parts["rollout"][2] == 0
    assert result["gap_us"] == 27 and math.isclose(sum(p[2] for p in parts.values()), 1.0)
