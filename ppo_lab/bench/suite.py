"""Performance suite: where the time goes, and what seeds, devices and the cache buy.

    ppo-lab benchmark                      # full suite (a few minutes on 2 cores)
    ppo-lab benchmark --quick --out b.json # small version (tests), JSON to b.json
    ppo-lab benchmark --envs cartpole hardware.host_devices=1   # extra Hydra overrides
    ppo-lab benchmark --envs pendulum,brax_inverted_pendulum    # continuous control
    ppo-lab benchmark --markdown docs/benchmark_gpu.json        # a JSON's tables as markdown (ppo_lab.bench.markdown)

Measured in this process, per environment (config composed by name with Hydra's compose API,
`experiment=<name>` when that experiment exists, else `env=<name>`), all on ONE device at the
env's configured `ppo.num_envs`, timed after compilation:
- `env_sps`: the env alone, random actions, through the same rollout loop (`ppo.rollout`);
- `rollout_sps`: policy + env (the trainer's own rollout: forward pass, sampling, log-prob,
  value, truncation bootstrap, stacked transitions);
- `train_sps`: full PPO updates (the trainer's own jitted chunk);
- their ratios and the time split of one training step: env / policy forward / update.

- `recurrent`: the same three for the env's network with a GRU cell (`network.recurrent=gru`; `--quick`: the first env's only)
  against the feed-forward one measured above, in this process: what memory costs.

Measured in fresh processes (`launch.py ... benchmark=true`, wall time from outside, i.e.
start-up + compile + training, the way a user pays it), CartPole:
- `seed_process_wall_s`: one seed, one process; `seeds16_vmapped_wall_s`: 16 seeds vmapped
  in one process (both with an empty compilation cache); `seeds16_speedup` =
  16 x seed_process_wall_s / seeds16_vmapped_wall_s;
- `devices2_speedup`: training steps/s with the host split into 2 XLA devices (seeds sharded)
  over 1 device, same config;
- `compile_s_cold` / `compile_s_warm`: compile seconds of the same config in two fresh
  processes sharing a fresh persistent compilation cache (first empty, then warm);
- `purejaxrl_cartpole`: training steps/s at PureJaxRL's published CartPole settings
  (`purejaxrl_settings.CARTPOLE` in the lab's keys, a time-limit cut ending the episode as in
  PureJaxRL), one seed on one device.

Sections in processes of their own (their own JAX start-up):
- `purejaxrl_side_by_side` (`ppo_lab.bench.sidebyside`): the lab against PureJaxRL itself,
  imported from a checkout (`--purejaxrl PATH` or $PPO_LAB_PUREJAXRL), interleaved rounds,
  ratios against the bar; `{"skipped": reason}` when PureJaxRL is not given or not importable;
- `accelerator` (`ppo_lab.bench.accel`): the reference-scale experiment at 1-16 seeds, at
  every precision of `hardware.precision` (on a GPU/TPU, or with `--accelerator`).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp

from ppo_lab import rundir
from ppo_lab.bench import accel, markdown, purejaxrl_settings, sidebyside
from ppo_lab.bench.markdown import whole
from ppo_lab.analysis.compare import compare as compare_runs
from ppo_lab.bench.configs import compose, env_overrides, known_env
from ppo_lab.config import validate
from ppo_lab.estimators import finite_mean
from ppo_lab.config_keys import PROJECT_ROOT  # where its processes run
from ppo_lab.hardware import host_core_count, start_jax
from ppo_lab.host_cpu import cpu_record
from ppo_lab.judging.tables import formatted
from ppo_lab.launching.command_line import fail
from ppo_lab.ppo.rollout import batched_reset, batched_step, rollout
from ppo_lab.ppo.hypers import Hypers
from ppo_lab.ppo.train import make_trainer
from ppo_lab.run.build import build

DEFAULT_ENVS = ("cartpole", "foraging")

# Sizes of everything the suite runs. `min_s`: least timed seconds per in-process measure.
SIZES = {
    "full": dict(min_s=2.0, train_chunk=1, env_overrides=[],
                 seed_timesteps=500_000, seeds16_timesteps=500_000, devices_seeds=4, devices_timesteps=250_000,
                 compile_timesteps=16 * 128 * 4, purejaxrl_timesteps=500_000, chunk_updates=25, timed_min=1.0),
    "quick": dict(min_s=0.3, train_chunk=1, env_overrides=["ppo.num_envs=8", "ppo.num_steps=16", "ppo.update_epochs=1", "ppo.num_minibatches=1"],
                  seed_timesteps=16 * 128 * 2, seeds16_timesteps=16 * 128 * 2, devices_seeds=2, devices_timesteps=16 * 128 * 2,
                  compile_timesteps=16 * 128 * 2, purejaxrl_timesteps=4 * 128 * 16, chunk_updates=4, timed_min=0.05),
}
BAR = {"seeds16_speedup": 3.0, "devices2_speedup": 1.3, "compile_cache_speedup": 3.0}


def available_envs(names) -> list[str]:
    """The names the suite can select (`configs.known_env`); the others skipped, with a word."""
    for name in names:
        if not known_env(name):
            print(f"[benchmark] skipping env {name!r}: no conf/experiment/{name}.yaml or conf/env/{name}.yaml",
                  file=sys.stderr)
    return [name for name in names if known_env(name)]


# --- in-process measurements ----------------------------------------------------------------
def timed_calls(fn, args, steps_per_call: int, min_s: float) -> tuple[float, float]:
    """(compile seconds, steps/s): compile, one warm-up call (the first run of an executable
    can be much slower: one-time kernel set-up), then calls until min_s has passed. A first
    call of 10 s or more is the measurement (such set-up costs are then a small part)."""
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    first = time.perf_counter() - t0
    if first >= max(10.0, 5 * min_s):
        return compile_s, steps_per_call / first
    calls, t0 = 0, time.perf_counter()
    while True:
        jax.block_until_ready(compiled(*args))
        calls += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= min_s:
            return compile_s, calls * steps_per_call / elapsed


def env_only_rollout(env, env_params, num_envs: int, num_steps: int, env_state, obs, key):
    """The trainer's rollout loop with random actions (the action space's own `sample`, as the env
    contract requires it) and no network: what the env alone costs; records rewards and dones."""
    sample = jax.vmap(env.action_space(env_params).sample)

    def random_policy(obs, k, mask=None):
        return sample(jax.random.split(k, num_envs)), None

    def keep(_, step):
        return (), (step.reward, jnp.logical_or(step.terminated, step.truncated))

    return rollout(batched_step(env, env_params, num_envs), random_policy, env_state, obs, key, num_steps, record=keep)


def measure_env(name: str, extra: list[str], size: dict, with_rollout: bool = True) -> dict:
    overrides = env_overrides(name) + list(size["env_overrides"]) + list(extra) + ["num_seeds=1", "ppo.auto_scale=false"]
    resolved = compose(overrides)
    cfg = validate(resolved)
    comp = build(cfg, 1)
    env, params, network, ppo = comp.env, comp.env_params, comp.network, comp.ppo
    n, steps = ppo.num_envs, ppo.num_steps
    key = jax.random.PRNGKey(0)
    obs, env_state = jax.jit(lambda k: batched_reset(env, params, k, n))(key)

    def env_only(env_state, obs, key):
        return env_only_rollout(env, params, n, steps, env_state, obs, key)

    k = size["train_chunk"]
    trainer = make_trainer(ppo, env, params, network, num_envs=n, chunk_updates=k)
    # The traced hyperparameters and the update count as arguments, as a run's programs take them.
    hypers, num_updates = Hypers.of(ppo), jnp.asarray(trainer.num_updates, jnp.int32)
    learner = jax.jit(trainer.init)(*jax.random.split(key), hypers, num_updates)
    start = jnp.asarray(0, jnp.int32)
    if trainer.num_updates < k:
        raise ValueError(f"{name}: ppo.total_timesteps gives {trainer.num_updates} updates, fewer than {k}")

    env_compile, env_sps = timed_calls(env_only, (env_state, obs, key), n * steps, size["min_s"])
    train_compile, train_sps = timed_calls(trainer.chunk, (learner, start, hypers, num_updates), k * ppo.batch_size, size["min_s"])
    if not with_rollout:
        return {"overrides": overrides, "env_sps": env_sps, "train_sps": train_sps,
                "compile_s": {"env": env_compile, "train_chunk": train_compile}}
    roll_compile, rollout_sps = timed_calls(trainer.collect, (learner, hypers), n * steps, size["min_s"])
    t_env, t_roll, t_train = 1 / env_sps, 1 / rollout_sps, 1 / train_sps
    return {
        "overrides": overrides,
        "num_envs": n, "num_steps": ppo.num_steps, "update_epochs": ppo.update_epochs,
        "num_minibatches": ppo.num_minibatches, "network": cfg.network.kind,
        "env_sps": env_sps, "rollout_sps": rollout_sps, "train_sps": train_sps,
        "train_over_rollout": train_sps / rollout_sps, "rollout_over_env": rollout_sps / env_sps,
        # Share of one training step's time: env stepping, policy in the rollout, PPO update.
        "time_share": {"env": t_env / t_train, "policy": max(t_roll - t_env, 0.0) / t_train,
                       "update": max(t_train - t_roll, 0.0) / t_train},
        "compile_s": {"env": env_compile, "rollout": roll_compile, "train_chunk": train_compile},
    }


def threaded_env(name: str) -> bool:
    """Whether the env steps in worker threads of its own (`env.num_threads`: EnvPool)."""
    return "num_threads" in (compose(env_overrides(name))["env"] or {})


def measure_threads(name: str, all_cores: dict, extra: list[str], size: dict, cores: int) -> dict:
    """Sequential against parallel stepping of an env with worker threads (EnvPool): env-only
    and training steps/s with 1 thread, and with all cores (`all_cores`: the main measurement,
    taken at env.num_threads=cores), as thread count -> steps/s."""
    env_sps, train_sps = {str(cores): all_cores["env_sps"]}, {str(cores): all_cores["train_sps"]}
    if cores > 1:
        one = measure_env(name, list(extra) + ["env.num_threads=1"], size, with_rollout=False)
        env_sps["1"], train_sps["1"] = one["env_sps"], one["train_sps"]
    order = lambda d: dict(sorted(d.items(), key=lambda kv: int(kv[0])))  # noqa: E731
    return {"env_sps_threads": order(env_sps), "train_sps_threads": order(train_sps)}


def timed_thread_runs(launcher: "Launcher", name: str, cores: int, minutes: float) -> dict:
    """One timed training run (`train.duration_min`) per thread count (1 and all cores) in fresh
    processes: their run directories, and `ppo-lab compare` of them (also kept in the JSON)."""
    dirs, labels = [], []
    for threads in sorted({1, cores}):
        label = f"{name.replace(':', '_')}_threads{threads}"
        launcher.run(label, env_overrides(name) + [f"env.num_threads={threads}", f"train.duration_min={minutes}",
                                                   "num_seeds=1"], None)
        dirs.append(launcher.last_dir)
        labels.append(f"threads={threads}")
    records = compare_runs(dirs, labels)
    return {"run_dirs": [str(d) for d in dirs], "compare": records,
            "compare_command": "ppo-lab compare " + " ".join(str(d) for d in dirs) + " --labels " + ",".join(labels)}


def measure_recurrent(name: str, feed_forward: dict, extra: list[str], size: dict) -> dict:
    """The env's network with a GRU between torso and heads against itself feed-forward."""
    gru = measure_env(name, list(extra) + ["network.recurrent=gru"], size)
    return {"overrides": gru["overrides"], "mlp_train_sps": feed_forward["train_sps"], "gru_train_sps": gru["train_sps"],
            "mlp_rollout_sps": feed_forward["rollout_sps"], "gru_rollout_sps": gru["rollout_sps"],
            "gru_over_mlp_train": gru["train_sps"] / feed_forward["train_sps"],
            "gru_over_mlp_rollout": gru["rollout_sps"] / feed_forward["rollout_sps"], "gru_compile_s": gru["compile_s"]}


