"""Success criteria per seed, by hand: PPO's for any env and those an env declares (the
rare-action game's); their place in aggregation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml
from omegaconf import OmegaConf

from conftest import ROOT, compose_config
from ppo_lab.analysis.criteria import criteria_table, declared_criteria, seed_criteria
from ppo_lab.config import validate
from ppo_lab.parts import PartError

RARE_ACTIONS_ENV = yaml.safe_load((ROOT / "conf" / "env" / "rare_actions.yaml").read_text())


def test_seed_criteria_by_hand():
    n = 100
    columns = {
        "update": np.arange(1, n + 1),
        "train/approx_kl": np.where(np.arange(n) < 10, 0.1, 0.01),  # 10 updates over 0.06
        "train/clip_frac": np.where(np.arange(n) % 4 == 0, 0.5, 0.1),  # every 4th over 0.30
        "train/entropy": np.linspace(2.0, 0.02, n),  # 2 - 0.02 i: > 1.0 for i < 50
        "train/mean_episode_length": np.r_[np.full(10, 30.0), np.full(80, 40.0), np.full(10, 60.0)],
        "train/mean_episode_return": np.r_[np.full(10, np.nan), np.linspace(0.0, 9.0, 90)],
        "actions/program_frac": np.r_[np.zeros(90), np.full(10, 0.05)],
        "actions/rare_first_step_frac": np.r_[np.zeros(90), [np.nan] * 5, np.full(5, 0.4)],
    }
    c = seed_criteria(columns, declared_criteria(RARE_ACTIONS_ENV))
    assert c["criteria/kl_ok_frac"] == pytest.approx(0.9)
    assert c["criteria/clip_ok_frac"] == pytest.approx(0.75)
    assert c["criteria/entropy_above_1_frac"] == pytest.approx(0.5)
    assert c["criteria/entropy_at_50"] == pytest.approx(2.0 - 0.02 * 49)
    assert c["criteria/entropy_at_100"] == pytest.approx(0.02)
    assert "criteria/entropy_at_200" not in c  # the run never reached update 200
    assert c["criteria/length_gain"] == pytest.approx(30.0)
    assert math.isnan(c["criteria/return_gain"])  # no episode ended in the first tenth
    assert c["criteria/final_return"] == pytest.approx(np.mean(np.linspace(0.0, 9.0, 90)[-10:]))
    assert c["criteria/rare_use"] == pytest.approx(0.05)
    assert c["criteria/rare_reflex_frac"] == pytest.approx(0.4)  # NaN updates ignored
    # The same columns without the env's declaration: PPO's criteria alone.
    assert set(seed_criteria(columns)) == set(c) - {"criteria/rare_use", "criteria/rare_reflex_frac"}


def test_criteria_leave_out_what_a_run_did_not_log():
    c = seed_criteria({"update": np.arange(1, 4), "train/entropy": np.array([1.5, 1.2, 0.9])})
    assert set(c) == {"criteria/entropy_above_1_frac"}


def test_criteria_table_has_a_column_triple_per_criterion_and_a_row_per_cell():
    rows = [
        {"group": "a", "metric": "criteria/kl_ok_frac", "n_seeds": 3, "mean": 0.9, "ci_low": 0.8, "ci_high": 1.0},
        {"group": "a", "metric": "eval/episode_return", "n_seeds": 3, "mean": 5.0, "ci_low": 4.0, "ci_high": 6.0},
        {"group": "b", "metric": "criteria/kl_ok_frac", "n_seeds": 3, "mean": 0.5, "ci_low": 0.4, "ci_high": 0.6},
    ]
    table, columns = criteria_table(rows, {"a": {"ppo.lr": "1"}, "b": {"ppo.lr": "2"}})
    assert columns == ["kl_ok_frac", "kl_ok_frac_ci_low", "kl_ok_frac_ci_high"]
    assert table == [
        {"group": "a", "ppo.lr": "1", "n_seeds": 3, "kl_ok_frac": 0.9, "kl_ok_frac_ci_low": 0.8, "kl_ok_frac_ci_high": 1.0},
        {"group": "b", "ppo.lr": "2", "n_seeds": 3, "kl_ok_frac": 0.5, "kl_ok_frac_ci_low": 0.4, "kl_ok_frac_ci_high": 0.6},
    ]


def test_an_env_criteria_path_that_does_not_load_is_refused_when_validated():
    config = OmegaConf.to_container(compose_config(["env=rare_actions", "env.metrics.criteria=ppo_lab.experiments.nope.criteria"]),
                                    resolve=True)
    with pytest.raises(PartError, match="env.metrics.criteria"):
        validate(config)
