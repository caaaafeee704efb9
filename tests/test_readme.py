"""The README is a path a new user follows: short, and every command in it still works.

Training commands are checked as far as seconds allow: each `python launch.py ...` line's keys
and group options exist, and a single run's config composes and validates; the commands that
run in seconds (`--help`, `--cfg job`, `ppo-lab --help`) are run."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest

from ppo_lab.launching.command_line import check_overrides, config_source

from conftest import ROOT, run_config

README = ROOT / "README.md"
FAST = ("python launch.py --help", "python launch.py experiment=cartpole --cfg job", "ppo-lab --help")


def bash_commands() -> list[str]:
    """Every command line of the README's ```bash blocks, comments stripped."""
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), re.S)
    lines = [line.split("  #")[0].split(" # ")[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def launch_commands() -> list[str]:
    return [c.split("&& ", 1)[-1] for c in bash_commands() if "python launch.py" in c]


def test_readme_is_short_and_starts_with_the_two_commands():
    text = README.read_text()
    assert len(text.splitlines()) < 300
    assert 'pip install -e ".[test]" && python launch.py' in text and 'pip install -e ".[test]" && make test' in text


@pytest.mark.parametrize("command", launch_commands())
def test_every_launch_command_names_real_keys_and_composes(command):
    args = shlex.split(command)[2:]
    overrides = [a for a in args if "=" in a and not a.startswith("-")]
    check_overrides(overrides, *config_source(args))
    if "-m" in args or "-cd" in args or any(o.startswith("hydra/") for o in overrides):
        return  # a multirun's sweeps are not one config; its keys are checked above
    run_config(overrides)


@pytest.mark.parametrize("command", FAST)
def test_the_quick_commands_run(command):
    assert command in "\n".join(bash_commands())
    exe = [sys.executable, "-m", "ppo_lab.cli"] if command.startswith("ppo-lab") else [sys.executable]
    args = shlex.split(command)[1:]
    proc = subprocess.run([*exe, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip()