# --- fresh-process measurements ----------------------------------------------------------
class Launcher:
    """Runs `launch.py ... benchmark=true` in fresh processes and reads their benchmark.json."""

    def __init__(self, workdir: Path, base_env: dict, extra: list[str], verbose: bool):
        self.workdir, self.base_env, self.extra, self.verbose = workdir, base_env, extra, verbose
        self.count = 0

    def run(self, label: str, overrides: list[str], cache: Path | None) -> dict:
        self.count += 1
        run_dir = self.last_dir = self.workdir / f"{self.count:02d}_{label}"
        cache_arg = f"hardware.compilation_cache_dir={cache}" if cache else "hardware.compilation_cache_dir=null"
        cmd = [sys.executable, "-m", "ppo_lab.cli", "train", *overrides, *self.extra, "benchmark=true",
               cache_arg, f"hydra.run.dir={run_dir}"]
        if self.verbose:
            print("[benchmark] $", " ".join(cmd), file=sys.stderr)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=PROJECT_ROOT, env=self.base_env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"{label} failed (exit {proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
        bench = rundir.read_benchmark(run_dir)
        bench.pop("config", None)
        bench["process_wall_s"] = wall
        bench["overrides"] = overrides
        return bench


def measure_processes(launcher: Launcher, size: dict, cpu: bool) -> dict:
    base = ["experiment=cartpole", f"train.chunk_updates={size['chunk_updates']}"]
    w = launcher.workdir
    out: dict = {}

    # One seed, one fresh process, empty cache (cold compile); then again with the cache warm.
    seed_cfg = base + [f"ppo.total_timesteps={size['seed_timesteps']}", "num_seeds=1"]
    cold = launcher.run("seed1_cold", seed_cfg, w / "cache_seed1")
    warm = launcher.run("seed1_warm", seed_cfg, w / "cache_seed1")
    out["seed_process"] = cold
    out["seed_process_warm_cache"] = warm
    out["seed_process_wall_s"] = cold["process_wall_s"]
    out["seed_process_wall_s_warm_cache"] = warm["process_wall_s"]
    out["compile_s_cold"] = cold["compile_s"]
    out["compile_s_warm"] = warm["compile_s"]
    out["compile_cache_speedup"] = cold["compile_s"] / warm["compile_s"]

    # 16 seeds vmapped in one fresh process, default hardware, empty cache.
    s16 = launcher.run("seeds16", base + [f"ppo.total_timesteps={size['seeds16_timesteps']}", "num_seeds=16"], w / "cache_seeds16")
    out["seeds16"] = s16
    out["seeds16_vmapped_wall_s"] = s16["process_wall_s"]
    out["seeds16_speedup"] = 16 * out["seed_process_wall_s"] / s16["process_wall_s"]
    out["seeds16_speedup_vs_warm_cache_processes"] = (
        (out["seed_process_wall_s"] + 15 * out["seed_process_wall_s_warm_cache"]) / s16["process_wall_s"])

    # 1 vs 2 host devices, seeds sharded, same config (steps/s after compile).
    if cpu:
        dev_cfg = base + [f"ppo.total_timesteps={size['devices_timesteps']}", f"num_seeds={size['devices_seeds']}"]
        d1 = launcher.run("devices1", dev_cfg + ["hardware.host_devices=1"], w / "cache_devices")
        d2 = launcher.run("devices2", dev_cfg + ["hardware.host_devices=2"], w / "cache_devices")
        out["devices1"], out["devices2"] = d1, d2
        out["devices2_speedup"] = d2["sps"] / d1["sps"]
    else:
        out["devices2_speedup"] = None

    # PureJaxRL's CartPole defaults, one seed on one device (full suite only).
    if size is SIZES["quick"]:
        out["purejaxrl_cartpole"] = None
        return out
    peer = {**purejaxrl_settings.CARTPOLE, "TOTAL_TIMESTEPS": size["purejaxrl_timesteps"]}
    pj = [*purejaxrl_settings.lab_overrides(peer), "num_seeds=1", "ppo.bootstrap_truncation=false",
          f"train.chunk_updates={size['chunk_updates']}"]
    if cpu:
        pj.append("hardware.host_devices=1")
    p = launcher.run("purejaxrl_defaults", pj, w / "cache_purejaxrl")
    out["purejaxrl_cartpole"] = {
        "train_sps": p["sps"], "train_wall_s": p["wall_s"], "compile_s": p["compile_s"],
        "process_wall_s": p["process_wall_s"], "timesteps": p["timesteps"],
        "final_return": finite_mean((p.get("final") or {}).get("train/mean_episode_return")),
    }
    return out


