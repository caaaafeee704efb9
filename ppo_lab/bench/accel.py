"""The suite's accelerator section: the reference-scale experiment at 1..16 seeds, every precision.

    python -m ppo_lab.bench.accel [--seeds 1,2,4,8,16] [--precisions P1,P2]
        [--minibatches 1] [--updates 8] [--variants all|NAME,...] [--quick] [--out f.json] [hydra overrides]

(`--precisions` defaults to every `hardware.precision` the lab knows, `ppo_lab.config.PRECISIONS`.)

(`ppo-lab benchmark --accelerator` runs it in a fresh process as one of its sections.)

Per (seeds, precision): `experiment=goodhart reward=ground_truth` (192 envs x 128 steps, the
reference CNN) built and laid out as a run would be, its chunk of `--updates` updates compiled
(`compile_s`), XLA's memory analysis of it read (`memory_gb`, per device) and checked against
the device's free memory (`run.memory`: a config that will not fit is reported as such, not
run), then timed after one warm-up call: `sps` is env steps of all seeds per second.
`matrix_fraction` = sps x FLOPs per env step / the device's measured bf16 matmul rate, where
FLOPs per env step = forward FLOPs of one observation (XLA's cost analysis of the network) x
(1 rollout forward + 3 x update_epochs: forward and backward of every sample each epoch).
`--quick` shrinks everything (tests: the code path on a CPU). `--variants` measures each named
variant of `VARIANTS` (the switches that may make the GPU faster, each a set of overrides; a row
says its `variant`) beside `baseline` at every (seeds, precision): one command for a short GPU
lease, whose rows say which switches to keep as `hardware=gpu`'s defaults.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp

from ppo_lab import rundir
from ppo_lab.bench.configs import compose
from ppo_lab.config import PRECISIONS, validate
from ppo_lab.hardware import start_jax
from ppo_lab.ppo.parallel import init_replicas, make_mesh, replica_sharding
from ppo_lab.ppo.rollout import policy_and_value
from ppo_lab.run.build import build
from ppo_lab.run.loop import LoweredChunk
from ppo_lab.run.memory import ChunkTooLarge, check_fits

# This module by name, as `python -m` runs it (each row in a fresh process).
MODULE = "ppo_lab.bench.accel"
SEEDS = (1, 2, 4, 8, 16)
REFERENCE = ["experiment=goodhart", "reward=ground_truth", "ppo.auto_scale=false"]
QUICK = ["env.grid_size=16", "env.food_min=4", "env.food_max=8", "env.poison_min=4", "env.poison_max=8",
         "ppo.num_envs=4", "ppo.num_steps=8", "ppo.update_epochs=1", "network.conv_channels=[4,4]", "network.dense_size=16"]
# The switches a GPU lease compares, each as overrides over the reference run (baseline: none).
VARIANTS = {
    "baseline": [],
    "users_minibatches": ["ppo.num_minibatches=4"],  # as users run the experiment (the reference trainer: 1)
    "conv_native": ["hardware.conv=native"],
    "conv_xla": ["hardware.conv=xla"],
    "rollout_uint8": ["ppo.rollout_obs_dtype=uint8"],  # observations stored as the world's bytes
}


def matmul_rate(device, n: int) -> float:
    """FLOP/s of an n x n x n bf16 matmul on `device` (best of a few; the matrix rate)."""
    a = jax.device_put(jnp.ones((n, n), jnp.bfloat16), device)
    f = jax.jit(lambda x: x @ x)
    jax.block_until_ready(f(a))
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        jax.block_until_ready(f(a))
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best


def forward_flops(network, obs) -> float:
    """FLOPs of the network on one observation, by XLA's cost analysis (no loops inside)."""
    params = jax.eval_shape(network.init, jax.random.PRNGKey(0), obs[:1])
    cost = jax.jit(lambda p, o: policy_and_value(network, p, o)).lower(params, obs[:1]).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return float(cost.get("flops", 0.0))


def measure(seeds: int, precision: str, overrides: list[str], updates: int, devices, min_s: float) -> dict:
    cfg = validate(compose(REFERENCE + overrides + [f"num_seeds={seeds}", f"hardware.precision={precision}", "benchmark=true"]))
    comp = build(cfg, len(devices))
    layout, ppo = comp.layout, comp.ppo
    trainer = dataclasses.replace(comp.trainer, chunk_updates=updates)
    mesh = make_mesh(layout, devices)
    state = init_replicas(trainer.init, layout, cfg.seeds, mesh, *comp.init_arguments())
    hypers = comp.hypers.sharded(replica_sharding(mesh))
    row = {"seeds": seeds, "precision": precision, "conv": comp.network.conv, "num_minibatches": ppo.num_minibatches,
           "num_envs": ppo.num_envs, "num_steps": ppo.num_steps, "layout": layout.as_dict()}
    t0 = time.perf_counter()
    lowered = LoweredChunk(trainer, mesh, state, hypers)
    compiled = lowered.lowered.compile()
    row["compile_s"] = time.perf_counter() - t0
    try:
        need = check_fits(compiled, devices[: layout.num_devices], cfg.hardware.memory_limit_gb, num_seeds=seeds,
                          num_envs=ppo.num_envs, num_minibatches=ppo.num_minibatches, precision=precision)
    except ChunkTooLarge as exc:
        return {**row, "status": "does not fit", "error": str(exc)}
    row["memory_gb"] = None if need is None else need.total / 1e9
    args = (state, lowered.start_arg(0), hypers, *lowered.constant_args)
    jax.block_until_ready(compiled(*args))  # warm-up: first-run set-up
    calls, t0 = 0, time.perf_counter()
    while calls == 0 or time.perf_counter() - t0 < min_s:
        jax.block_until_ready(compiled(*args))
        calls += 1
    elapsed = time.perf_counter() - t0
    row["sps"] = calls * updates * ppo.batch_size * seeds / elapsed
    row["forward_flops"] = forward_flops(comp.network, jnp.zeros(state.obs.shape[1:], state.obs.dtype))
    row["flops_per_step"] = row["forward_flops"] * (1 + 3 * ppo.update_epochs)
    return {**row, "status": "ok"}


