"""Learning parity with PureJaxRL: its own PPO at a lab preset's settings, N seeds, its final
return beside the lab's, scored alike (`parity.tail_mean`), in one process. The zoo table's
peer column, and any gymnax preset's (docs/results.md: `experiment=pendulum`).

    python -m ppo_lab.bench.zoo_parity --purejaxrl PATH --experiment zoo/<slug> [--seeds 8]
        [--lab-run-dir DIR] [--cases ...] [--out f.json] [hydra overrides on both sides,
        e.g. hardware=gpu ppo.total_timesteps=100000]

PureJaxRL's `ppo.py` (discrete actions) or `ppo_continuous_action.py` (continuous) runs
unchanged from the checkout (`purejaxrl_peer`), its config the preset's, mapped key by key
(`purejaxrl_settings.peer_config`); a setting it cannot take stops the run with the lab's key
named. Cases:

- `purejaxrl`: its `make_train`, seeds vmapped (`jax.jit(jax.vmap(train))`, its README's way),
  on jax's default backend;
- `lab`: the preset as the zoo table runs it, read from `--lab-run-dir` (a finished run of the
  preset: its config.yaml is the one mapped) or trained here at the same settings;
- `lab_at_peer_network`: only where the preset's network is not PureJaxRL's hard-coded one,
  the preset with PureJaxRL's network: the like-for-like comparison. Both are reported;
- `lab_as_purejaxrl` (on request, `--cases`): that, with a time-limit cut ending the episode
  for GAE as PureJaxRL's does (`ppo.bootstrap_truncation=false`).

Differences that remain are named in the output (`settings.differences`): a time-limit cut,
and for the continuous file its normalisation wrappers, which move their statistics every env
step where the lab's move once per update (a rollout and every epoch over it see one scaling,
`ppo_lab/ppo/normalize.py`).

PureJaxRL initialises its network inside `jax.vmap` over seeds; on a 2-core CPU a batched
orthogonal initialiser can deadlock XLA's thread pool (seen: a run stuck for 23 minutes with
16 s of CPU time). The process turns off XLA:CPU's concurrency-optimised scheduler, which
avoids it, for both sides alike (about 6% slower); on a GPU the flag does nothing. A case's
wall time includes its compilation; the lab's `sps` does not.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

import jax

from ppo_lab import rundir
from ppo_lab.bench import parity, purejaxrl_peer, purejaxrl_settings
from ppo_lab.bench.configs import compose
from ppo_lab.estimators import mean_summary
from ppo_lab.hardware import set_xla_flag, start_jax
from ppo_lab.judging.headline import TRAIN_RETURN
from ppo_lab.run.entry import train

LAB_CASES = ("lab", "lab_at_peer_network", "lab_as_purejaxrl")


def is_continuous(gymnax_id: str) -> bool:
    """Whether the gymnax env's actions are a Box (imports gymnax, which starts XLA's backend:
    after `start_jax`)."""
    from ppo_lab.envs.gymnax_api import gymnax

    env, params = gymnax.make(gymnax_id)
    return not hasattr(env.action_space(params), "n")


def run_purejaxrl(checkout, config: dict, continuous: bool, seeds: int) -> dict:
    """PureJaxRL's own training at `config`, seeds vmapped; its per-seed scores."""
    if continuous:
        module = purejaxrl_peer.load_continuous(checkout, config["ENV_NAME"])
    else:
        module = purejaxrl_peer.load(checkout)
    train_fn = jax.jit(jax.vmap(module.make_train(dict(config))))  # make_train writes into its config
    keys = jax.random.split(jax.random.PRNGKey(0), seeds)
    t0 = time.perf_counter()
    out = jax.block_until_ready(train_fn(keys))
    wall = time.perf_counter() - t0
    per_update = parity.log_wrapper_per_update(jax.device_get(out["metrics"]))
    steps = len(per_update[0]) * config["NUM_ENVS"] * config["NUM_STEPS"]
    return {"label": "purejaxrl", "seeds": seeds, "timesteps": steps, "wall_s": wall, "sps": seeds * steps / wall,
            "per_update": per_update, "score": parity.tail_mean(per_update)}


def lab_result(label: str, run_dir: Path, wall_s: float | None = None) -> dict:
    """A lab run's per-seed scores, from its run dir."""
    summary = rundir.read_summary(run_dir) or rundir.RunSummary()
    per_update = parity.lab_per_update(run_dir)
    steps = summary.timesteps or max(row["timesteps"] for row in rundir.read_metrics(Path(run_dir) / rundir.METRICS))
    return {"label": label, "seeds": len(per_update), "timesteps": steps,
            "wall_s": wall_s if wall_s is not None else summary.wall_s, "sps": summary.sps,
            "compile_s": summary.compile_s, "eval": summary.eval, "run_dir": str(run_dir),
            "per_update": per_update, "score": parity.tail_mean(per_update)}


