"""The bar of recurrent policies, end to end through launch.py's `train`: on bsuite's
MemoryChain (a context bit seen on the first step, asked for on the last; returns +1 or -1,
chance 0) a GRU policy is near perfect and a feed-forward one at chance, over 4 vmapped seeds;
a GRU run killed after its first checkpoint resumes from it and still learns."""

from __future__ import annotations

import time
from collections import Counter

import numpy as np
import pytest

from conftest import read_rows, read_summary, start_launch, train_run

pytestmark = pytest.mark.slow

MEMORY_CHAIN = ["experiment=memory_chain", "num_seeds=4", "hardware.host_devices=1"]


@pytest.mark.timeout(300)
def test_memory_chain_gru_remembers_and_feed_forward_is_at_chance(tmp_path):
    gru = train_run([*MEMORY_CHAIN, "network.recurrent=gru"], tmp_path / "gru")
    ff = train_run([*MEMORY_CHAIN, "network.recurrent=null"], tmp_path / "ff")
    assert gru["status"] == ff["status"] == "completed"
    assert len(gru["eval"]["episode_return"]) == 4
    assert np.mean(gru["eval"]["episode_return"]) >= 0.9, gru["eval"]
    assert np.mean(ff["eval"]["episode_return"]) <= 0.3, ff["eval"]


@pytest.mark.timeout(300)
def test_a_killed_gru_run_resumes_from_its_first_checkpoint_and_still_learns(tmp_path, caplog):
    args = [*MEMORY_CHAIN, "network.recurrent=gru", "train.chunk_updates=4", "checkpoint.every_min=0.0001"]
    run_dir = tmp_path / "run"
    proc = start_launch(args, run_dir)
    try:
        while not list((run_dir / "checkpoints").glob("ckpt_*.json")):
            assert proc.poll() is None, proc.output()[-3000:]
            time.sleep(0.1)
    finally:
        proc.kill()  # a crash: no clean shutdown
        proc.wait(timeout=30)
    assert read_summary(run_dir)["status"] == "running"

    caplog.set_level("INFO")
    s = train_run(args, run_dir)
    assert "RESUMING from this run's checkpoint" in caplog.text
    assert s["status"] == "completed" and s["resumed_from"] is not None and 0 < s["resumed_from"] < s["updates"] == 80
    counts = Counter((int(r["update"]), int(r["seed"])) for r in read_rows(run_dir))
    assert max(counts.values()) == 1, "duplicate (update, seed) rows"
    assert sorted(counts) == [(u, seed) for u in range(1, 81) for seed in range(4)]
    assert np.mean(s["eval"]["episode_return"]) >= 0.9, s["eval"]
