"""Record the runs `tests/test_reproduce.py` reproduces bit for bit: one tiny run per env family.

    PYTHONPATH=$PWD python scripts/record_reproduce_fixtures.py

Each is trained with `launch.py` as a user would, and its config.yaml, metrics.csv and
manifest.json are kept under tests/fixtures/reproduce/<family>/. Re-record them (and say why
in the commit) only when a change is meant to move the numbers.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "reproduce"
COMMON = ["ppo.num_envs=4", "ppo.num_steps=16", "ppo.num_minibatches=2", "ppo.update_epochs=1", "train.chunk_updates=2",
          "eval.episodes=1", "eval.max_steps=8", "hardware.host_devices=1", "checkpoint.every_min=1000"]
# family -> overrides: 4 updates of 64 steps each (per seed)
FAMILIES = {
    "cartpole": ["env=cartpole", "ppo.total_timesteps=256"],
    "foraging": ["env=foraging", "env.grid_size=16", "env.food_min=4", "env.food_max=8", "env.poison_min=4",
                 "env.poison_max=8", "env.max_steps=32", "ppo.total_timesteps=256", "num_seeds=2",
                 "eval.survival_envs=2", "eval.survival_steps=8"],
    "pendulum": ["experiment=pendulum", "ppo.total_timesteps=256"],
    "rare_actions": ["env=rare_actions", "ppo.total_timesteps=256"],
}
KEEP = ("config.yaml", "metrics.csv", "manifest.json")


def record(family: str, overrides: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        subprocess.run([sys.executable, "launch.py", *overrides, *COMMON, f"hydra.run.dir={run_dir}"], cwd=ROOT, check=True)
        dest = OUT / family
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        for name in KEEP:
            shutil.copy(run_dir / name, dest / name)
    print(f"recorded {dest}")


if __name__ == "__main__":
    for name in sys.argv[1:] or FAMILIES:
        record(name, FAMILIES[name])
