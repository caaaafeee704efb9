"""Learning parity of the lab's continuous-action PPO with PureJaxRL's `ppo_continuous_action.py`,
on gymnax's Pendulum-v1 at the lab's `experiment=pendulum` settings, N seeds each, in one process.

    python -m ppo_lab.bench.continuous_parity --purejaxrl PATH [--seeds 8] [--timesteps N] [--out f.json]

PureJaxRL's file runs unchanged from a checkout (`purejaxrl_peer.load_continuous`: its Brax
env swapped for the gymnax one, its action clip set to the env's bounds), nothing copied. Its
hyperparameters are set to the lab preset's (`conf/experiment/pendulum.yaml`, read here, not
repeated); its network is hard-coded (256-256 tanh, separate actor and critic, a
state-independent log-std), so the lab runs that network too. Cases:

- `purejaxrl`: its `make_train`, seeds vmapped (`jax.jit(jax.vmap(train))`, its README's way);
- `lab_as_purejaxrl`: the lab with PureJaxRL's one remaining training difference switched to
  its choice: a time-limit cut ends the episode for GAE (`ppo.bootstrap_truncation=false`);
- `lab`: the lab's default, the cut bootstrapped with `gamma * V(final obs)`. Every Pendulum
  episode ends by the 200-step time limit, so this is the case where that matters most.

Differences left as they are (both reasonable, both named): PureJaxRL's normalisation wrappers
move their statistics every env step, so the observations of one rollout are scaled by 128
slightly different statistics; the lab's move once per update, after the update, so a rollout
and every epoch over it see the same scaling (`ppo_lab/ppo/normalize.py`).

Score: `parity.tail_mean` (training episodes of the last 10% of updates), the same on every
side; steps/s: env steps over wall time including compilation (PureJaxRL's training is one
jitted call), the lab's from its own summary (`sps`, compile excluded) and its whole wall.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

import jax

from ppo_lab.bench import parity, purejaxrl_peer
from ppo_lab.bench.configs import compose
from ppo_lab.hardware import start_jax
from ppo_lab.run.entry import train

PRESET = ["experiment=pendulum"]
# PureJaxRL's network in the lab's keys.
PUREJAXRL_NETWORK = ["network=mlp", "network.hidden_sizes=[256,256]", "network.activation=tanh",
                     "network.shared_torso=false", "network.squash=null"]
CASES = {"lab_as_purejaxrl": ["ppo.bootstrap_truncation=false"], "lab": []}


def purejaxrl_config(ppo: dict, gymnax_id: str, timesteps: int) -> dict:
    """The lab preset's PPO settings in PureJaxRL's keys (its keys have no lr_final: it anneals to 0)."""
    if ppo["anneal_lr"] and ppo["lr_final"] != 0:
        raise ValueError(f"PureJaxRL anneals the learning rate to 0; the preset's lr_final is {ppo['lr_final']}")
    if ppo["ent_coef_initial"] != ppo["ent_coef_final"] or ppo["clip_eps"] != ppo["clip_eps_final"]:
        raise ValueError("PureJaxRL's entropy coefficient and clip range are constants; the preset schedules them")
    return {
        "LR": ppo["lr"], "NUM_ENVS": ppo["num_envs"], "NUM_STEPS": ppo["num_steps"], "TOTAL_TIMESTEPS": timesteps,
        "UPDATE_EPOCHS": ppo["update_epochs"], "NUM_MINIBATCHES": ppo["num_minibatches"], "GAMMA": ppo["gamma"],
        "GAE_LAMBDA": ppo["gae_lambda"], "CLIP_EPS": ppo["clip_eps"], "ENT_COEF": ppo["ent_coef_initial"],
        "VF_COEF": ppo["vf_coef"], "MAX_GRAD_NORM": ppo["max_grad_norm"], "ACTIVATION": "tanh", "ENV_NAME": gymnax_id,
        "ANNEAL_LR": ppo["anneal_lr"], "NORMALIZE_ENV": ppo["normalize_obs"] and ppo["normalize_reward"], "DEBUG": False,
    }


def run_purejaxrl(checkout, preset: dict, seeds: int, timesteps: int) -> dict:
    gymnax_id = preset["env"]["gymnax_id"]
    module = purejaxrl_peer.load_continuous(checkout, gymnax_id)
    train_fn = jax.jit(jax.vmap(module.make_train(purejaxrl_config(preset["ppo"], gymnax_id, timesteps))))
    keys = jax.random.split(jax.random.PRNGKey(0), seeds)
    t0 = time.perf_counter()
    out = jax.block_until_ready(train_fn(keys))
    wall = time.perf_counter() - t0
    per_update = parity.log_wrapper_per_update(jax.device_get(out["metrics"]))
    return {"label": "purejaxrl", "seeds": seeds, "timesteps": timesteps, "wall_s": wall, "sps": seeds * timesteps / wall,
            "per_update": per_update, "score": parity.tail_mean(per_update)}


def run_lab(label: str, overrides: list[str], seeds: int, timesteps: int, workdir: Path) -> dict:
    run_dir = Path(tempfile.mkdtemp(prefix=f"{label}_", dir=workdir)) / "run"
    t0 = time.perf_counter()
    summary = train(compose([*overrides, f"num_seeds={seeds}", f"ppo.total_timesteps={timesteps}"]), run_dir)
    wall = time.perf_counter() - t0
    per_update = parity.lab_per_update(run_dir)
    return {"label": label, "seeds": seeds, "timesteps": timesteps, "wall_s": wall, "sps": summary["sps"],
            "compile_s": summary["compile_s"], "eval": summary.get("eval"),
            "per_update": per_update, "score": parity.tail_mean(per_update)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--purejaxrl", default=None, help=f"PureJaxRL checkout (default: ${purejaxrl_peer.ENV_VAR})")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--timesteps", type=int, default=None, help="per seed (default: the preset's)")
    parser.add_argument("--cases", nargs="+", default=["purejaxrl", *CASES], choices=["purejaxrl", *CASES])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    preset = compose(PRESET + PUREJAXRL_NETWORK)
    timesteps = args.timesteps or int(preset["ppo"]["total_timesteps"])
    start_jax(preset["hardware"])  # before PureJaxRL's code imports gymnax (which starts XLA's backend)
    results = []
    with tempfile.TemporaryDirectory(prefix="ppo_lab_continuous_parity_") as workdir:
        for case in args.cases:
            if case == "purejaxrl":
                try:
                    results.append(run_purejaxrl(args.purejaxrl, preset, args.seeds, timesteps))
                except purejaxrl_peer.PeerUnavailable as exc:
                    print(f"PureJaxRL: skipped ({exc})", file=sys.stderr)
            else:
                results.append(run_lab(case, PRESET + PUREJAXRL_NETWORK + CASES[case], args.seeds, timesteps, Path(workdir)))
            print(parity.table(results[-1:]), file=sys.stderr)
    print(parity.table(results))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
