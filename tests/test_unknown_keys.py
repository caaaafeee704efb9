"""Unknown keys and group options are refused before anything compiles, naming the key meant;
a user's own keys go under `tags`. Nothing here trains."""

from __future__ import annotations

import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from ppo_lab.config import typed_config, validate
from ppo_lab.config_keys import UnknownKeyError, group_options
from ppo_lab.errors import ConfigError
from ppo_lab.launching.command_line import UnknownOptionError, check_overrides
from ppo_lab.launching.help import help_text

from conftest import ROOT, TINY, compose_config


@pytest.mark.parametrize("override, meant", [
    ("+ppo.lrr=0.1", "ppo.lr"),
    ("ppo.lrr=0.1", "ppo.lr"),
    ("+num_seed=2", "num_seeds"),
    ("+lr=0.1", "ppo.lr"),
    ("train.duration_mins=1", "train.duration_min"),
    ("ppo.lrr=0.1,0.2", "ppo.lr"),  # a sweep
    ("+logger.mlflow.tracking_url=x", "logger.mlflow.tracking_uri"),
])
def test_an_unknown_key_names_the_closest(override, meant):
    with pytest.raises(UnknownKeyError) as err:
        check_overrides([override])
    assert meant in err.value.suggestions and f"did you mean {meant}" in str(err.value)


@pytest.mark.parametrize("overrides", [["env=cartpole", "env.lenght=12"], ["experiment=cartpole", "env.lenght=12"]])
def test_a_typo_in_an_env_key_searches_the_selected_env(overrides):
    with pytest.raises(UnknownKeyError) as err:
        check_overrides(overrides)
    message = str(err.value)
    assert "energy_start" not in message and err.value.suggestions == []  # the foraging world's, not cartpole's
    assert "no key of env=cartpole is close; it reads env.check, env.gymnax_id, env.metrics, env.name, env.scores" in message
    with pytest.raises(UnknownKeyError, match="did you mean env.gymnax_id"):
        check_overrides(["env=cartpole", "env.gymnax_di=CartPole-v1"])
    with pytest.raises(UnknownKeyError, match="did you mean env.energy_start"):  # the default env: the foraging world
        check_overrides(["env.energy_strat=3"])


def test_an_unknown_option_lists_the_choices():
    with pytest.raises(UnknownOptionError, match="did you mean mlflow") as err:
        check_overrides(["logger=[csv,mlfow]"])
    assert "tensorboard" in str(err.value)
    with pytest.raises(UnknownOptionError, match="cartpole"):
        check_overrides(["env=cartpole,atari"])
    with pytest.raises(UnknownOptionError, match="did you mean mlflow"):  # a sweep of lists of options
        check_overrides(["logger=[csv],[csv,mlfow]"])


def test_reward_modes_are_offered_and_taken_for_their_env_alone():
    with pytest.raises(UnknownOptionError) as err:
        check_overrides(["env=cartpole", "reward=prox"])
    assert str(err.value) == "unknown option reward=prox: valid: default"
    with pytest.raises(UnknownOptionError, match="did you mean proxy"):
        check_overrides(["env=foraging", "reward=prox"])
    [line] = [line for line in help_text(["env=cartpole"]).splitlines() if line.startswith("  reward ")]
    assert line.endswith(": default (now default)")
    # A mode names its env (reward.env): refused for another, also one whose check reads no reward.
    resolved = OmegaConf.to_container(compose_config(["env=foraging", "reward=proxy"]), resolve=True)
    cartpole = OmegaConf.to_container(compose_config(["env=cartpole"]), resolve=True)["env"]
    with pytest.raises(ConfigError, match="a reward mode of env=cartpole") as err:
        validate({**resolved, "env": {**cartpole, "check": None}})
    assert err.value.key == "reward"


def test_known_keys_groups_and_own_tags_pass():
    for command in (["+tags.owner=me", "experiment=cartpole", "hydra/launcher=vmap", "ppo.lr=1e-3,3e-4", "hydra.run.dir=x"],
                    ["env=envpool", "env.id=x"], ["env=foraging", "+fidelity=reference", "reward=proxy,ground_truth"],
                    ["logger=[csv,mlflow]", "logger.mlflow.tags={a:1}"]):
        check_overrides(command)
    # A sweep of mappings over a group's keys (each sets some of its keys), not of its options.
    check_overrides(["pbt={exploit: false},{exploit: true, constraints: {train/entropy: {min: 1.0}}}", "logger=[csv],[csv,mlflow]"])


