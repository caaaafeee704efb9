"""Run dirs written by an older lab: the keys added since are filled in as the lab behaved
before them (evaluation reads them), and one this lab cannot complete is refused cleanly."""

from __future__ import annotations

import copy
import subprocess
import sys

from omegaconf import OmegaConf

from conftest import ROOT, compose_config

from ppo_lab.config import validate
from ppo_lab.rundir.older_configs import MOVED_PARTS, added_as_before, complete


def _current(*overrides) -> dict:
    return OmegaConf.to_container(compose_config(["env=cartpole", "logger=[csv,mlflow]", *overrides]), resolve=True)


def _strip(config: dict) -> dict:
    """The config as a lab before the wiring, memory, continuous and fidelity keys saved it."""
    old = copy.deepcopy(config)
    for key in ("_target_", "check", "evaluations"):
        old["env"].pop(key, None)
    old["network"].pop("_target_")
    old["network"].pop("recurrent_size")
    old["network"].pop("head_hidden_gain")
    for options in old["logger"].values():
        options.pop("_target_")
    for dotted, before in added_as_before().items():  # those at the value they were added at
        *section, key = dotted.split(".")
        body = old[section[0]] if section else old
        if body.get(key, before) == before:
            body.pop(key, None)
    return old


def test_an_older_config_is_completed_to_the_current_one_with_the_old_behaviour():
    now = _current()
    old = _strip(now)
    assert old != now
    assert complete(old) == now  # every new key's default is its old behaviour
    assert validate(complete(old)).network.recurrent is None
    assert old == _strip(now), "complete() must not change its argument"


def test_the_foraging_worlds_added_keys_are_completed_too():
    now = _current("env=foraging", "reward=ground_truth", "network=cnn")
    assert "respawn_in_place" in now["env"]
    assert complete(_strip(now)) == now


def test_a_saved_evaluation_whose_module_moved_is_found_where_it_lives_now():
    now = _current("env=foraging", "reward=ground_truth", "network=cnn")
    old = copy.deepcopy(now)
    old["env"]["evaluations"] = {"survival": "ppo_lab.run.survival.evaluate_policy"}  # before it moved
    assert complete(old)["env"]["evaluations"] == now["env"]["evaluations"]
    assert validate(complete(old)).env.evaluations["survival"] == MOVED_PARTS["ppo_lab.run.survival.evaluate_policy"]


def test_a_key_the_older_config_has_is_kept_as_saved():
    old = _strip(_current())
    old["network"]["hidden_sizes"] = [8]
    old["env"]["gymnax_id"] = "CartPole-v1"
    done = complete(old)
    assert done["network"]["hidden_sizes"] == [8] and done["network"]["_target_"] == "ppo_lab.networks.MLPTorso"


def test_evaluating_a_run_dir_too_old_to_complete_says_which_key_and_no_traceback(tmp_path):
    run_dir = tmp_path / "format1"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "config.yaml").write_bytes((ROOT / "tests" / "fixtures" / "format1_run" / "config.yaml").read_bytes())
    proc = subprocess.run([sys.executable, "-m", "ppo_lab.cli", "evaluate", str(run_dir)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "the key is missing" in proc.stderr and "Traceback" not in proc.stderr
