"""Live progress: a bar on a terminal, plain lines otherwise."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from conftest import ROOT, TINY, launch

pytestmark = pytest.mark.slow


def test_plain_line_per_chunk_when_not_a_tty(tmp_path):
    proc = launch([*TINY, "train.chunk_updates=8"], tmp_path / "run")
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if "ppo_lab.progress" in line]
    assert len(lines) == 4  # 32 updates / 8 per chunk
    assert "update 32/32" in lines[-1] and "timesteps 2048/2048 (100%)" in lines[-1] and "sps" in lines[-1]


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
