"""Final evaluation of trained policies, and `ppo-lab evaluate RUN_DIR` (a trained run loaded back
from its latest checkpoint by `load_trained`, which `ppo-lab replay` uses too).

Episodic evaluation: `eval.episodes` envs per seed run until each finishes its first
episode (or `eval.max_steps`), played twice from the same resets: sampling actions from the
policy (gymnax-blines' protocol, and PureJaxRL's) under `episode_return_sampled` /
`episode_length_sampled`, and greedy (argmax, or a Gaussian's mean) under `episode_return_greedy`
/ `episode_length_greedy`; `episode_return` / `episode_length`, the run's headline, are the play
`eval.deterministic` names (greedy by default). One compiled program plays both: the choice is
its argument. The evaluation key depends only on the seed, so evaluating the same checkpoint
twice on the same device layout gives bit-identical numbers. Envs that define an extra protocol
(a survival evaluation, say) name it under `evaluations` in their `conf/env/*.yaml`; its metrics
join the episodic ones. One that cannot be loaded stops the run (a PartError), never drops silently.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp

from ppo_lab import parts, rundir
from ppo_lab.errors import ConfigError
from ppo_lab.hardware import start_jax
from ppo_lab.ppo.parallel import make_mesh, replica_template
from ppo_lab.ppo.policies import for_env
from ppo_lab.ppo.rollout import action_policy, batched_mask, batched_reset, batched_step, initial_memory, rollout
from ppo_lab.ppo.train import env_params_argument
from ppo_lab.run import checkpoint
from ppo_lab.run.build import build
from ppo_lab.rundir import SUMMARY, read_summary, write_summary

log = logging.getLogger(__name__)


EVAL_KEY_SALT = 0x5EED
# The plays of the episodic evaluation, by the suffix of their metrics (`metric_names.PLAYS`).
PLAYS = {"sampled": False, "greedy": True}  # play -> the policy's `deterministic`
EPISODIC = ("episode_return", "episode_length")


def episodic_returns(env, env_params, policy, key, episodes: int, max_steps: int, memory=None):
    """Mean return and length of each env's first episode (capped at `max_steps`);
    `policy(obs, key, mask) -> (actions, extras)` as `ppo.rollout` takes it; an env's action
    mask, if it has one, is honoured. A recurrent policy starts from `memory`
    (`ppo.rollout.initial_memory`), its state carried from step to step."""
    reset_key, run_key = jax.random.split(key)
    obs, state = batched_reset(env, env_params, reset_key, episodes)
    zeros = jnp.zeros((episodes,), jnp.float32)

    def record(stats, step):
        # Only each env's first episode counts: `active` drops to 0 once it has ended.
        ret, length, active = stats
        ret = ret + step.reward * active
        length = length + active
        active = active * (1.0 - jnp.logical_or(step.terminated, step.truncated))
        return (ret, length, active), None

    out = rollout(batched_step(env, env_params, episodes), policy, state, obs, run_key, max_steps,
                  record=record, stats=(zeros, zeros, jnp.ones_like(zeros)), action_mask=batched_mask(env, env_params),
                  memory=memory)
    ret, length, _ = out.stats
    return {"episode_return": ret.mean(), "episode_length": length.mean()}


def eval_key(seed: int):
    return jax.random.fold_in(jax.random.PRNGKey(seed), EVAL_KEY_SALT)


def episode_runner(cfg, env, env_params, network):
    """The jitted episodic evaluation of one seed's parameters: `(params, key, greedy) -> metrics`,
    `greedy` a traced bool (`jnp.bool_`: sampled and greedy play share the program). An
    env whose envs live outside JAX (EnvPool) evaluates on envs of its own (`env.for_evaluation()`).
    An env whose params are data takes them as the program's argument (every reward mode of
    such an env is one program, as in training: `env_params_argument`)."""
    cap = cfg.eval.max_steps if cfg.eval.max_steps is not None else env.episode_limit(env_params)
    if cap is None:
        raise ValueError("the env has no episode limit; set eval.max_steps")
    env = env.for_evaluation()  # an env outside JAX (EnvPool, Gymnasium): a pool of its own
    dist = for_env(env, env_params, cfg.network.squash)  # greedy: argmax, or the Gaussian's mean
    argument = env_params_argument(env, env_params)

    def episodes(params, key, greedy, env_params=env_params):
        policy = action_policy(network, params, greedy, dist)
        return episodic_returns(env, env_params, policy, key, cfg.eval.episodes, int(cap),
                                memory=initial_memory(network, cfg.eval.episodes))

    return jax.jit(episodes) if argument is None else partial(jax.jit(episodes), env_params=argument)


def episodic_plays(run, params, key, deterministic: bool) -> dict[str, float]:
    """Both plays of one seed from the same key: the headline `<name>` as the play
    `deterministic` names, then each play's metrics under `<name>_<play>`."""
    plays = {play: jax.device_get(run(params, key, jnp.bool_(greedy))) for play, greedy in PLAYS.items()}
    headline = plays["greedy" if deterministic else "sampled"]
    metrics = {name: float(headline[name]) for name in EPISODIC}
    for play, values in plays.items():
        metrics.update({f"{name}_{play}": float(values[name]) for name in EPISODIC})
    return metrics


