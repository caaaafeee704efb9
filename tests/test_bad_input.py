"""Bad input: one clear error naming key, value and what is valid, before any compile,
with a non-zero exit and nothing written that could be mistaken for a result."""

from __future__ import annotations

import json
import shutil

import pytest

from ppo_lab import cli
from ppo_lab.config import validate
from ppo_lab.errors import ConfigError

from conftest import TINY, compose_config, launch, resolved_config, run_cli, run_files, train_run


_resolved = resolved_config


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
def test_train_refuses_before_building_anything(tmp_path, overrides, expected):
    run_dir = tmp_path / "run"
    with pytest.raises(ConfigError) as err:
        train_run([*TINY, *overrides], run_dir)
    assert expected in str(err.value)
    assert not run_dir.exists()


def test_launch_exits_2_with_the_message_and_no_run_dir(tmp_path):
    """What a user sees: `error: ...` on stderr, exit 2, and no run dir left behind."""
    run_dir = tmp_path / "run"
    proc = launch([*TINY, "ppo.num_envs=3", "ppo.num_steps=5", "ppo.num_minibatches=4"], run_dir, check=False, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "error: invalid config: ppo.num_minibatches=4" in proc.stderr
    assert "compiled" not in proc.stdout + proc.stderr
    assert not run_dir.exists()


def test_unknown_group_option_lists_choices():
    with pytest.raises(Exception) as err:
        compose_config(["env=atari"])
    assert "Could not find 'env/atari'" in str(err.value)
    assert "cartpole" in str(err.value)  # Hydra lists the available options


def _absent_accelerator() -> str:
    """An accelerator this machine lacks: gpu, unless JAX finds one here (then tpu)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    code = "import jax; print(jax.devices()[0].platform)"
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    return "tpu" if found.stdout.strip() == "gpu" else "gpu"


@pytest.mark.slow
def test_missing_accelerator_fails_without_silent_cpu_run(tmp_path):
    run_dir = tmp_path / "run"
    absent = _absent_accelerator()
    proc = launch([*TINY, f"hardware={absent}", "ppo.num_envs=4"], run_dir, check=False, timeout=120)
    assert proc.returncode == 2
    assert f"hardware={absent} was asked for" in proc.stderr and "allow_fallback" in proc.stderr
    _assert_nothing_written(run_dir)


HALF = [*TINY, "ppo.total_timesteps=1024"]  # 16 updates


@pytest.fixture(scope="module")
def _trained(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("trained") / "run"
    train_run(HALF, run_dir)
    return run_dir


@pytest.fixture
def trained(_trained, tmp_path):
    """A copy of a finished 16-update run (trained once per module)."""
    run_dir = tmp_path / "run"
    shutil.copytree(_trained, run_dir)
    return run_dir


@pytest.mark.slow
def test_bad_input_in_an_existing_run_dir_loses_nothing(trained):
    before = run_files(trained)
    with pytest.raises(ConfigError):
        train_run([*HALF, "ppo.lr=-1"], trained)
    assert run_files(trained) == before


# --- a run directory keeps one config ---------------------------------------------------------

@pytest.mark.slow
def test_relaunch_with_another_training_config_is_refused_naming_the_key(trained):
    before = run_files(trained)
    proc = launch([*HALF, "ppo.lr=0.01", "ppo.gae_lambda=0.9"], trained, check=False, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "ppo.lr: 0.00025 -> 0.01" in proc.stderr and "ppo.gae_lambda: 0.95 -> 0.9" in proc.stderr
    assert "allow_config_change=true" in proc.stderr
    assert "compiled" not in proc.stdout + proc.stderr
    assert run_files(trained) == before
    assert not (trained / "config_history.jsonl").exists()


def test_relaunching_a_completed_run_says_so_and_exits_0_without_compiling(trained):
    before = run_files(trained)
    proc = launch(HALF, trained, timeout=120)
    assert f"{trained} is complete (total_timesteps reached, 16 updates per seed): nothing to train" in proc.stdout
    assert "compiled" not in proc.stdout + proc.stderr  # nothing built, nothing compiled
    assert run_files(trained) == before  # nothing written


@pytest.mark.slow
def test_allowed_config_change_resumes_and_is_recorded(trained, capsys):
    from ppo_lab.rundir import read_config, read_config_history

    s = train_run([*TINY, "ppo.lr=0.01", "allow_config_change=true"], trained)
    assert s.status == "completed" and s.resumed_from == 16 and s.updates == 32
    assert read_config(trained)["ppo"]["lr"] == 0.01
    [entry] = read_config_history(trained)
    assert entry["from_update"] == 16
    assert entry["changes"] == {"ppo.lr": [0.00025, 0.01], "ppo.total_timesteps": [1024, 2048]}
    # `ppo-lab reproduce` re-runs each span with the config that trained it: identical.
    again = trained.parent / "again"
    assert cli.main(["reproduce", str(trained), "--updates", "32", "--out", str(again)]) == 0, capsys.readouterr()
    assert "identical: 32 rows" in capsys.readouterr().out
    assert read_config_history(again) == [entry]
    # Later relaunches compare with the config now in force: the same config has nothing to
    # train (the run is complete); another evaluation resumes from the final checkpoint.
    assert train_run([*TINY, "ppo.lr=0.01"], trained).skipped
    assert train_run([*TINY, "ppo.lr=0.01", "eval.episodes=2"], trained).resumed_from == 32


@pytest.mark.slow
def test_stopping_budget_and_bookkeeping_may_differ(trained):
    free = ["train.duration_min=5", "train.patience=3", "checkpoint.every_min=1", "eval.episodes=2",
            "health.kl_max=0.1", "train.chunk_updates=4", "logger=[csv]"]
    s = train_run([*HALF, *free], trained)
    assert s.status == "completed" and s.resumed_from == 16
    assert not (trained / "config_history.jsonl").exists()


@pytest.mark.slow
def test_resume_refuses_a_different_env_shape_even_when_allowed(trained):
    from ppo_lab.run.resume import ResumeError

    before = run_files(trained)
    with pytest.raises(ResumeError, match=r"ppo.num_envs: 4 -> 8") as err:
        train_run([*TINY, "ppo.num_envs=8", "ppo.total_timesteps=4096", "allow_config_change=true"], trained)
    assert "new run directory" in str(err.value)
    assert run_files(trained) == before


@pytest.mark.slow
def test_resume_from_another_run_follows_the_same_rule(trained, tmp_path):
    from ppo_lab.rundir import read_config_history
    from ppo_lab.run.resume import ResumeError

    second = tmp_path / "second"
    with pytest.raises(ResumeError, match=r"resume=.*run.*\n  ppo.clip_eps: 0.2 -> 0.3"):
        train_run([*HALF, "ppo.clip_eps=0.3", f"resume={trained}"], second)
    assert not second.exists()
    s = train_run([*HALF, "ppo.clip_eps=0.3", f"resume={trained}", "allow_config_change=true"], second)
    assert s.resumed_from == 16 and s.resume_source == str(trained)
    [entry] = read_config_history(second)
    assert entry["source"] == str(trained) and entry["changes"] == {"ppo.clip_eps": [0.2, 0.3]}


def test_a_logger_that_cannot_start_fails_the_run_in_summary(tmp_path):
    run_dir = tmp_path / "run"
    with pytest.raises(ConfigError, match="logger.wandb.mode"):
        train_run([*TINY, "logger=[csv,wandb]", "logger.wandb.mode=sometimes"], run_dir)
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["status"] == "failed" and s["stop_reason"] == "logger" and "logger.wandb.mode" in s["error"]
    assert not (run_dir / "checkpoints").exists()
    assert not (run_dir / "run.lock").exists(), "a failed run releases its run dir's lock"


def test_check_env_given_an_override_for_its_target_names_the_command_it_meant(capsys):
    refused = run_cli(["check-env", "env=cartpole"], capsys)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "not an override: ppo-lab check-env cartpole [KEY=VALUE ...]" in refused.stderr
