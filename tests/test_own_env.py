"""A user's own env outside the lab, as docs/envs.md shows it: the page's example written into a
folder of its own (module on PYTHONPATH, YAML in its own config folder on Hydra's search path)
trains through launch.py; then every command that loads the run finds it again from another
folder without that PYTHONPATH, through what the run recorded (manifest.json `user_parts`)."""

from __future__ import annotations

import json
import os
import sys

import pytest
from PIL import Image

from conftest import launch, ppo_lab, run_cli, write_docs_env
from ppo_lab import config_keys
from ppo_lab.config_keys import UnknownKeyError
from ppo_lab.launching.command_line import UnknownOptionError, check_overrides
from ppo_lab.launching.help import help_text

# Tiny: 3 updates of 4 envs x 8 steps, two seeds over two CPU devices (so a backend started
# before the hardware settings, by a check that imports jax, would show as one device).
CORRIDOR = ["env=corridor", "env.length=4", "env.max_steps=8", "num_seeds=2", "hardware.host_devices=2",
            "ppo.num_envs=4", "ppo.num_steps=8", "ppo.total_timesteps=96", "ppo.num_minibatches=2",
            "ppo.update_epochs=1", "train.chunk_updates=1", "eval.episodes=2"]


def searchpath(folder) -> str:
    return f"hydra.searchpath=[file://{folder / 'conf'}]"


@pytest.mark.slow
def test_the_docs_env_trains_outside_the_lab_and_every_command_finds_it(tmp_path, capsys):
    mine = write_docs_env(tmp_path / "my_lab")
    run_dir, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    elsewhere.mkdir()
    user_path = os.pathsep.join([str(mine), os.environ.get("PYTHONPATH", "")])
    proc = launch([*CORRIDOR, searchpath(mine)], run_dir, env={**os.environ, "PYTHONPATH": user_path})
    assert "before the hardware settings" not in proc.stdout + proc.stderr  # the check imports no jax
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["devices"]["local_count"] == 2
    assert manifest["user_parts"] == {"config_dirs": [str(mine / "conf")], "import_dirs": {"my_envs": str(mine)}}

    evaluated = ppo_lab(["evaluate", run_dir], elsewhere)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert json.loads(evaluated.stdout)["seeds"] == [0, 1]
    reproduced = ppo_lab(["reproduce", run_dir, "--updates", "2", "--out", tmp_path / "again"], elsewhere)
    assert reproduced.returncode == 0 and "identical" in reproduced.stdout, reproduced.stdout + reproduced.stderr[-3000:]
    plots = run_cli(["plots", run_dir], capsys)  # reads the run's files alone: no part to find
    assert plots.returncode == 0 and (run_dir / "curves.png").exists(), plots.stderr
    # The corridor draws itself (the page's render_episode): replay writes a GIF of its frames.
    gif = tmp_path / "corridor.gif"
    replayed = ppo_lab(["replay", run_dir, "--out", gif, "--cell-px", "8"], elsewhere)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr[-3000:]
    with Image.open(gif) as frames:
        assert frames.size == (4 * 8, 8) and frames.n_frames >= 2  # env.length=4 cells of 8 px; reset + steps

    # The user's folder moved: the missing module is named with the folders searched (the
    # recorded one among them), never a `pip install` of a guessed name.
    mine.rename(tmp_path / "moved")
    lost = ppo_lab(["evaluate", run_dir], elsewhere)
    assert lost.returncode == 2 and "Traceback" not in lost.stderr, lost.stderr[-3000:]
    assert "no module named 'my_envs'" in lost.stderr and f"{mine} (no such folder)" in lost.stderr
    assert "pip install" not in lost.stderr


def test_options_and_keys_of_a_users_config_folder_are_valid(tmp_path, monkeypatch):
    """Its options pass the option check and are suggested for typos; so are its keys."""
    monkeypatch.setattr(config_keys, "_user_config_dirs", [])  # this test's folders alone, dropped after
    monkeypatch.setattr(sys, "path", list(sys.path))  # and the project folder a config folder brings
    mine = write_docs_env(tmp_path / "my_lab")
    with pytest.raises(UnknownOptionError):
        check_overrides(["env=corridor"])
    check_overrides(["env=corridor", "env.length=4", searchpath(mine)])
    with pytest.raises(UnknownOptionError, match="did you mean corridor"):
        check_overrides(["env=corridr"])
    with pytest.raises(UnknownKeyError, match="did you mean env.length"):
        check_overrides(["env=corridor", "env.lenght=4"])  # the selected env's keys are suggested
    assert config_keys.user_config_dirs() == [mine / "conf"]
    # An experiment preset of the user's selects the env: Hydra says which, its keys are suggested.
    (mine / "conf" / "experiment").mkdir()
    (mine / "conf" / "experiment" / "mine.yaml").write_text("# @package _global_\ndefaults:\n  - override /env: corridor\n")
    with pytest.raises(UnknownKeyError, match="did you mean env.length"):
        check_overrides(["experiment=mine", "env.lenght=4", searchpath(mine)])
    # --help composes the command's config, the search path's folder among its options
    [line] = [line for line in help_text(["experiment=mine", searchpath(mine)]).splitlines() if line.startswith("  env ")]
    assert "corridor, " in line and line.endswith("(now corridor)")
