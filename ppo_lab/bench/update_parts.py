"""Where one PPO update's time goes, the lab's beside PureJaxRL's, at PureJaxRL's CartPole settings.

    python -m ppo_lab.bench.update_parts --purejaxrl PATH [--envs 4] [--rounds 3] [--out f.json]
        [--record docs/benchmark_cpu.json [--section update_parts]]

Both sides are measured the same way, as XLA runs them on this machine (one device):
- **the update**: the whole trained program over its updates (the lab's chunk of
  `train.chunk_updates` updates, PureJaxRL's whole jitted `train`), per update;
- **its loops**: each `lax.scan` the update runs, found in the update's jaxpr (the rollout: a
  scan of `num_steps`; GAE: a reverse scan of `num_steps`; the epochs: a scan of
  `update_epochs` over the minibatches' scan), compiled and timed alone as its own program on
  inputs of its shapes; PureJaxRL's scans are taken from its unchanged `train`'s jaxpr, so
  nothing of its code is copied;
- **the lab's own parts**: the metrics it computes per update and the divergence guard, each as
  the update's time less that of the same chunk without it (`without_metrics`,
  `without_guard`: a `Trainer` whose update returns no metrics row, or no non-finite code,
  which XLA then drops with what only it needed);
- **the host and the first call**: the lab's run as `launch.py` makes it (`run.entry.train`,
  `benchmark=true`), its wall time per update less the chunk's; PureJaxRL's as the side by side
  times it (a freshly compiled executable's first call) less its warm calls';
- **the rest**: the update less its loops and the parts named above (the last value pass, the
  schedules, the minibatches' shuffle, the outputs).

Each program's time is its fastest call in a round, and each figure the best of `--rounds`
interleaved rounds (programs of a few milliseconds move with the load of a shared machine);
every round is kept in the record. `--record FILE` keeps the
result as `--section` of this CPU's entry in FILE (`sidebyside.keep_record`), with the commit of
the code measured.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
from jax.extend.core import Literal, jaxprs_in_params

from ppo_lab.bench import markdown, purejaxrl_peer, sidebyside
from ppo_lab.bench.configs import compose
from ppo_lab.bench.purejaxrl_settings import CARTPOLE
from ppo_lab.config import validate
from ppo_lab.hardware import start_jax
from ppo_lab.host_cpu import cpu_record
from ppo_lab.ppo.train import NONFINITE, Trainer
from ppo_lab.run.build import build
from ppo_lab.run.manifest import lab_source

PARTS = ("rollout", "gae", "epochs", "metrics", "guard", "rest", "host")
MIN_S = 0.5  # least seconds of calls per timing


def timed_us(compiled, args, per_call: int) -> float:
    """Microseconds per unit (`per_call` units a call): one warm-up call, then calls for MIN_S,
    the fastest of them (a call that other work on a shared machine interrupted is slower, never
    faster)."""
    jax.block_until_ready(compiled(*args))
    best, stop = float("inf"), time.perf_counter() + MIN_S
    while True:
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        t1 = time.perf_counter()
        best = min(best, t1 - t0)
        if t1 >= stop:
            return best / per_call * 1e6


def find_scans(jaxpr, num_steps: int, epochs: int, found=None) -> dict:
    """The update's loops in `jaxpr` (searched through its calls, not into the scans found):
    {"rollout": eqn, "gae": eqn, "epochs": eqn}."""
    found = {} if found is None else found
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "scan":
            length, reverse = eqn.params["length"], eqn.params["reverse"]
            name = ("gae" if reverse else "rollout") if length == num_steps else "epochs" if length == epochs else None
            if name and name not in found:
                found[name] = eqn
                continue
        for sub in jaxprs_in_params(eqn.params):
            find_scans(sub, num_steps, epochs, found)
    return found


def update_body(jaxpr, num_updates: int):
    """The body of the scan over `num_updates` updates in `jaxpr` (searched through its calls)."""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "scan" and eqn.params["length"] == num_updates:
            return eqn.params["jaxpr"].jaxpr
        for sub in jaxprs_in_params(eqn.params):
            body = update_body(sub, num_updates)
            if body is not None:
                return body
    return None


def example(aval, key):
    """An input of `aval`'s shape and dtype: small normal floats, zero integers, false, keys."""
    if jnp.issubdtype(aval.dtype, jax.dtypes.prng_key):
        return jax.random.split(jax.random.key(0), aval.shape) if aval.shape else jax.random.key(0)
    if jnp.issubdtype(aval.dtype, jnp.floating):
        return (0.1 * jax.random.normal(key, aval.shape)).astype(aval.dtype)
    if aval.dtype == jnp.uint32:
        return jax.random.bits(key, aval.shape, jnp.uint32)
    return jnp.zeros(aval.shape, aval.dtype)


