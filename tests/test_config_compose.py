"""Every config group option composes with Hydra's compose API and validates."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from ppo_lab.config import TORSO_KEYS, validate

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


def _assert_carried_over(resolved: dict, run) -> None:
    """The validated RunConfig holds exactly the composed values: conf/ is the one source, so
    every field comes from a composed key (a field without one would be a second default)."""
    as_list = lambda v: list(v) if isinstance(v, tuple) else v  # noqa: E731
    for section in ("ppo", "train", "eval", "health", "hardware"):
        frozen = getattr(run, section)
        for f in dataclasses.fields(frozen):
            assert f.name in resolved[section], f"{section}.{f.name} is not in the composed config"
            assert as_list(getattr(frozen, f.name)) == as_list(resolved[section][f.name]), (section, f.name)
    network = resolved["network"]
    assert run.network.target == network["_target_"] and run.network.kind == network["kind"]
    assert run.network.activation == network["activation"] and run.network.squash == network["squash"]
    assert (run.network.recurrent, run.network.recurrent_size) == (network["recurrent"], network["recurrent_size"])
    assert {k: as_list(v) for k, v in run.network.torso_kwargs().items()} == {
        k: network[k] for k in TORSO_KEYS if network[k] is not None}
    env = resolved["env"]
    assert run.env.target == env["_target_"] and run.env.check == env.get("check")
    assert {**run.env.options, "_target_": run.env.target, "check": run.env.check,
            **({"evaluations": dict(run.env.evaluations)} if "evaluations" in env else {}),
            **({"scores": dict(run.env.scores)} if "scores" in env else {}),
            **({"metrics": dict(run.env.metrics)} if "metrics" in env else {})} == {"check": None, **env}
    assert dict(run.reward.options) == resolved["reward"]
    # `reward=default` is the env's own reward; the foraging world's is the ground_truth mode, named so.
    own = "ground_truth" if env["name"] == "foraging" and resolved["reward"]["name"] == "default" else None
    assert run.reward.name == (own or resolved["reward"]["name"])
    assert {name: {"_target_": spec.target, **spec.options} for name, spec in run.logger.items()} == resolved["logger"]
    assert run.experiment == resolved["experiment"] and run.num_seeds == resolved["num_seeds"]


# What each group's option must show up as in the validated config.
OPTION_FIELD = {
    "env": lambda run: run.env.name,
    "reward": lambda run: run.reward.options["name"],
    "network": lambda run: run.network.kind,
    "hardware": lambda run: run.hardware.platform,
    "logger": lambda run: next(iter(run.logger)),
    "experiment": lambda run: run.experiment,
}


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
        _assert_carried_over(resolved, run)
        if group in OPTION_FIELD:
            assert OPTION_FIELD[group](run) == option, (group, option)


@pytest.mark.slow
def test_full_cross_product_of_structural_groups():
    """env x network x hardware x ppo: the combinations a user composes most."""
    for env in options("env"):
        for network in options("network"):
            for hardware in options("hardware"):
                for ppo in options("ppo"):
                    cfg = compose_cfg([f"env={env}", f"reward={_valid_reward_for(env)}", f"network={network}", f"hardware={hardware}", f"ppo={ppo}"])
                    resolved = OmegaConf.to_container(cfg, resolve=True)
                    run = validate(resolved)
                    _assert_carried_over(resolved, run)
                    assert (run.env.name, run.network.kind, run.hardware.platform) == (env, network, hardware)


def test_logger_list_composes():
    cfg = compose_cfg(["logger=[" + ",".join(options("logger")) + "]"])
    assert set(cfg.logger) == set(options("logger"))


def test_experiment_overrides_only_what_changes():
    cfg = compose_cfg(["experiment=cartpole"])
    assert cfg.env.name == "cartpole" and cfg.experiment == "cartpole"
    assert cfg.ppo.gamma == compose_cfg([]).ppo.gamma


def test_hardware_presets_size_num_envs():
    assert compose_cfg(["hardware=gpu"]).ppo.num_envs > compose_cfg(["hardware=cpu"]).ppo.num_envs


def test_validation_imports_no_jax():
    """Validating the default config (after the run-directory and analysis layers are loaded)
    runs every env check without importing jax: the hardware settings can still apply."""
    code = f"""
import json, sys
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
import ppo_lab.rundir, ppo_lab.analysis
from ppo_lab.config import validate
with initialize_config_dir(config_dir={str(CONF)!r}, version_base="1.3"):
    run = validate(OmegaConf.to_container(compose(config_name="config"), resolve=True))
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("jax", "jaxlib", "flax", "optax", "gymnax"))
print(json.dumps({{"env": run.env.name, "heavy": heavy}}))
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=CONF.parent, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"env": "foraging", "heavy": []}


@pytest.mark.parametrize(
    "overrides, key",
    [
        (["env=foraging", "reward=ground_truth", "env.grid_size=4"], "env.grid_size"),
        (["env=foraging", "reward=proxy", "reward.clip=-1"], "reward.clip"),
        (["env=foraging", "+env.colour=red"], "env.colour"),
        (["env=cartpole", "reward=proxy"], "reward"),
        (["env=gymnax", "env.gymnax_id=null"], "env.gymnax_id"),
    ],
)
def test_env_checks_run_at_validation(overrides, key):
    from ppo_lab.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        validate(OmegaConf.to_container(compose_cfg(overrides), resolve=True))
    assert err.value.key == key
