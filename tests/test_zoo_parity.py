"""PureJaxRL beside the lab at a preset's settings: the mapping of a lab config to PureJaxRL's
keys (refusals name the lab's key) and, where a PureJaxRL checkout is given
($PPO_LAB_PUREJAXRL), both sides training to finite scores at a toy size."""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import HANG_S, ROOT
from cpu_recordings import recording

from ppo_lab.bench import purejaxrl_peer, zoo_parity
from ppo_lab.bench.configs import compose
from ppo_lab.bench.purejaxrl_settings import (
    CARTPOLE,
    Unexpressible,
    differences,
    lab_overrides,
    network_differences,
    peer_config,
    peer_network_overrides,
)



def test_the_mapping_carries_the_presets_values():
    cfg = compose(["experiment=cartpole", "network.activation=relu", "ppo.anneal_lr=false", "ppo.ent_coef_initial=0.02",
                   "ppo.ent_coef_final=0.02", "ppo.max_grad_norm=0.7"])
    ppo = cfg["ppo"]
    config = peer_config(cfg, continuous=False)
    assert config == {
        "NUM_ENVS": ppo["num_envs"], "NUM_STEPS": ppo["num_steps"], "TOTAL_TIMESTEPS": ppo["total_timesteps"],
        "UPDATE_EPOCHS": ppo["update_epochs"], "NUM_MINIBATCHES": ppo["num_minibatches"], "GAMMA": ppo["gamma"],
        "GAE_LAMBDA": ppo["gae_lambda"], "CLIP_EPS": ppo["clip_eps"], "ENT_COEF": 0.02, "VF_COEF": ppo["vf_coef"],
        "MAX_GRAD_NORM": 0.7, "LR": ppo["lr"], "ANNEAL_LR": False, "ACTIVATION": "relu", "ENV_NAME": "CartPole-v1",
        "DEBUG": False,
    }
    # A time-limit cut is the one difference left at the same network, and it is named.
    assert list(differences(cfg, continuous=False)) == ["ppo.bootstrap_truncation"]


def test_continuous_normalisation_and_a_network_that_differs():
    cfg = compose(["experiment=pendulum"])  # 64-64: PureJaxRL's continuous file hard-codes 256-256
    assert peer_config(cfg, continuous=True)["NORMALIZE_ENV"] is True
    assert "network.hidden_sizes" in differences(cfg, continuous=True)
    at_peer = compose(["experiment=pendulum", *peer_network_overrides(cfg, continuous=True)])
    assert at_peer["network"]["hidden_sizes"] == [256, 256] and "network.hidden_sizes" not in differences(at_peer, True)


def test_purejaxrl_cartpole_settings_in_the_labs_keys_map_back_to_themselves():
    """What the performance suite runs the lab at (bench/sidebyside.py, bench/suite.py)."""
    cfg = compose(lab_overrides(CARTPOLE))
    assert peer_config(cfg, continuous=False) == {**CARTPOLE, "TOTAL_TIMESTEPS": 500_000}
    assert list(differences(cfg, continuous=False)) == ["ppo.bootstrap_truncation"]


def test_a_continuous_preset_runs_at_purejaxrls_network_with_and_without_its_truncation():
    """docs/results.md's Pendulum comparison: the cases lab_as_purejaxrl and lab_at_peer_network."""
    cfg = compose(["experiment=pendulum"])
    labs = zoo_parity.lab_cases(cfg, True, ["experiment=pendulum"], ["lab_as_purejaxrl", "lab_at_peer_network"])
    for case, overrides in labs.items():
        lab = compose(overrides)
        assert network_differences(lab, continuous=True) == {} and lab["experiment"] == "pendulum"
        assert lab["ppo"]["bootstrap_truncation"] is (case == "lab_at_peer_network")


@pytest.mark.parametrize("overrides, key", [
    (["network.recurrent=gru"], "network.recurrent"),
    (["ppo.lr_final=1e-5"], "ppo.lr_final"),
    (["ppo.ent_coef_final=0.0"], "ppo.ent_coef_final"),
    (["ppo.clip_eps_final=0.1"], "ppo.clip_eps_final"),
    (["ppo.value_loss=max_of_means"], "ppo.value_loss"),
    (["ppo.normalize_obs=true"], "ppo.normalize_obs"),
    (["env=foraging"], "env"),
])
def test_what_purejaxrl_cannot_take_is_refused_by_its_key(overrides, key):
    with pytest.raises(Unexpressible) as err:
        peer_config(compose(["experiment=cartpole", *overrides]), continuous=False)
    assert err.value.key == key and str(err.value).startswith(f"{key}=")


def test_a_finished_lab_run_is_read_as_the_lab_side():
    """--lab-run-dir: the run's own config.yaml is what is mapped; its metrics.csv is scored."""
    run_dir = recording(ROOT / "tests" / "fixtures" / "reproduce", "cartpole")
    cfg, _ = zoo_parity.lab_config(argparse.Namespace(experiment="cartpole", overrides=[], lab_run_dir=run_dir))
    assert peer_config(cfg, continuous=False)["NUM_ENVS"] == cfg["ppo"]["num_envs"]
    lab = zoo_parity.lab_result("lab", run_dir)
    assert lab["seeds"] == cfg["num_seeds"] and lab["timesteps"] > 0 and all(math.isfinite(s) for s in lab["score"])
    with pytest.raises(SystemExit, match="not zoo/cartpole"):
        zoo_parity.lab_config(argparse.Namespace(experiment="zoo/cartpole", overrides=[], lab_run_dir=run_dir))


def checkout_or_skip() -> str:
    checkout = os.environ.get(purejaxrl_peer.ENV_VAR)
    if not checkout:
        pytest.skip(f"no PureJaxRL checkout: set ${purejaxrl_peer.ENV_VAR} to one")
    for needed in ("distrax", "chex", "gymnax"):
        if not purejaxrl_peer.installed(needed):
            pytest.skip(f"PureJaxRL needs {needed}, not installed here")
    return checkout


@pytest.mark.timeout(HANG_S + 60)
def test_both_sides_train_to_finite_scores(tmp_path):
    checkout = checkout_or_skip()
    out = tmp_path / "zoo.json"
    proc = subprocess.run([sys.executable, "-m", "ppo_lab.bench.zoo_parity", "--purejaxrl", checkout, "--experiment", "cartpole",
                           "--seeds", "2", "ppo.num_envs=4", "ppo.num_steps=32", "ppo.total_timesteps=256", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=HANG_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(out.read_text())
    assert result["settings"]["purejaxrl"]["NUM_ENVS"] == 4 and result["settings"]["purejaxrl_file"] == "ppo.py"
    cases = {c["label"]: c for c in result["cases"]}
    assert sorted(cases) == ["lab", "purejaxrl"]  # the same network: no lab_at_peer_network case
    for case in cases.values():
        assert case["seeds"] == 2 and case["timesteps"] == 256 and len(case["per_update"][0]) == 2
        assert len(case["score"]) == 2 and all(math.isfinite(s) for s in case["score"]), case["label"]
        assert case["ci_low"] <= case["mean"] <= case["ci_high"]
    assert result["device"]


@pytest.mark.timeout(120)
def test_a_refused_setting_stops_before_training(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "ppo_lab.bench.zoo_parity", "--experiment", "cartpole", "network.recurrent=gru"],
                          cwd=ROOT, capture_output=True, text=True, timeout=110)
    assert proc.returncode == 2 and "network.recurrent" in proc.stderr, proc.stderr[-2000:]
