"""Bad input: one clear error naming key, value and what is valid, before any compile,
with a non-zero exit and nothing written that could be mistaken for a result."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from ppo_lab.config import validate
from ppo_lab.errors import ConfigError

from conftest import ROOT, TINY, launch


def _resolved(overrides):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return OmegaConf.to_container(compose(config_name="config", overrides=overrides), resolve=True)


CASES = [
    (["ppo.lr=0"], "ppo.lr", "> 0"),
    (["ppo.lr=-1e-3"], "ppo.lr", "> 0"),
    (["ppo.gamma=1.5"], "ppo.gamma", "(0, 1]"),
    (["ppo.gamma=0"], "ppo.gamma", "(0, 1]"),
    (["ppo.num_envs=3", "ppo.num_steps=5", "ppo.num_minibatches=4"], "ppo.num_minibatches", "divisor"),
    (["ppo.num_envs=0"], "ppo.num_envs", ">= 1"),
    (["ppo.total_timesteps=-100"], "ppo.total_timesteps", "positive"),
    (["num_seeds=0"], "num_seeds", ">= 1"),
    (["env.name=atari"], "env.name", "cartpole"),
    (["ppo.lr=fast"], "ppo.lr", "number"),
    (["network.activation=sigmoid"], "network.activation", "tanh"),
    (["train.chunk_updates=0"], "train.chunk_updates", ">= 1"),
]


@pytest.mark.parametrize("overrides, key, valid", CASES)
def test_validation_names_key_value_and_valid_range(overrides, key, valid):
    with pytest.raises(ConfigError) as err:
        validate(_resolved(overrides))
    message = str(err.value)
    assert err.value.key == key
    assert key in message and valid in message
    # The value named is the one given on the command line.
    from hydra.core.override_parser.overrides_parser import OverridesParser

    given = {o.key_or_group: o.value() for o in OverridesParser.create().parse_overrides(overrides)}
    assert err.value.value == given[key] and f"{key}={err.value.value!r}" in message


def _assert_nothing_written(run_dir):
    assert not run_dir.exists() or not any(
        (run_dir / name).exists() for name in ("config.yaml", "metrics.csv", "summary.json", "checkpoints")
    )


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (["ppo.lr=0"], "ppo.lr=0.0"),
        (["ppo.gamma=2"], "ppo.gamma=2.0"),
        (["num_seeds=0"], "num_seeds=0"),
        (["env.name=atari"], "env.name='atari'"),
        (["ppo.num_envs=3", "ppo.num_steps=5", "ppo.num_minibatches=4"], "ppo.num_minibatches=4"),
    ],
)
def test_launch_exits_nonzero_with_clear_message(tmp_path, overrides, expected):
    run_dir = tmp_path / "run"
    proc = launch([*TINY, *overrides], run_dir, check=False, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert expected in proc.stderr
    assert "compiled" not in proc.stdout + proc.stderr
    _assert_nothing_written(run_dir)


def test_unknown_group_option_lists_choices(tmp_path):
    proc = launch(["env=atari"], tmp_path / "run", check=False, timeout=120)
    assert proc.returncode != 0
    assert "Could not find 'env/atari'" in proc.stderr
    assert "cartpole" in proc.stderr  # Hydra lists the available options


def _absent_accelerator() -> str:
    """An accelerator this machine lacks: gpu, unless JAX finds one here (then tpu)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    code = "import jax; print(jax.devices()[0].platform)"
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    return "tpu" if found.stdout.strip() == "gpu" else "gpu"


def test_missing_accelerator_fails_without_silent_cpu_run(tmp_path):
    run_dir = tmp_path / "run"
    absent = _absent_accelerator()
    proc = launch([*TINY, f"hardware={absent}", "ppo.num_envs=4"], run_dir, check=False, timeout=120)
    assert proc.returncode == 2
    assert f"hardware={absent} was asked for" in proc.stderr and "allow_fallback" in proc.stderr
    _assert_nothing_written(run_dir)


def test_bad_input_in_an_existing_run_dir_loses_nothing(tmp_path, tiny):
    run_dir = tmp_path / "run"
    launch(tiny, run_dir)
    before = (run_dir / "metrics.csv").read_bytes(), (run_dir / "summary.json").read_bytes()
    proc = launch([*tiny, "ppo.lr=-1"], run_dir, check=False, timeout=120)
    assert proc.returncode == 2
    assert ((run_dir / "metrics.csv").read_bytes(), (run_dir / "summary.json").read_bytes()) == before
