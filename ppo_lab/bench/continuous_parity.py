"""Learning parity of the lab's continuous-action PPO with PureJaxRL's `ppo_continuous_action.py`,
on gymnax's Pendulum-v1 at the lab's `experiment=pendulum` settings, N seeds each, in one process.

    python -m ppo_lab.bench.continuous_parity --purejaxrl PATH [--seeds 8] [--timesteps N] [--out f.json]

PureJaxRL's file runs unchanged from a checkout (`purejaxrl_peer.load_continuous`: its Brax
env swapped for the gymnax one, its action clip set to the env's bounds), nothing copied. Its
hyperparameters are set to the lab preset's (`conf/experiment/pendulum.yaml`, mapped by
`purejaxrl_settings.peer_config`); its network is hard-coded (256-256 tanh, separate actor and critic, a
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

PureJaxRL initialises its network inside `jax.vmap` over seeds; on this 2-core CPU a batched
orthogonal initialiser can deadlock XLA's thread pool (seen here: a parity run stuck for 23
minutes with 16 s of CPU time). The process turns off XLA:CPU's concurrency-optimised scheduler,
which avoids it, for both sides alike (about 6% slower).

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
from pathlib import Path

from ppo_lab.bench import parity, purejaxrl_peer
from ppo_lab.bench.configs import compose
from ppo_lab.bench.purejaxrl_settings import peer_config
from ppo_lab.bench.zoo_parity import run_lab, run_purejaxrl
from ppo_lab.hardware import set_xla_flag, start_jax

PRESET = ["experiment=pendulum"]
# PureJaxRL's network in the lab's keys.
PUREJAXRL_NETWORK = ["network=mlp", "network.hidden_sizes=[256,256]", "network.activation=tanh",
                     "network.shared_torso=false", "network.squash=null"]
CASES = {"lab_as_purejaxrl": ["ppo.bootstrap_truncation=false"], "lab": []}


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
    set_xla_flag("xla_cpu_enable_concurrency_optimized_scheduler", "false")  # see the module docstring
    start_jax(preset["hardware"])  # before PureJaxRL's code imports gymnax (which starts XLA's backend)
    results = []
    with tempfile.TemporaryDirectory(prefix="ppo_lab_continuous_parity_") as workdir:
        for case in args.cases:
            if case == "purejaxrl":
                try:
                    config = {**peer_config(preset, continuous=True), "TOTAL_TIMESTEPS": timesteps}
                    results.append(run_purejaxrl(args.purejaxrl, config, True, args.seeds))
                except purejaxrl_peer.PeerUnavailable as exc:
                    print(f"PureJaxRL: skipped ({exc})", file=sys.stderr)
            else:
                results.append(run_lab(case, PRESET + PUREJAXRL_NETWORK + CASES[case], args.seeds, Path(workdir), timesteps))
            print(parity.table(results[-1:]), file=sys.stderr)
    print(parity.table(results))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
