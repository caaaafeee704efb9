"""Final evaluation of trained policies, and `ppo-lab evaluate RUN_DIR`.

Episodic evaluation: `eval.episodes` envs per seed run until each finishes its first
episode (or `eval.max_steps`), greedy (argmax) by default. The evaluation key depends only on
the seed, so evaluating the same checkpoint twice on the same device layout gives
bit-identical numbers. Envs that define an extra protocol (the foraging world's survival
evaluation) add their metrics through `EXTRA_EVALUATIONS`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
from pathlib import Path
from typing import Callable

log = logging.getLogger(__name__)

# env name -> "module:function(cfg, env, env_params, network, params, key) -> dict[str, float]"
EXTRA_EVALUATIONS: dict[str, str] = {"foraging": "ppo_lab.envs.foraging.survival:evaluate_policy"}

EVAL_KEY_SALT = 0x5EED


def make_policy(network, deterministic: bool) -> Callable:
    """`policy(params, obs_batch, key) -> actions`: argmax, or a sample from the policy."""
    import jax

    def policy(params, obs, key):
        logits, _ = network.apply(params, obs)
        return jax.numpy.argmax(logits, -1) if deterministic else jax.random.categorical(key, logits)

    return policy


def episodic_returns(env, env_params, policy, params, key, episodes: int, max_steps: int):
    """Mean return and length of each env's first episode (capped at `max_steps`)."""
    import jax
    import jax.numpy as jnp

    reset_key, run_key = jax.random.split(key)
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(reset_key, episodes), env_params)
    zeros = jnp.zeros((episodes,), jnp.float32)

    def step(carry, step_key):
        obs, state, ret, length, active = carry
        act_key, env_key = jax.random.split(step_key)
        action = policy(params, obs, act_key)
        obs, state, reward, terminated, truncated, _ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
            jax.random.split(env_key, episodes), state, action, env_params
        )
        ret = ret + reward * active
        length = length + active
        active = active * (1.0 - jnp.logical_or(terminated, truncated))
        return (obs, state, ret, length, active), None

    carry = (obs, state, zeros, zeros, jnp.ones_like(zeros))
    (_, _, ret, length, _), _ = jax.lax.scan(step, carry, jax.random.split(run_key, max_steps))
    return {"episode_return": ret.mean(), "episode_length": length.mean()}


def eval_key(seed: int):
    import jax

    return jax.random.fold_in(jax.random.PRNGKey(seed), EVAL_KEY_SALT)


def episode_cap(cfg, env_params) -> int:
    if cfg.eval.max_steps is not None:
        return cfg.eval.max_steps
    cap = getattr(env_params, "max_steps_in_episode", None) or getattr(env_params, "max_steps", None)
    if cap is None:
        raise ValueError("the env has no episode limit; set eval.max_steps")
    return int(cap)


def evaluate_seeds(cfg, env, env_params, network, params_per_seed: list) -> dict[str, list[float]]:
    """metric -> one value per seed (in the order of `cfg.seeds`)."""
    import jax

    policy = make_policy(network, cfg.eval.deterministic)
    cap = episode_cap(cfg, env_params)
    run = jax.jit(lambda p, k: episodic_returns(env, env_params, policy, p, k, cfg.eval.episodes, cap))
    extra = _extra_evaluation(cfg.env["name"])
    results: dict[str, list[float]] = {}
    for seed, params in zip(cfg.seeds, params_per_seed):
        key = eval_key(seed)
        metrics = {k: float(v) for k, v in jax.device_get(run(params, key)).items()}
        if extra is not None:
            metrics.update(extra(cfg, env, env_params, network, params, key))
        for name, value in metrics.items():
            results.setdefault(name, []).append(value)
    return results


def _extra_evaluation(env_name: str):
    target = EXTRA_EVALUATIONS.get(env_name)
    if target is None:
        return None
    module, func = target.split(":")
    try:
        return getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError):
        log.warning("extra evaluation %s is not available", target)
        return None


def params_per_seed(state, layout, num_seeds: int) -> list:
    """Each seed's parameters from a replica-stacked state (envs layout: replica 0)."""
    import jax

    index = range(num_seeds) if layout.mode == "seeds" else [0]
    return [jax.tree.map(lambda x: x[i], state.params) for i in index]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Re-evaluate a saved run from its latest checkpoint.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--episodes", type=int, default=None, help="episodes per seed (default: the run's eval.episodes)")
    parser.add_argument("--sampled", action="store_true", help="sample actions instead of argmax")
    parser.add_argument("--write", action="store_true", help="also write the result into summary.json's eval")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[%(levelname)s] %(message)s")

    from ppo_lab.run.trained import load_trained

    cfg, comp, state, meta = load_trained(args.run_dir, eval_episodes=args.episodes, deterministic=False if args.sampled else None)
    result = evaluate_seeds(cfg, comp.env, comp.env_params, comp.network, params_per_seed(state, comp.layout, cfg.num_seeds))
    out = {"run_dir": str(args.run_dir), "update": meta["update"], "seeds": cfg.seeds, "eval": result}
    print(json.dumps(out, indent=2))
    if args.write:
        from ppo_lab.rundir import update_summary

        update_summary(Path(args.run_dir), {"eval": result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
