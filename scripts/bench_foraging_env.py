"""Env-only throughput of the foraging world: random actions, jitted lax.scan, vmapped envs.

    python scripts/bench_foraging_env.py [--envs 1024] [--steps 256] [--grids 32 128]

Prints env steps per second (compile excluded: the scan is compiled and run once first) for
three auto-reset variants, so the cost of resetting is visible:
- `cheap`: our `step` (next episode in the same world; the default);
- `fresh_world`: our `step` with `fresh_world_on_done` (a new layout each episode, as the
  reference does);
- `gymnax_default`: gymnax's generic `Environment.step` (a full reset computed every step).
Counts: 32x32 uses 8..32 food/poison (same density as the reference), 128x128 the reference's
64..256.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
from gymnax.environments.environment import Environment

from ppo_lab.envs.foraging.world import build


def make_rollout(env, params, num_envs: int, num_steps: int, step_fn):
    def one_step(carry, key):
        state = carry
        k_act, k_step = jax.random.split(key)
        actions = jax.random.randint(k_act, (num_envs,), 0, env.num_actions)
        keys = jax.random.split(k_step, num_envs)
        obs, state, reward, term, trunc, info = jax.vmap(step_fn, in_axes=(0, 0, 0, None))(
            keys, state, actions, params)
        return state, (reward.sum() + obs[:, 0, 0, 0].sum(), term.sum() + trunc.sum())

    @jax.jit
    def rollout(key):
        k_reset, k_run = jax.random.split(key)
        _, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(k_reset, num_envs),
                                                           params)
        state, (chk, dones) = jax.lax.scan(one_step, state, jax.random.split(k_run, num_steps))
        return chk.sum(), dones.sum()

    return rollout


def bench(grid: int, num_envs: int, num_steps: int, variant: str, repeats: int = 3) -> float:
    counts = (8, 32) if grid <= 32 else (64, 256)
    env_cfg = dict(name="foraging", grid_size=grid, food_min=counts[0], food_max=counts[1],
                   poison_min=counts[0], poison_max=counts[1],
                   fresh_world_on_done=variant == "fresh_world")
    env, params = build(env_cfg, {"name": "ground_truth"}, privileged_critic=False)
    step_fn = env.step
    if variant == "gymnax_default":
        step_fn = lambda k, s, a, p: Environment.step(env, k, s, a, p)  # noqa: E731
    rollout = make_rollout(env, params, num_envs, num_steps, step_fn)
    t0 = time.perf_counter()
    jax.block_until_ready(rollout(jax.random.PRNGKey(0)))
    compile_s = time.perf_counter() - t0
    best = float("inf")
    for i in range(repeats):
        t0 = time.perf_counter()
        _, dones = jax.block_until_ready(rollout(jax.random.PRNGKey(i + 1)))
        best = min(best, time.perf_counter() - t0)
    sps = num_envs * num_steps / best
    print(f"grid {grid:4d}  envs {num_envs}  steps {num_steps}  {variant:15s}  "
          f"{sps / 1e6:7.3f} M steps/s  (first call incl. compile {compile_s:.1f} s, "
          f"episode ends {int(dones)})", flush=True)
    return sps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=256)
    ap.add_argument("--grids", type=int, nargs="+", default=[32, 128])
    ap.add_argument("--variants", nargs="+", default=["cheap", "fresh_world", "gymnax_default"])
    args = ap.parse_args()
    print(f"jax {jax.__version__} on {jax.devices()}")
    for grid in args.grids:
        for variant in args.variants:
            bench(grid, args.envs, args.steps, variant)


if __name__ == "__main__":
    main()
