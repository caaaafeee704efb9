"""The layout follows the cost: one seed on a small batch stays on one device; the user can force one."""

from __future__ import annotations

import json

import pytest

from omegaconf import OmegaConf

from conftest import TINY, compose_config, launch, ppo_config
from ppo_lab.config import HardwareConfig, PPOConfig, read
from ppo_lab.errors import ConfigError
from ppo_lab.ppo.parallel import ENVS_SPLIT_MIN_ROWS, choose_layout


def _ppo(num_envs: int, num_steps: int = 128, num_minibatches: int = 4) -> PPOConfig:
    return ppo_config(lr=2.5e-4, lr_final=0.0, anneal_lr=True, gamma=0.99, gae_lambda=0.95, clip_eps=0.2, clip_eps_final=0.2,
                     clip_vloss=True, vf_coef=0.5, ent_coef_initial=0.01, ent_coef_final=0.01, entropy_floor=None,
                     entropy_floor_coef=0.1, max_grad_norm=0.5, update_epochs=4, num_minibatches=num_minibatches,
                     normalize_advantages=True, bootstrap_truncation=True, num_envs=num_envs, num_steps=num_steps,
                     total_timesteps=10**6, auto_scale=False)


def test_one_seed_small_batch_stays_on_one_device():
    layout = choose_layout(1, _ppo(4), 2)
    assert (layout.mode, layout.num_devices, layout.num_replicas) == ("seeds", 1, 1)
    assert "one device" in layout.reason and str(ENVS_SPLIT_MIN_ROWS) in layout.reason


def test_one_seed_large_batch_splits_envs():
    envs = 2 * ENVS_SPLIT_MIN_ROWS * 4 // 128  # exactly the threshold per device
    layout = choose_layout(1, _ppo(envs), 2)
    assert (layout.mode, layout.num_devices, layout.envs_per_replica) == ("envs", 2, envs // 2)
    assert choose_layout(1, _ppo(envs - 2), 2).num_devices == 1  # just under it


def test_seeds_split_over_devices_and_uneven_counts_use_fewer():
    assert choose_layout(4, _ppo(4), 2).as_dict() == {"mode": "seeds", "num_devices": 2, "num_replicas": 4, "envs_per_replica": 4}
    assert choose_layout(3, _ppo(4), 2).num_devices == 1


def test_forced_layouts():
    assert choose_layout(4, _ppo(64), 2, "single").num_devices == 1
    assert choose_layout(1, _ppo(4), 2, "envs").as_dict() == {"mode": "envs", "num_devices": 2, "num_replicas": 2, "envs_per_replica": 2}
    assert choose_layout(1, _ppo(4096), 2, "seeds").num_devices == 1
    with pytest.raises(ValueError, match="num_seeds=2"):
        choose_layout(2, _ppo(4), 2, "envs")
    with pytest.raises(ValueError, match="does not split evenly"):
        choose_layout(1, _ppo(3, num_minibatches=1), 2, "envs")


def test_bad_layout_names_the_choices():
    with pytest.raises(ConfigError, match="hardware.layout.*'auto', 'seeds', 'envs', 'single'"):
        read(HardwareConfig, {**OmegaConf.to_container(compose_config([]).hardware), "layout": "diagonal"}, "hardware")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_default_cpu_run_keeps_one_small_seed_on_one_device(tmp_path):
    args = [a for a in TINY if not a.startswith("hardware.host_devices")] + ["hardware.host_devices=2", "benchmark=true"]
    proc = launch(args, tmp_path / "run")
    bench = json.loads((tmp_path / "run" / "benchmark.json").read_text())
    assert bench["layout"]["num_devices"] == 1 and bench["layout"]["mode"] == "seeds"
    assert "layout: seeds over 1 device(s)" in proc.stdout + proc.stderr
