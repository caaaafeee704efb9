"""Record the runs `tests/test_reproduce.py` reproduces bit for bit: one tiny run per env family.

    PYTHONPATH=$PWD python scripts/record_reproduce_fixtures.py

Each is trained with `launch.py` as a user would, and its config.yaml, metrics.csv and
manifest.json are kept under tests/fixtures/reproduce/<cpu_id>/<family>/: this CPU's set
(tests/cpu_recordings.py: XLA:CPU compiles for the CPU, so another one may move the last
digits). Record a new CPU's set; re-record one (and say why in the commit) only when a change is
meant to move the numbers.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ppo_lab.host_cpu import cpu_id, cpu_record

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "reproduce" / cpu_id(cpu_record())
COMMON = ["ppo.num_envs=4", "ppo.num_steps=16", "ppo.num_minibatches=2", "ppo.update_epochs=1", "train.chunk_updates=2",
          "eval.episodes=1", "eval.max_steps=8", "hardware.host_devices=1", "checkpoint.every_min=1000"]
# The families that tests/test_bitwise.py also trains, recorded with its RUNS' configs (SMALL,
# and conftest's TINY, copied here): see AS_TESTED. Change them together, or the sharing stops.
BITWISE_SMALL = ["ppo.num_envs=4", "ppo.num_steps=16", "ppo.num_minibatches=2", "ppo.update_epochs=2",
                 "train.chunk_updates=4", "hardware.host_devices=1"]
TINY = ["env=cartpole", "ppo.num_envs=4", "ppo.num_steps=16", "ppo.total_timesteps=2048", "ppo.num_minibatches=2",
        "ppo.update_epochs=2", "train.chunk_updates=8", "eval.episodes=4", "eval.max_steps=64", "hardware.host_devices=1"]
# family -> overrides (each at least 4 updates)
FAMILIES = {
    "cartpole": ["experiment=cartpole", *TINY],
    "foraging": ["env=foraging", "env.grid_size=16", "env.food_min=4", "env.food_max=8", "env.poison_min=4",
                 "env.poison_max=8", "env.max_steps=32", *BITWISE_SMALL, "ppo.total_timesteps=512", "eval.episodes=2",
                 "++eval.survival_envs=4", "++eval.survival_steps=32"],
    # A recurrent policy (the GRU's state carried through rollouts, reset where an episode ends), 2 seeds.
    "gru": ["experiment=memory_chain", *BITWISE_SMALL, "ppo.total_timesteps=768", "num_seeds=2", "eval.episodes=4"],
    "pendulum": ["experiment=pendulum", *BITWISE_SMALL, "ppo.total_timesteps=1024", "ppo.normalize_obs=true",
                 "ppo.normalize_reward=true", "eval.episodes=2", "eval.max_steps=50"],
    "rare_actions": ["env=rare_actions", "ppo.total_timesteps=256"],  # with COMMON: 4 updates of 64 steps
    # Masked actions (2048's invalid moves), as test_jumanji's test_game2048_trains_through_launch trains it.
    "jumanji": ["env=jumanji", "env.id=Game2048-v1", "env.obs_transform=symlog", "ppo.num_envs=8", "ppo.num_steps=32",
                "ppo.total_timesteps=1024", "train.chunk_updates=2", "eval.episodes=2", "eval.max_steps=64",
                "hardware.host_devices=1", "checkpoint.every_min=1000"],
    # The smallest Brax task and its fastest backend here, as test_continuous_end_to_end's
    # test_brax_env_trains_and_evaluates trains it (AS_TESTED: no COMMON).
    "brax": ["env=brax", "env.id=inverted_pendulum", "env.max_steps=50", "ppo.num_envs=4", "ppo.num_steps=8",
             "ppo.total_timesteps=256", "ppo.num_minibatches=2", "ppo.update_epochs=1", "train.chunk_updates=8",
             "eval.episodes=2", "hardware.host_devices=1", "ppo.normalize_obs=true", "checkpoint.every_min=1000"],
    # Host-stepped: EnvPool's C++ pool and a Gymnasium vector env, each env seeded env.seed + k.
    # Their programs hold addresses of this process (EnvPool's pool, Gymnasium's Python callback),
    # so no other process's cached program matches them: nothing to share, hence COMMON.
    "envpool": ["env=envpool", "env.id=CartPole-v1", "env.num_threads=1", "network.hidden_sizes=[16]",
                "ppo.total_timesteps=256"],
    "gymnasium": ["env=gymnasium", "env.id=CartPole-v1", "network.hidden_sizes=[16]", "ppo.total_timesteps=256"],
}
# Families recorded with the very config of another test's run, without COMMON: the suite's
# compilation cache (tests/conftest.py) then compiles their programs once for both tests.
AS_TESTED = {"cartpole", "foraging", "gru", "pendulum", "jumanji", "brax"}
KEEP = ("config.yaml", "metrics.csv", "manifest.json")


def record(family: str, overrides: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        common = [] if family in AS_TESTED else COMMON
        subprocess.run([sys.executable, "launch.py", *overrides, *common, f"hydra.run.dir={run_dir}"], cwd=ROOT, check=True)
        dest = OUT / family
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        for name in KEEP:
            shutil.copy(run_dir / name, dest / name)
    print(f"recorded {dest}")


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "cpu.json").write_text(json.dumps(cpu_record(), indent=1) + "\n")
    for name in sys.argv[1:] or FAMILIES:
        record(name, FAMILIES[name])