def keep_or_remove(workdir: Path, keep: bool, result: dict, threaded: list[str]) -> None:
    """The fresh-process runs' folder after the suite: kept (`--keep`; its path in the result,
    where the tests read those runs) or removed (the timed thread runs' comparison stays in the
    result, their directories are gone)."""
    if keep:
        print(f"[benchmark] kept {workdir}", file=sys.stderr)
        result["kept"] = str(workdir)
        return
    shutil.rmtree(workdir, ignore_errors=True)
    for name in threaded:
        result["envs"][name].get("timed_threads", {})["run_dirs_removed"] = "kept only with --keep"


# --- report ---------------------------------------------------------------------------------
def format_table(result: dict) -> str:
    """The suite's tables as `--markdown` renders them (`bench/markdown.suite_tables`), what only
    a run in progress shows (threads, the GRU, the bar's verdicts), and the sections' own tables."""
    lines = ["", f"ppo_lab benchmark ({'quick' if result['quick'] else 'full'}) on {result['machine']['description']}", "",
             "\n\n".join(markdown.suite_tables(result)), ""]
    for name, r in result["envs"].items():
        if "env_sps_threads" in r:
            lines.append(f"{name:<10} threads -> env sps " + ", ".join(f"{t}: {whole(v)}" for t, v in r["env_sps_threads"].items())
                         + " | train sps " + ", ".join(f"{t}: {whole(v)}" for t, v in r["train_sps_threads"].items()))
        if "timed_threads" in r:
            lines.append(f"{'':<10} timed runs: {r['timed_threads']['compare_command']}")
    for name, r in (result.get("recurrent") or {}).items():
        lines.append(f"{name:<10} GRU vs feed-forward: train sps {whole(r['gru_train_sps'])} vs {whole(r['mlp_train_sps'])} "
                     f"({r['gru_over_mlp_train']:.2f}x), rollout sps {whole(r['gru_rollout_sps'])} vs "
                     f"{whole(r['mlp_rollout_sps'])} ({r['gru_over_mlp_rollout']:.2f}x)")
    for key, check in (result.get("bar") or {}).items():
        lines.append(f"{key} {formatted(check['value'], '.2f')}x: {'PASS' if check['pass'] else 'FAIL'} (bar {check['bar']}x)")
    for key, section in (("purejaxrl_side_by_side", sidebyside), ("accelerator", accel)):
        if result.get(key):
            lines += ["", section.format_table(result[key])]
    return "\n".join(lines)


