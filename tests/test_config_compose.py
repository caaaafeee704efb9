"""Every config group option composes with Hydra's compose API and validates."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from ppo_lab.config import validate

CONF = Path(__file__).resolve().parent.parent / "conf"
GROUPS = ["env", "reward", "ppo", "network", "hardware", "logger", "train", "experiment"]


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def compose_cfg(overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def test_every_group_has_options():
    for group in GROUPS:
        assert options(group), f"conf/{group} is empty"


def _valid_reward_for(env: str) -> str:
    return "ground_truth" if env == "foraging" else "default"


@pytest.mark.parametrize("group", GROUPS)
def test_each_option_composes_and_validates(group):
    for option in options(group):
        overrides = [f"{group}={option}"]
        if group == "env":
            overrides.append(f"reward={_valid_reward_for(option)}")
        if group == "reward" and option != "default":
            overrides.append("env=foraging")
        cfg = compose_cfg(overrides)
        resolved = OmegaConf.to_container(cfg, resolve=True)
        run = validate(resolved)
        assert run.ppo.num_envs >= 1


def test_full_cross_product_of_structural_groups():
    """env x network x hardware x ppo: the combinations a user composes most."""
    for env in options("env"):
        for network in options("network"):
            for hardware in options("hardware"):
                for ppo in options("ppo"):
                    cfg = compose_cfg([f"env={env}", f"reward={_valid_reward_for(env)}", f"network={network}", f"hardware={hardware}", f"ppo={ppo}"])
                    validate(OmegaConf.to_container(cfg, resolve=True))


def test_logger_list_composes():
    cfg = compose_cfg(["logger=[" + ",".join(options("logger")) + "]"])
    assert set(cfg.logger) == set(options("logger"))


def test_experiment_overrides_only_what_changes():
    cfg = compose_cfg(["experiment=cartpole"])
    assert cfg.env.name == "cartpole" and cfg.experiment == "cartpole"
    assert cfg.ppo.gamma == compose_cfg([]).ppo.gamma


def test_hardware_presets_size_num_envs():
    assert compose_cfg(["hardware=gpu"]).ppo.num_envs > compose_cfg(["hardware=cpu"]).ppo.num_envs