def scan_us(eqn) -> tuple:
    """(compiled program, inputs) of one scan equation alone."""
    literals = {i: v.val for i, v in enumerate(eqn.invars) if isinstance(v, Literal)}
    avals = [v.aval for i, v in enumerate(eqn.invars) if i not in literals]

    def run(*args):
        it = iter(args)
        return eqn.primitive.bind(*[literals[i] if i in literals else next(it) for i in range(len(eqn.invars))],
                                  **eqn.params)

    args = [example(a, k) for a, k in zip(avals, jax.random.split(jax.random.key(1), max(len(avals), 1)))]
    return jax.jit(run).lower(*args).compile(), args


@dataclasses.dataclass(frozen=True, eq=False)
class WithoutMetrics(Trainer):
    """The lab's update with no metrics row (only the guard's code): what the metrics cost."""

    def update_metrics(self, *args, **kwargs) -> dict:
        return {}


@dataclasses.dataclass(frozen=True, eq=False)
class WithoutGuard(Trainer):
    """The lab's update whose non-finite code is a constant 0: every check, and the select of
    the kept state, dropped by XLA."""

    def update(self, state, update_index, hypers, num_updates):
        new_state, metrics = super().update(state, update_index, hypers, num_updates)
        return new_state, {**metrics, NONFINITE: jnp.zeros((), jnp.float32)}


class LabSide:
    """The lab at PureJaxRL's CartPole settings, one seed, `num_envs` envs, on one device."""

    def __init__(self, num_envs: int, timesteps: int, extra: list[str]):
        self.overrides = sidebyside.lab_overrides(num_envs, 1, timesteps) + list(extra)
        comp = build(validate(compose(self.overrides)), 1)
        self.trainer, ppo = comp.trainer, comp.ppo
        self.steps_per_update = ppo.batch_size
        hypers = jax.tree.map(lambda x: x[0], comp.hypers)
        num_updates = jnp.asarray(self.trainer.num_updates, jnp.int32)
        state = jax.jit(self.trainer.init)(*jax.random.split(jax.random.PRNGKey(0)), hypers, num_updates)
        self.args = (state, jnp.asarray(0, jnp.int32), hypers, num_updates)
        self.programs = {name: jax.jit(kind(**{f.name: getattr(self.trainer, f.name) for f in dataclasses.fields(Trainer)}).chunk)
                         .lower(*self.args).compile()
                         for name, kind in (("update", Trainer), ("without_metrics", WithoutMetrics), ("without_guard", WithoutGuard))}
        jaxpr = jax.make_jaxpr(self.trainer.update)(state, self.args[1], hypers, num_updates).jaxpr
        self.scans = {name: scan_us(eqn) for name, eqn in find_scans(jaxpr, ppo.num_steps, ppo.update_epochs).items()}

    def round(self) -> dict:
        times = {name: timed_us(program, self.args, self.trainer.chunk_updates) for name, program in self.programs.items()}
        times.update({name: timed_us(program, args, 1) for name, (program, args) in self.scans.items()})
        with tempfile.TemporaryDirectory(prefix="ppo_lab_parts_") as workdir:  # one run as launch.py makes it, host included
            times["run"] = self.steps_per_update / sidebyside.lab_run(self.overrides, Path(workdir)).sps * 1e6
        return times


