"""`ppo-lab replay RUN_DIR`: one episode of a trained agent as a GIF, drawn by its env (the
foraging world, gymnax's CartPole); an env without a renderer is refused."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from conftest import ROOT, TINY, launch, train_run
from ppo_lab.envs import cartpole_frames
from ppo_lab.envs.foraging.frames import COLOURS, PAD, PANEL_W
from ppo_lab.envs.rare_actions.game import build as build_rare_actions  # an env without a renderer
from ppo_lab.run import replay as replay_command

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

GRID = 16
FORAGING = [
    "env=foraging", "reward=ground_truth", "network=mlp",
    f"env.grid_size={GRID}", "env.food_min=4", "env.food_max=8", "env.poison_min=4", "env.poison_max=8",
    "env.max_steps=32",
    # The programs of test_bitwise's foraging run (and its reproduce recording): one compile in
    # the suite, not two (a foraging chunk is about 8 s of a loaded 2-core machine).
    "ppo.num_envs=4", "ppo.num_steps=16", "ppo.total_timesteps=1024", "ppo.num_minibatches=2",
    "ppo.update_epochs=2", "train.chunk_updates=4", "eval.episodes=2", "hardware.host_devices=1",
    "~env.evaluations.survival",  # a replay needs the checkpoint, not the survival evaluation
]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("replay") / "run"
    launch(FORAGING, run_dir=path)
    return path


def replay(*args, timeout: float = 120):
    return subprocess.run([sys.executable, "-m", "ppo_lab.cli", "replay", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def frames(path):
    with Image.open(path) as im:
        out = []
        for i in range(im.n_frames):
            im.seek(i)
            out.append(np.asarray(im.convert("RGB")))
        return out


def has_colour(frame: np.ndarray, colour) -> bool:
    return bool(np.all(frame == np.asarray(colour, np.uint8), axis=-1).any())


def test_replay_gif(run_dir, tmp_path):
    proc = replay(run_dir, "--steps", 20, "--cell-px", 12)
    assert proc.returncode == 0, proc.stderr[-3000:]
    gif = run_dir / "replay_seed0.gif"
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == str(gif) and gif.exists()
    m = re.search(r"(\d+) steps, (\d+) frames, food (\d+), poison (\d+), .*died: (yes|no)", lines[-1])
    assert m, lines[-1]
    steps = int(m.group(1))
    # At most 20 steps; fewer only if the agent died (the episode cap is 32).
    assert steps == 20 or (steps < 20 and m.group(5) == "yes")

    imgs = frames(gif)
    assert len(imgs) == steps + 1  # frame 0: the state after reset, then one frame per step
    world_px = GRID * 12
    height, width = imgs[0].shape[:2]
    assert width == PAD + world_px + PAD + PANEL_W + PAD
    assert height >= PAD + world_px + PAD
    # The whole 16x16 grid is drawn: every item, the agent and the view are in the first frame.
    for name in ("food", "poison", "agent", "view_outline"):
        assert has_colour(imgs[0], COLOURS[name]), name
    # The world area of the first frame holds food and poison (not only the legend).
    world = imgs[0][PAD:PAD + world_px, PAD:PAD + world_px]
    for name in ("food", "poison", "agent"):
        assert has_colour(world, COLOURS[name]), name

    # Deterministic: the same command writes the same bytes.
    again = tmp_path / "again.gif"
    proc2 = replay(run_dir, "--steps", 20, "--cell-px", 12, "--out", again)
    assert proc2.returncode == 0, proc2.stderr[-3000:]
    assert again.read_bytes() == gif.read_bytes()


def test_no_checkpoint_is_a_clear_error(run_dir, tmp_path):
    empty = tmp_path / "no_ckpt"
    empty.mkdir()
    shutil.copy(run_dir / "config.yaml", empty / "config.yaml")
    proc = replay(empty)
    assert proc.returncode != 0
    assert "no checkpoint" in proc.stderr and "Traceback" not in proc.stderr
    assert not list(empty.glob("*.gif"))


def test_not_a_run_dir_is_a_clear_error(tmp_path):
    proc = replay(tmp_path)
    assert proc.returncode != 0 and "not a run directory" in proc.stderr and "Traceback" not in proc.stderr


def test_a_cartpole_run_replays_with_its_own_renderer_and_an_env_without_one_is_refused(tmp_path, capsys):
    """In this process (TINY's programs, compiled once in the suite): a CartPole GIF of the
    steps taken, in the renderer's colours; an env that draws no frames exits 2 naming what
    it lacks."""
    run_dir = tmp_path / "cartpole"
    train_run(TINY, run_dir)
    capsys.readouterr()  # training's own lines
    out = tmp_path / "cartpole.gif"
    assert replay_command.main([str(run_dir), "--steps", "12", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == str(out)
    m = re.search(r"replay: (\d+) steps, (\d+) frames, return (\d+), (.*)", lines[-1])
    assert m, lines[-1]
    steps = int(m.group(1))
    assert int(m.group(2)) == steps + 1 and int(m.group(3)) == steps  # CartPole pays 1 a step
    assert steps == 12 or m.group(4).startswith("ended")
    imgs = frames(out)
    assert len(imgs) == steps + 1 and imgs[0].shape == (cartpole_frames.HEIGHT, cartpole_frames.WIDTH, 3)
    for name in ("cart", "pole", "track"):
        assert has_colour(imgs[0], cartpole_frames.COLOURS[name]), name

    env, _ = build_rare_actions({"name": "rare_actions"}, {"name": "default"})
    assert not env.draws_frames
    with pytest.raises(replay_command.ReplayError, match="draws no frames.*render_episode"):
        replay_command.check_draws_frames(env, "rare_actions")