def measure_in_fresh_process(seeds: int, precision: str, child_args: list[str]) -> dict:
    """One row in its own process, as a run gets the device: nothing left over from earlier
    rows. (In one process, 16 seeds failed at run time on an H100 with one 34.7 GiB allocation
    after the 8-seed row, although XLA's analysis fits and a fresh process runs it.)"""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "row.json"
        cmd = [sys.executable, "-m", MODULE, "--seeds", str(seeds), "--precisions", precision,
               "--in-process", "--out", str(out), *child_args]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode == 0 and out.exists():
            return rundir.read_json(out)["rows"][0]
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"seeds": seeds, "precision": precision, "status": "failed", "error": f"exit {proc.returncode}: {' | '.join(tail)[:500]}"}


def run_section(seeds, precisions, overrides, updates, quick: bool, devices, out: Path | None = None,
                child_args: list[str] | None = None, variants: tuple[str, ...] = ()) -> dict:
    """Every (variant, seeds, precision) row (no variants: the reference as `overrides` say);
    with `child_args`, each row in a fresh process."""
    rate = matmul_rate(devices[0], 512 if quick else 8192)
    rows = []
    result = {"device": str(devices[0].device_kind), "num_devices": len(devices), "matmul_bf16_flops": rate,
              "updates_per_call": updates, "overrides": REFERENCE + overrides, "rows": rows}
    for variant, s, p in [(v, s, p) for v in variants or (None,) for s in seeds for p in precisions]:
        extra = VARIANTS[variant] if variant else []
        if child_args is not None:
            row = measure_in_fresh_process(s, p, [*child_args, *extra])
        else:
            try:
                row = measure(s, p, overrides + extra, updates, devices, 0.2 if quick else 3.0)
            except Exception as exc:  # noqa: BLE001 - an out-of-memory at run time, say: record, go on
                row = {"seeds": s, "precision": p, "status": "failed", "error": f"{type(exc).__name__}: {str(exc)[:500]}"}
        if variant:
            row = {"variant": variant, "variant_overrides": extra, **row}
        if row.get("sps"):
            row["matrix_fraction"] = row["sps"] * row["flops_per_step"] / (rate * row["layout"]["num_devices"])
        rows.append(row)
        print("[accelerator] " + format_row(row), file=sys.stderr, flush=True)
        if out is not None:  # after every row: a long section cut short keeps what it measured
            rundir.write_json_atomic(out, result)
    return result


def format_row(r: dict) -> str:
    head = f"{r.get('variant', ''):>17} {r['seeds']:>5} {r['precision']:>5}"
    if r.get("status") != "ok":
        return f"{head}  {r.get('status')}: {r.get('error', '')[:160]}"
    return f"{head} {r['sps']:>12,.0f} {r['memory_gb'] or 0:>8.3g} {r['compile_s']:>8.1f} {r.get('matrix_fraction', 0):>8.1%}"


def format_table(result: dict) -> str:
    lines = [f"accelerator section: {result['device']} x{result['num_devices']}, bf16 matmul "
             f"{result['matmul_bf16_flops'] / 1e12:.1f} TFLOP/s measured; {' '.join(result['overrides'])}",
             f"{'variant':>17} {'seeds':>5} {'prec':>5} {'steps/s':>12} {'mem GB':>8} {'compile':>8} {'matrix':>8}"]
    return "\n".join(lines + [format_row(r) for r in result["rows"]])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides (e.g. hardware=gpu)")
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    parser.add_argument("--minibatches", type=int, default=1, help="ppo.num_minibatches (1: the reference trainer's)")
    parser.add_argument("--updates", type=int, default=8, help="updates per timed call")
    parser.add_argument("--variants", default="", help=f"'all' or some of {list(VARIANTS)}: each beside the others")
    parser.add_argument("--quick", action="store_true", help="toy sizes (tests)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--in-process", action="store_true",
                        help="measure every row in this process (default: each row in a fresh process)")
    args = parser.parse_args(argv)
    variants = tuple(VARIANTS) if args.variants == "all" else tuple(v for v in args.variants.split(",") if v)
    if unknown := [v for v in variants if v not in VARIANTS]:
        parser.error(f"--variants {unknown[0]}: one of {list(VARIANTS)} or all")
    logging.basicConfig(level=logging.WARNING)
    overrides = (QUICK if args.quick else []) + [f"ppo.num_minibatches={args.minibatches}"] + list(args.overrides)
    devices = start_jax(compose(REFERENCE + overrides)["hardware"])
    child_args = None if args.in_process else [
        "--minibatches", str(args.minibatches), "--updates", str(args.updates), *(["--quick"] if args.quick else []),
        *args.overrides]
    result = run_section([int(s) for s in args.seeds.split(",")], args.precisions.split(","), overrides,
                         1 if args.quick else args.updates, args.quick, devices, args.out, child_args, variants)
    print(format_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