class PeerSide(purejaxrl_peer.PeerTraining):
    """PureJaxRL's `train` at its CartPole settings, `num_envs` envs, one seed."""

    def __init__(self, module, num_envs: int, timesteps: int):
        super().__init__(module, num_envs, 1, timesteps)
        body = update_body(jax.make_jaxpr(self.train)(self.key).jaxpr, self.updates)
        self.scans = {name: scan_us(eqn) for name, eqn in find_scans(body, CARTPOLE["NUM_STEPS"], CARTPOLE["UPDATE_EPOCHS"]).items()}

    def round(self) -> dict:
        # "run": its training as the side by side times it, a freshly compiled executable's first call.
        times = {"update": timed_us(self.program, (self.key,), self.updates), "run": self.first_call_s() / self.updates * 1e6}
        times.update({name: timed_us(program, args, 1) for name, (program, args) in self.scans.items()})
        return times


def breakdown(lab: dict, peer: dict) -> dict:
    """Per part, microseconds per update on each side (best of the rounds) and its share of the gap."""
    best = lambda rounds, name: min(r[name] for r in rounds)  # noqa: E731
    lab_parts = {name: best(lab, name) for name in ("rollout", "gae", "epochs")}
    lab_parts["metrics"] = best(lab, "update") - best(lab, "without_metrics")
    lab_parts["guard"] = best(lab, "update") - best(lab, "without_guard")
    lab_parts["rest"] = best(lab, "update") - sum(lab_parts.values())
    lab_parts["host"] = best(lab, "run") - best(lab, "update")
    peer_parts = {name: best(peer, name) for name in ("rollout", "gae", "epochs")}
    peer_parts.update(metrics=0.0, guard=0.0, rest=best(peer, "update") - sum(peer_parts.values()),
                      host=best(peer, "run") - best(peer, "update"))
    lab_total, peer_total = best(lab, "run"), best(peer, "run")
    gap = lab_total - peer_total
    parts = {name: {"lab_us": lab_parts[name], "purejaxrl_us": peer_parts[name],
                    "share_of_gap": (lab_parts[name] - peer_parts[name]) / gap if gap else None} for name in PARTS}
    return {"parts": parts, "lab_us": lab_total, "purejaxrl_us": peer_total, "gap_us": gap,
            "ratio": peer_total / lab_total}


def measure(checkout, num_envs: int, timesteps: int, rounds: int, extra: list[str]) -> dict:
    module = purejaxrl_peer.load(checkout)
    lab, peer = LabSide(num_envs, timesteps, extra), PeerSide(module, num_envs, timesteps)
    lab_rounds, peer_rounds = [], []
    for r in range(rounds):
        peer_rounds.append(peer.round())
        lab_rounds.append(lab.round())
        print(f"[update_parts] round {r + 1}/{rounds}: lab {lab_rounds[-1]['run']:.0f} us / PureJaxRL "
              f"{peer_rounds[-1]['run']:.0f} us per update", file=sys.stderr)
    return {"cpu": cpu_record(), "date": datetime.date.today().isoformat(), "commit": measured_commit(),
            "num_envs": num_envs, "timesteps": timesteps, "rounds": rounds,
            "lab_chunk_updates": lab.trainer.chunk_updates, "lab_overrides": lab.overrides,
            "distrax": purejaxrl_peer.distrax_source(), "jax": jax.__version__,
            "load_avg": os.getloadavg(), "lab_rounds": lab_rounds, "purejaxrl_rounds": peer_rounds,
            **breakdown(lab_rounds, peer_rounds)}


def measured_commit() -> str | None:
    """The commit of the lab's code measured, with "+changes" when its tracked files differ from it."""
    source = lab_source()
    return None if source["commit"] is None else source["commit"] + ("+changes" if source["dirty"] else "")


def format_table(result: dict) -> str:
    return (f"one update, 1 seed x {result['num_envs']} envs (best of {result['rounds']} rounds): PureJaxRL / lab = "
            f"{result['ratio']:.2f}x\n" + markdown.update_parts_table({"update_parts": result}))


def main(argv=None) -> int:
    parser = sidebyside.peer_parser(__doc__, "extra Hydra overrides for the lab's side")
    parser.add_argument("--envs", type=int, default=4)
    parser.add_argument("--timesteps", type=int, default=250_000)
    parser.add_argument("--section", default="update_parts", help="its section in this CPU's entry")
    args = parser.parse_args(argv)
    start_jax(compose(list(args.overrides))["hardware"])
    result = measure(args.purejaxrl, args.envs, args.timesteps, args.rounds, list(args.overrides))
    sidebyside.report(args, result, format_table(result), args.section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
