"""Fail before running: a chunk over the memory cap stops with the numbers and the knobs."""

from __future__ import annotations

import json

import pytest

from conftest import launch

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_memory_cap_stops_before_training_with_the_knobs(tmp_path, tiny):
    run_dir = tmp_path / "run"
    proc = launch([*tiny, "hardware.memory_limit_gb=0.0001"], run_dir, check=False)
    assert proc.returncode == 2, proc.stderr[-3000:]
    for text in ("hardware.memory_limit_gb=0.0001", "num_seeds=1", "ppo.num_minibatches=2", "ppo.num_envs=4", "temporaries"):
        assert text in proc.stderr, text
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["stop_reason"] == "memory" and summary["updates"] == 0
    assert not (run_dir / "metrics.csv").exists() or (run_dir / "metrics.csv").read_text().count("\n") <= 1