def test_validation_refuses_an_added_key_and_keeps_tags():
    with pytest.raises(ConfigError, match="did you mean ppo.lr"):
        validate(OmegaConf.to_container(compose_config([*TINY, "+ppo.lrr=0.1"]), resolve=True))
    run = validate(OmegaConf.to_container(compose_config([*TINY, "+tags.owner=me"]), resolve=True))
    assert run.tags == {"owner": "me"}
    # A key Hydra added to a closed section of a config passed in as plain dicts: refused alike.
    with pytest.raises(UnknownKeyError, match="did you mean network.activation"):
        validate({**run.resolved, "network": {**run.resolved["network"], "activaton": "relu"}})


@pytest.mark.parametrize("group", ["experiment", "env", "fidelity"])
def test_every_shipped_config_has_only_known_keys(group):
    """No false alarm: every experiment, env and fidelity cell of conf/ composes into the schema."""
    for option in group_options(group):
        prefix = "+" if group == "fidelity" else ""
        overrides = [f"{prefix}{group}={option}"] + (["env=foraging"] if group == "fidelity" else [])
        check_overrides(overrides)
        typed_config(OmegaConf.to_container(compose_config(overrides), resolve=False))
    assert group_options("env")


@pytest.mark.parametrize("args", [
    ["+ppo.lrr=0.1"],
    ["ppo.lrr=0.1"],
    ["-m", "+ppo.lrr=0.1,0.2"],
])
def test_launch_refuses_a_typo_with_exit_2_once(args, tmp_path):
    proc = subprocess.run([sys.executable, "launch.py", "experiment=cartpole", *args, f"hydra.run.dir={tmp_path}/run",
                           f"hydra.sweep.dir={tmp_path}/sweep"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.count("error:") == 1 and "did you mean ppo.lr" in proc.stderr
    assert "Traceback" not in proc.stderr and "HYDRA_FULL_ERROR" not in proc.stderr
    assert not (tmp_path / "run").exists() and not (tmp_path / "sweep").exists()


def test_launch_refuses_an_unknown_group_option(tmp_path):
    proc = subprocess.run([sys.executable, "launch.py", "env=atari", f"hydra.run.dir={tmp_path}/run"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("error:") == 1 and "cartpole" in proc.stderr


def test_a_sweep_file_or_an_optuna_space_with_a_typo_launches_nothing(tmp_path):
    """Keys from a sweep file's params are checked with the command line's, before any job; an
    Optuna search space's too (a typo would tune nothing)."""
    (tmp_path / "typo.yaml").write_text("defaults:\n  - config\n  - _self_\nhydra:\n  sweeper:\n"
                                         "    params:\n      +ppo.lrr: 0.1,0.2\n")
    (tmp_path / "tune.yaml").write_text("defaults:\n  - config\n  - override hydra/sweeper: optuna\n  - _self_\n"
                                        "hydra:\n  sweeper:\n    params:\n      ppo.lrr: interval(1e-4, 1e-2)\n")
    for name in ("typo", "tune"):
        with pytest.raises(UnknownKeyError, match="did you mean ppo.lr"):
            check_overrides(["experiment=cartpole"], tmp_path, name)
    proc = subprocess.run([sys.executable, "launch.py", "-cd", str(tmp_path), "-cn", "typo", "-m",
                           f"hydra.sweep.dir={tmp_path}/sweep"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "did you mean ppo.lr" in proc.stderr and not (tmp_path / "sweep").exists()


def test_a_key_of_an_unselected_option_says_which_group(tmp_path):
    proc = subprocess.run([sys.executable, "launch.py", "experiment=cartpole", "env.grid_size=8", f"hydra.run.dir={tmp_path}/run"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("error:") == 1
    assert "env.grid_size is not in this config" in proc.stderr and "env=OPTION" in proc.stderr
