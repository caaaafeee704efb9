"""The parity score both sides of a side-by-side share: from the lab's metrics.csv and from a
PureJaxRL LogWrapper's info, reduced the same way."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ppo_lab.bench import parity


def test_tail_mean_is_the_mean_of_the_last_tenth_of_updates_skipping_empty_ones():
    seed = [0.0] * 18 + [10.0, math.nan]  # 20 updates: the last 2, one with no episode
    assert parity.tail_mean([seed, [1.0] * 5]) == [10.0, 1.0]  # 5 updates: at least the last one
    assert math.isnan(parity.tail_mean([[math.nan] * 10])[0])


def test_log_wrapper_info_and_metrics_csv_give_the_same_per_update_means(tmp_path):
    # 2 seeds, 2 updates, 3 steps, 2 envs: episodes end at marked steps with these returns.
    done = np.zeros((2, 2, 3, 2), bool)
    returns = np.zeros((2, 2, 3, 2))
    done[0, 0, 1, 0], returns[0, 0, 1, 0] = True, 4.0
    done[0, 0, 2, 1], returns[0, 0, 2, 1] = True, 8.0
    done[1, 1, 0, 1], returns[1, 1, 0, 1] = True, -2.0
    per_update = parity.log_wrapper_per_update({"returned_episode": done, "returned_episode_returns": returns})
    assert per_update[0][0] == 6.0 and math.isnan(per_update[0][1])
    assert math.isnan(per_update[1][0]) and per_update[1][1] == -2.0
    (tmp_path / "metrics.csv").write_text("update,seed,train/mean_episode_return\n1,0,6.0\n1,1,nan\n2,0,\n2,1,-2.0\n")
    lab = parity.lab_per_update(tmp_path)
    assert lab[0][0] == 6.0 and math.isnan(lab[0][1]) and math.isnan(lab[1][0]) and lab[1][1] == -2.0


def test_the_table_gives_the_t_interval_over_seeds():
    row = parity.table([{"label": "lab", "seeds": 3, "timesteps": 1000, "score": [1.0, 2.0, 3.0], "wall_s": 9.6,
                         "sps": 312.5}]).splitlines()[-1]
    half = 4.302652729911275 * 1.0 / math.sqrt(3)  # t(0.975, 2) x sd / sqrt(n)
    assert row == f"| lab | 3 x 1,000 | 2.0 [{2 - half:.1f}, {2 + half:.1f}] | 1, 2, 3 | 10 | 312 |"
    assert pytest.approx(2 - half, abs=0.05) == -0.5