def run_section(module: str, args: list[str], workdir: Path, env: dict) -> dict:
    """A section that needs its own process (its own JAX start-up): `python -m module ARGS --out`."""
    out = workdir / f"{module.rsplit('.', 1)[-1]}.json"
    cmd = [sys.executable, "-m", module, *args, "--out", str(out)]
    print("[benchmark] $ " + " ".join(cmd), file=sys.stderr)
    proc = subprocess.run(cmd, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0 or not out.exists():
        return {"skipped": f"{module} failed (exit {proc.returncode}): {proc.stderr[-2000:]}"}
    return rundir.read_json(out)


def machine_info(devices) -> dict:
    cpu = cpu_record()["model_name"] or platform.machine()
    cores = host_core_count()
    return {"cpu": cpu, "cores": cores, "platform": devices[0].platform, "jax": jax.__version__,
            "python": platform.python_version(), "description": f"{cores} cores, {cpu}, {devices[0].platform}, jax {jax.__version__}"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every measurement (e.g. hardware=gpu)")
    parser.add_argument("--quick", action="store_true", help="small sizes (tests): well under 2 minutes")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON result here")
    parser.add_argument("--envs", default=",".join(DEFAULT_ENVS), help="comma-separated env names (default: %(default)s)")
    parser.add_argument("--no-processes", action="store_true", help="skip the fresh-process measurements")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark run directories")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--purejaxrl", default=None,
                        help="PureJaxRL checkout for the side-by-side section (default: $PPO_LAB_PUREJAXRL; skipped when neither)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the side-by-side section")
    parser.add_argument("--accelerator", action="store_true", help="run the accelerator section (always on a GPU/TPU; --quick: toy size)")
    parser.add_argument("--markdown", type=Path, default=None, metavar="FILE.json",
                        help="print the markdown tables of a benchmark JSON (e.g. docs/benchmark_gpu.json) and exit; measures nothing")
    args = parser.parse_args(argv)
    if args.markdown is not None:
        try:
            print(markdown.render_file(args.markdown), end="")
        except ValueError as e:
            fail(e)
        return 0
    size = SIZES["quick" if args.quick else "full"]
    t_start = time.perf_counter()
    base_env = dict(os.environ)

    # Hardware before anything runs: the in-process measures use ONE device (the per-device figures).
    hw = compose(list(args.overrides))["hardware"]
    devices = start_jax({**hw, "host_devices": 1, "compilation_cache_dir": None})

    result: dict = {"quick": args.quick, "sizes": size, "machine": machine_info(devices), "overrides": args.overrides, "envs": {}}
    cores = host_core_count()
    threaded = []
    for name in available_envs([e for e in args.envs.split(",") if e]):
        print(f"[benchmark] {name}: env / rollout / train steps/s in this process ...", file=sys.stderr)
        if threaded_env(name):  # EnvPool: all cores, then 1 thread (sequential vs parallel)
            threaded.append(name)
            result["envs"][name] = r = measure_env(name, list(args.overrides) + [f"env.num_threads={cores}"], size)
            print(f"[benchmark] {name}: env-only and train steps/s with 1 thread ...", file=sys.stderr)
            r.update(measure_threads(name, r, list(args.overrides), size, cores))
        else:
            result["envs"][name] = r = measure_env(name, list(args.overrides), size)
        result[name] = {k: r[k] for k in ("env_sps", "rollout_sps", "train_sps", "train_over_rollout", "rollout_over_env",
                                          "env_sps_threads", "train_sps_threads") if k in r}
        if name in threaded:
            continue  # its network is an experiment's choice; the GRU comparison is CartPole's and foraging's
        if args.quick and result.get("recurrent"):
            continue  # --quick (the tests): the GRU comparison of the first env only, the same code
        print(f"[benchmark] {name}: the same with a GRU (network.recurrent=gru) ...", file=sys.stderr)
        result.setdefault("recurrent", {})[name] = measure_recurrent(name, r, list(args.overrides), size)

    if not args.no_processes:
        workdir = Path(tempfile.mkdtemp(prefix="ppo_lab_bench_"))
        try:
            launcher = Launcher(workdir, base_env, list(args.overrides), args.verbose)
            for name in threaded:
                print(f"[benchmark] {name}: timed runs ({size['timed_min']} min) with 1 thread and {cores} ...", file=sys.stderr)
                result["envs"][name]["timed_threads"] = timed_thread_runs(launcher, name, cores, size["timed_min"])
            print(f"[benchmark] fresh-process runs (CartPole) in {workdir} ...", file=sys.stderr)
            result.update(measure_processes(launcher, size, devices[0].platform == "cpu"))
        finally:
            keep_or_remove(workdir, args.keep, result, threaded)
        result["bar"] = {
            k: {"value": result.get(k), "bar": v, "pass": result.get(k) is not None and result[k] >= v} for k, v in BAR.items()
        }
    with tempfile.TemporaryDirectory(prefix="ppo_lab_bench_sections_") as sections:
        quick = ["--quick"] if args.quick else []
        peer = [f"--purejaxrl={args.purejaxrl}"] if args.purejaxrl else []
        result["purejaxrl_side_by_side"] = run_section(
            sidebyside.__name__, [*args.overrides, *peer, *quick, f"--rounds={1 if args.quick else args.rounds}"], Path(sections), base_env)
        if args.accelerator or devices[0].platform != "cpu":
            result["accelerator"] = run_section(accel.__name__, [*args.overrides, *quick], Path(sections), base_env)
    result["suite_wall_s"] = time.perf_counter() - t_start
    print(format_table(result))
    print(f"\nsuite wall time {result['suite_wall_s']:.0f} s")
    if args.out:
        rundir.write_json_atomic(args.out, result)
        print(f"wrote {args.out}")
    return 0
