"""Learning parity of the lab's recurrent PPO with PureJaxRL's `ppo_rnn.py`, on its own env and
settings (CartPole-v1, 4 envs x 128 steps, 5e5 steps, a GRU of 128), N seeds each.

    python scripts/rnn_parity.py --purejaxrl PATH --side purejaxrl --out pj.json
    python scripts/rnn_parity.py --side lab --out lab.json        # (one side per process)
    python scripts/rnn_parity.py --report pj.json lab.json

PureJaxRL is imported unchanged from a checkout (`--purejaxrl`: the repository root or its
`purejaxrl/` folder), nothing copied: gymnax 1.0's six-value `step` is folded into its one
`done` and the brax/navix imports of its `wrappers.py` get placeholders, both by
`ppo_lab.bench.purejaxrl_peer`; its flax < 0.8 calls (`nn.GRUCell()` without `features`, the
static `initialize_carry`) are given today's equivalents (the same cell, a zero state). It needs
`distrax` (pip install distrax).

The score of a seed: the mean return of the episodes that ended in the last 10% of updates
(each update's mean, averaged), the same reduction on both sides.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
import time
import types
from pathlib import Path

from ppo_lab.bench import parity

ROOT = Path(__file__).resolve().parent.parent

# The `__main__` block of PureJaxRL's ppo_rnn.py (DEBUG off).
PUREJAXRL_RNN = {
    "LR": 2.5e-4, "NUM_ENVS": 4, "NUM_STEPS": 128, "TOTAL_TIMESTEPS": 5e5, "UPDATE_EPOCHS": 4, "NUM_MINIBATCHES": 4,
    "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01, "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5,
    "ENV_NAME": "CartPole-v1", "ANNEAL_LR": True, "DEBUG": False,
}

# The same in the lab's keys. PureJaxRL folds truncation into `done` (no bootstrap), embeds the
# observation with one Dense(128)+ReLU (orthogonal gain sqrt 2) before the GRU and shares both
# between actor and critic; each head has a Dense(128)+ReLU (orthogonal gain 2) before its output.
LAB = [
    "env=cartpole", "network=mlp", "network.hidden_sizes=[128]", "network.activation=relu", "network.shared_torso=true",
    "network.recurrent=gru", "network.recurrent_size=128", "network.head_hidden=128", "network.head_hidden_gain=2.0",
    "ppo.num_envs=4", "ppo.num_steps=128", "ppo.update_epochs=4", "ppo.num_minibatches=4",
    "ppo.gamma=0.99", "ppo.gae_lambda=0.95", "ppo.clip_eps=0.2", "ppo.clip_eps_final=0.2", "ppo.ent_coef_initial=0.01",
    "ppo.ent_coef_final=0.01", "ppo.vf_coef=0.5", "ppo.max_grad_norm=0.5", "ppo.lr=2.5e-4", "ppo.lr_final=0.0",
    "ppo.anneal_lr=true", "ppo.bootstrap_truncation=false", "ppo.auto_scale=false", "hardware.host_devices=1",
    "train.chunk_updates=100", "checkpoint.every_min=1000",
]


def run_purejaxrl(checkout: str, seeds: int, timesteps: int, first_seed: int = 0) -> dict:
    import jax
    import numpy as np

    from ppo_lab.bench import purejaxrl_peer as peer

    folder = peer.find_checkout(checkout)
    peer._placeholder_modules()
    sys.path.insert(0, str(folder))
    import ppo_rnn  # PureJaxRL's own file, unchanged, from the checkout

    ppo_rnn.gymnax = peer._five_value_gymnax(ppo_rnn.gymnax)  # gymnax 1.0's step, one `done`
    # Written for flax < 0.8: `nn.GRUCell()` without `features` and the static
    # `GRUCell.initialize_carry(rng, batch_dims, size)`. The same cell and zero state, today's API.
    import flax.linen as nn
    import jax.numpy as jnp

    ppo_rnn.nn = types.SimpleNamespace(**{k: getattr(nn, k) for k in dir(nn) if not k.startswith("_") and k != "GRUCell"},
                                       GRUCell=functools.partial(nn.GRUCell, features=128))
    ppo_rnn.ScannedRNN.initialize_carry = staticmethod(lambda batch_size, hidden_size: jnp.zeros((batch_size, hidden_size)))
    # One seed after another, one compiled program, as ppo_rnn.py's own `__main__` trains one seed.
    # (Its vmapped program hangs on this CPU unless XLA's concurrency-optimised scheduler is off:
    # docs/toolchain.md.)
    train = jax.jit(ppo_rnn.make_train({**PUREJAXRL_RNN, "TOTAL_TIMESTEPS": timesteps}))
    keys = jax.random.split(jax.random.PRNGKey(first_seed), seeds)
    t0 = time.perf_counter()
    outs = [jax.device_get(jax.block_until_ready(train(key))["metric"]) for key in keys]
    wall = time.perf_counter() - t0
    info = {name: np.stack([o[name] for o in outs]) for name in ("returned_episode", "returned_episode_returns")}
    per_update = parity.log_wrapper_per_update(info)
    return {"side": "purejaxrl", "checkout": str(folder), "seeds": seeds, "wall_s_with_compile": wall,
            "timesteps": timesteps, "sps_with_compile": seeds * timesteps / wall,
            "per_update": per_update, "score": parity.tail_mean(per_update)}


def run_lab(seeds: int, timesteps: int, extra: list[str], first_seed: int = 0) -> dict:
    sys.path.insert(0, str(ROOT / "tests"))
    # The tests' compose helper (Hydra's compose API); importing it applies one host device.
    from conftest import compose_config

    from ppo_lab.run.entry import train

    run_dir = Path(tempfile.mkdtemp(prefix="rnn_parity_lab_")) / "run"
    t0 = time.perf_counter()
    summary = train(compose_config([*LAB, *extra, f"seed={first_seed}", f"num_seeds={seeds}", f"ppo.total_timesteps={timesteps}"]), run_dir)
    wall = time.perf_counter() - t0
    per_update = parity.lab_per_update(run_dir)
    return {"side": " ".join(["lab", *extra]), "seeds": seeds, "timesteps": timesteps, "run_dir": str(run_dir), "wall_s_process_train": wall, "sps": summary.sps,
            "compile_s": summary.compile_s, "per_update": per_update, "score": parity.tail_mean(per_update)}


def report(paths: list[str]) -> str:
    """The parity table (bench/parity.py) of result JSONs."""
    results = []
    for path in paths:
        r = json.loads(Path(path).read_text())
        # Steps/s over the whole train call, compile included, on both sides: the same clock.
        wall = r.get("wall_s_with_compile", r.get("wall_s_process_train"))
        results.append({**r, "label": r["side"], "wall_s": wall, "sps": r["seeds"] * r["timesteps"] / wall})
    return parity.table(results)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--side", choices=("purejaxrl", "lab"))
    parser.add_argument("--purejaxrl", default=None, help="PureJaxRL checkout (root or its purejaxrl/ folder)")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--first-seed", type=int, default=0, help="the lab's seed=; PureJaxRL's keys split from PRNGKey(this)")
    parser.add_argument("--timesteps", type=int, default=500_000, help="per seed (ppo_rnn.py's own: 5e5)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--lab-override", action="append", default=[], help="a further lab key=value (e.g. network.head_hidden=0)")
    parser.add_argument("--report", nargs="+", help="result JSONs to tabulate")
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.report))
        return 0
    if args.side == "lab":
        result = run_lab(args.seeds, args.timesteps, args.lab_override, args.first_seed)
    else:
        result = run_purejaxrl(args.purejaxrl, args.seeds, args.timesteps, args.first_seed)
    args.out.write_text(json.dumps(result))
    print(report([str(args.out)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