def run_lab(label: str, overrides: list[str], seeds: int, workdir: Path) -> dict:
    """The lab trained here, as launch.py trains it (`run.entry.train`), `seeds` seeds vmapped."""
    run_dir = Path(tempfile.mkdtemp(prefix=f"{label}_", dir=workdir)) / "run"
    t0 = time.perf_counter()
    train(compose([*overrides, f"num_seeds={seeds}"]), run_dir)
    return lab_result(label, run_dir, time.perf_counter() - t0)


def lab_cases(cfg: dict, continuous: bool, preset: list[str], cases: list[str] | None) -> dict[str, list[str]]:
    """{case: the lab's overrides}: the preset, and PureJaxRL's network where the preset's differs."""
    at_peer = preset + purejaxrl_settings.peer_network_overrides(cfg, continuous)
    every = {"lab": preset, "lab_at_peer_network": at_peer, "lab_as_purejaxrl": at_peer + ["ppo.bootstrap_truncation=false"]}
    if cases is None:
        cases = ["lab"] + (["lab_at_peer_network"] if purejaxrl_settings.network_differences(cfg, continuous) else [])
    return {case: every[case] for case in cases}


def with_summary(result: dict) -> dict:
    s = mean_summary(result["score"], TRAIN_RETURN)
    return {**result, "mean": s["mean"], "ci_low": s["ci_low"], "ci_high": s["ci_high"], "summary": s}


def lab_config(args) -> tuple[dict, list[str]]:
    """The lab's config (a given run's own, or the preset's composed) and the overrides that make it."""
    preset = ([f"experiment={args.experiment}"] if args.experiment else []) + list(args.overrides)
    if args.lab_run_dir is None:
        return compose(preset), preset
    cfg = rundir.read_config(args.lab_run_dir)
    if args.experiment and cfg.get("experiment") != args.experiment:
        raise SystemExit(f"{args.lab_run_dir} ran experiment={cfg.get('experiment')}, not {args.experiment}")
    return cfg, preset


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("overrides", nargs="*", help="Hydra overrides on the preset (both sides), e.g. hardware=gpu")
    parser.add_argument("--purejaxrl", default=None, help=f"PureJaxRL checkout (default: ${purejaxrl_peer.ENV_VAR})")
    parser.add_argument("--experiment", default=None, help="the preset, e.g. zoo/cartpole")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--lab-run-dir", type=Path, default=None, help="a finished lab run of the preset (else trained here)")
    parser.add_argument("--cases", nargs="+", default=None, choices=["purejaxrl", *LAB_CASES],
                        help="default: purejaxrl, lab, and lab_at_peer_network where the networks differ")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    cfg, preset = lab_config(args)
    set_xla_flag("xla_cpu_enable_concurrency_optimized_scheduler", "false")  # see the module docstring
    start_jax(compose(preset)["hardware"])  # before PureJaxRL's code imports gymnax (which starts XLA's backend)
    continuous = is_continuous(cfg["env"]["gymnax_id"])
    try:
        config = purejaxrl_settings.peer_config(cfg, continuous)
    except purejaxrl_settings.Unexpressible as exc:
        print(f"PureJaxRL cannot be given this preset: {exc}", file=sys.stderr)
        return 2
    wanted = args.cases or ["purejaxrl", *lab_cases(cfg, continuous, preset, None)]
    labs = lab_cases(cfg, continuous, preset, [c for c in wanted if c != "purejaxrl"])
    try:
        purejaxrl_peer.load(args.purejaxrl)  # fails here, before any training, where it cannot be imported
    except purejaxrl_peer.PeerUnavailable as exc:
        print(f"PureJaxRL: {exc}", file=sys.stderr)
        return 2
    # The output JSON: settings, device and every case so far (mean, 95% interval, per seed).
    head = {"settings": {"experiment": args.experiment or cfg.get("experiment"), "overrides": list(args.overrides),
                         "purejaxrl_file": "ppo_continuous_action.py" if continuous else "ppo.py",
                         "checkout": str(purejaxrl_peer.find_checkout(args.purejaxrl)), "purejaxrl": config,
                         "lab_overrides": labs, "differences": purejaxrl_settings.differences(cfg, continuous)},
            "device": jax.devices()[0].device_kind, "backend": jax.default_backend()}
    results = []
    with tempfile.TemporaryDirectory(prefix="ppo_lab_zoo_parity_") as workdir:
        for case in wanted:
            if case == "purejaxrl":
                results.append(run_purejaxrl(args.purejaxrl, config, continuous, args.seeds))
            elif case == "lab" and args.lab_run_dir is not None:
                results.append(lab_result("lab", args.lab_run_dir))
            else:
                results.append(run_lab(case, labs[case], args.seeds, Path(workdir)))
            print(parity.table(results[-1:]), file=sys.stderr)
            if args.out:  # after each case: a later failure keeps it
                rundir.write_json_atomic(args.out, {**head, "cases": [with_summary(r) for r in results]})
    print(parity.table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
