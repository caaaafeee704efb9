"""Live progress: a bar on a terminal, plain lines otherwise."""

from __future__ import annotations

import os
from dataclasses import replace
import pty
import subprocess
import sys

import pytest

from ppo_lab.judging.closing import closing_lines
from ppo_lab.rundir import RunSummary

from conftest import ROOT, TINY, launch

pytestmark = pytest.mark.slow


def test_plain_line_per_chunk_when_not_a_tty(tmp_path):
    proc = launch([*TINY, "train.chunk_updates=8"], tmp_path / "run")
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if "ppo_lab.progress" in line]
    assert len(lines) == 4  # 32 updates / 8 per chunk
    assert "update 32/32" in lines[-1] and "timesteps 2048/2048 (100%)" in lines[-1] and "sps" in lines[-1]
    tail = proc.stdout.splitlines()[-15:]  # the run ends with its closing summary
    assert any(line.startswith("== completed") for line in tail) and any(str(tmp_path / "run") in line for line in tail)
    assert any(line.startswith("next: ppo-lab plots") for line in tail)
    assert "per seed:" not in proc.stdout + proc.stderr  # the per-seed values are in summary.json only


def test_closing_summary_says_what_was_learned_and_how_to_go_on(tmp_path):
    summary = RunSummary(
        status="stopped", stop_reason="signal SIGINT", seeds=[0, 1, 2], updates=10, total_updates=40, timesteps=20480,
        wall_s=12.0, sps=5120.0, compile_s=3.0, eval_s=1.5,
        eval={"episode_return": [10.0, 12.0, 14.0], "episode_length": [1, 2, 3], "food_share": [0.9, 0.95, 1.0],
              "episode_return_greedy": [10.0, 12.0, 14.0], "episode_return_sampled": [20.0, 22.0, 24.0]},
        final={"train/mean_episode_return": [9.0, 11.0, 13.0]})
    lines = closing_lines(summary, tmp_path, eval_mode="greedy", resume_command="ppo-lab resume D")
    text = "\n".join(lines)
    assert len(lines) <= 15 and lines[0] == "== stopped: signal SIGINT =="
    # 3 seeds: the interval `ppo-lab aggregate` gives them too, named, and n < 5 marked (docs/statistics.md):
    # 12 -/+ t_{0.975, 2} * 2 / sqrt(3) = 12 -/+ 4.97
    assert "results, mean [95% interval] across 3 seeds:" in lines
    assert "episode_return (greedy)          12.0 [7.0, 17.0] (Student t)" in text and "episode_length" not in text
    # the evaluation's other play right after the headline's
    shown = [line.strip() for line in lines]
    assert shown[shown.index("episode_return (greedy)          12.0 [7.0, 17.0] (Student t)") + 1] == \
        "episode_return (sampled)         22.0 [17.0, 27.0] (Student t)"
    assert "food_share" not in text  # a metric the env does not declare (its headline or beside it)
    assert "WARNING n=3 < 5: too few seeds to tell settings apart (wide intervals; docs/statistics.md)" in lines
    assert "5,120 steps/s" in text and "evaluation 1.5 s" in text and f"run dir: {tmp_path}" in text
    assert lines[-1] == "resume (continues from the last checkpoint): ppo-lab resume D"
    done = closing_lines(replace(summary, status="completed"), tmp_path, eval_mode="greedy", resume_command="x")
    assert not any("resume" in line for line in done)
    timed = closing_lines(replace(summary, status="timed_out"), tmp_path, eval_mode="greedy", resume_command="x")
    assert "larger train.duration_min" in timed[-1]


def test_closing_summary_shows_the_headline_first_and_the_return_as_what_the_mode_paid(tmp_path):
    """An env that declares its headline (the foraging world: the true objective): the summary
    leads with it, then what the env declares beside it, and calls the return what it is."""
    env = {"name": "foraging", "metrics": {"headline": "true/objective_per_1k", "beside": ["eval/energy_per_1k"]}}
    summary = RunSummary(
        status="completed", seeds=[0, 1, 2], updates=4, timesteps=2048, wall_s=3.0, reward="proxy",
        eval={"episode_return": [200.0, 210.0, 220.0], "energy_per_1k": [-20.0, -22.0, -24.0]},
        final={"true/objective_per_1k": [-30.0, -31.0, -32.0], "train/mean_episode_return": [150.0, 160.0, 170.0]})
    lines = closing_lines(summary, tmp_path, eval_mode="greedy", resume_command=None, env=env)
    start = lines.index("results, mean [95% interval] across 3 seeds:")
    names = [line.split("  ")[1].strip() for line in lines[start + 1:start + 5]]
    assert names == ["true objective per 1k steps (headline, last updates)", "energy per 1k steps",
                     "paid reward (proxy), greedy", "paid reward (proxy), training, last updates"]
    assert lines[start + 1].endswith("-31.0 [-33.5, -28.5] (Student t)")  # 3 seeds: aggregate's interval


def test_progress_bar_on_a_terminal(tmp_path):
    """stderr is a real pseudo-terminal: tqdm draws a bar with return, entropy and sps."""
    primary, secondary = pty.openpty()
    cmd = [sys.executable, "launch.py", *TINY, f"hydra.run.dir={tmp_path / 'run'}"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=secondary, env={**os.environ, "COLUMNS": "160"})
    os.close(secondary)
    out = b""
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=240)
    os.close(primary)
    text = out.decode(errors="replace")
    assert proc.returncode == 0, text[-3000:]
    assert "2.05k/2.05k" in text and "return" in text and "entropy" in text and "sps" in text
    assert "ppo_lab.progress" not in text  # no plain lines when the bar is shown