def unevaluated(num_seeds: int) -> dict[str, list]:
    """The episodic metrics of seeds with nothing to evaluate (every seed diverged): None each."""
    return {name: [None] * num_seeds for name in (*EPISODIC, *(f"{n}_{p}" for n in EPISODIC for p in PLAYS))}


def evaluate_seeds(cfg, env, env_params, network, params_per_seed: list, run=None, keys=None) -> dict[str, list[float]]:
    """metric -> one value per seed (in the order of `cfg.seeds`). `run`: an `episode_runner`
    for the same env, network and eval settings, compiled once for many runs (a vmap group).
    `keys`: each seed's evaluation key (default: `eval_key(seed)`; along training, `along.along_key(seed)`)."""
    run = episode_runner(cfg, env, env_params, network) if run is None else run
    outside_jax = env.lives_outside_jax
    extras = [parts.load(f"env.evaluations.{name}", path) for name, path in cfg.env.evaluations.items()]
    results: dict[str, list[float]] = {}
    keys = [eval_key(seed) for seed in cfg.seeds] if keys is None else keys
    for seed, params, key in zip(cfg.seeds, params_per_seed, keys):
        if outside_jax:  # host copies: a slice of a device-sharded state would make XLA partition the env's call
            params = jax.device_get(params)
        metrics = episodic_plays(run, params, key, cfg.eval.deterministic)
        for extra in extras:  # each `evaluate(cfg, env, env_params, network, params, key) -> {metric: value}`
            metrics.update(extra(cfg, env, env_params, network, params, key))
        for name, value in metrics.items():
            results.setdefault(name, []).append(value)
    return results


def params_per_seed(state, layout, num_seeds: int) -> list:
    """Each seed's parameters from a replica-stacked state (envs layout: replica 0)."""
    return [jax.tree.map(lambda x: x[i], state.params) for i in layout.seed_replicas(num_seeds)]


def load_trained(run_dir: Path, eval_episodes: int | None = None, deterministic: bool | None = None):
    """`(cfg, comp, state, meta)` for the latest checkpoint in `run_dir` (`ppo-lab evaluate` and
    `ppo-lab replay`): the run's validated RunConfig (optionally with other evaluation
    settings), its `build.Components`, the replica-stacked learner state (`params_per_seed`
    takes it) and the checkpoint's JSON (`update`, `timesteps`, ...). Applies the run's
    `hardware` settings before XLA's backend starts. Raises FileNotFoundError when the
    directory has no config.yaml or no complete checkpoint."""
    run_dir = Path(run_dir)
    cfg = rundir.load_run_config(run_dir, eval_episodes=eval_episodes, deterministic=deterministic)  # jax-free
    devices = start_jax(cfg.hardware)
    if not rundir.has_checkpoint(run_dir / rundir.CHECKPOINTS):
        # Checked before building anything: fail in a second, not after a compile.
        raise FileNotFoundError(f"no complete checkpoint in {run_dir / rundir.CHECKPOINTS}")
    comp = build(cfg, len(devices))
    mesh = make_mesh(comp.layout, devices)
    template = replica_template(comp.trainer.init, comp.layout, cfg.seeds, mesh, *comp.init_arguments())
    loaded = checkpoint.load_verified(run_dir / rundir.CHECKPOINTS, template)  # damaged ones left in place
    return cfg, comp, loaded.state, loaded.meta


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Re-evaluate a saved run from its latest checkpoint.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--episodes", type=int, default=None, help="episodes per seed (default: the run's eval.episodes)")
    parser.add_argument("--sampled", action="store_true", help="episode_return from sampled play, not argmax (both "
                        "plays are reported anyway, as episode_return_sampled and episode_return_greedy)")
    parser.add_argument("--write", action="store_true", help="also write the result into summary.json's eval")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[%(levelname)s] %(message)s")
    try:
        cfg, comp, state, meta = load_trained(args.run_dir, eval_episodes=args.episodes,
                                              deterministic=False if args.sampled else None)
    except (ConfigError, FileNotFoundError) as exc:
        # A config this lab cannot read (one written by a much older lab lacks keys added since
        # whose old behaviour is not known here) or no checkpoint: say which, no traceback.
        print(f"ppo-lab evaluate: {args.run_dir}: {exc}", file=sys.stderr)
        return 2
    result = evaluate_seeds(cfg, comp.env, comp.env_params, comp.network, params_per_seed(state, comp.layout, cfg.num_seeds))
    out = {"run_dir": str(args.run_dir), "update": meta["update"], "seeds": cfg.seeds, "eval": result}
    print(json.dumps(out, indent=2))
    if args.write:
        summary = read_summary(args.run_dir)
        if summary is None:
            print(f"ppo-lab evaluate: {args.run_dir} has no {SUMMARY} to write the evaluation into", file=sys.stderr)
            return 1
        summary.eval = result
        write_summary(args.run_dir, summary)
    return 0
