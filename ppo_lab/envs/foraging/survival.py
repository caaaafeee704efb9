"""The reference's "continuous survival" evaluation of a foraging policy.

Protocol
--------
`num_envs` worlds (vmapped) run for `num_steps` steps in one jitted `lax.scan`:
- energy always on, also for modes trained immortal (`proxy`): `immortal` is forced off;
- no episode cap: the step limit is ignored;
- respawn after death: a fresh agent (full energy) on a uniform cell of the SAME world, with the
  same item counts. The world lives on across lives, as a population living in one habitat
  would, and it costs no world reset. Each world is laid out once by `env.reset`, so its counts
  come from the ranges in `env_params` (pass e.g. `food_min = food_max = 128` for the
  reference's fixed 128/128).

Metrics (all Python floats)
---------------------------
Totals are over all agents and steps; `agent_steps = num_envs * num_steps`.
- `food_per_1k`, `poison_per_1k`, `deaths_per_1k`: totals / agent_steps * 1000.
- `energy_per_1k`: (food*1 - poison*2 - 0.01*agent_steps) / agent_steps * 1000, with the
  env's own `food_energy`, `poison_energy` and `move_cost` (the reference's 1, -2, 0.01).
- `efficiency`: per world (one agent lineage per world), food / (food + poison) over the whole
  run, averaged over the worlds whose agents ate anything; worlds that ate nothing are left out
  (their ratio is undefined) and counted in `efficiency_agents_excluded`. NaN if no agent ate.
- Survival: every death ends a *completed* life (an event, its length in steps). At the end,
  each agent still alive is a right-censored life of the length it has lived so far (lives of
  length 0, i.e. agents that died on the very last step, are not counted).
  `survival_mean` / `survival_std` (population std) are over completed AND censored lives, the
  censored ones counted at their censored length, as in the reference; because censored lives
  are cut short this underestimates the true mean lifetime when censoring is common (e.g. an
  agent that never dies has survival = num_steps). `survival_mean_completed` is over deaths only
  (NaN if none); `survival_min` / `survival_max` over all counted lives.
- Extras: `num_deaths`, `num_censored`, `agent_steps`, `total_food`, `total_poison`,
  `efficiency_agents_excluded`, `mean_final_energy`.
"""

from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ppo_lab.ppo.rollout import Step, action_policy, rollout

PolicyFn = Callable[[jax.Array, jax.Array], jax.Array]


def _make_run(env, policy_fn, num_envs: int, num_steps: int):
    """`run(key, env_params, policy_params)`; `policy_fn(policy_params, obs, key)`. The policy's
    parameters are an argument, not a closed-over constant, so one compile serves every seed."""

    def run(key, params, policy_params):
        k_reset, k_run = jax.random.split(key)
        _, state = jax.vmap(env.reset_env, in_axes=(0, None))(
            jax.random.split(k_reset, num_envs), params)
        get_obs = jax.vmap(env.get_obs, in_axes=(0, None))
        zeros_i = jnp.zeros(num_envs, jnp.int32)
        zeros_f = jnp.zeros(num_envs, jnp.float32)
        acc = dict(food=zeros_i, poison=zeros_i, deaths=zeros_i, life=zeros_i,
                   life_sum=zeros_f, life_sq=zeros_f,
                   life_min=jnp.full(num_envs, jnp.iinfo(jnp.int32).max, jnp.int32),
                   life_max=zeros_i)

        def env_step(key, state, actions):
            """The protocol's step: no step limit, and a dead agent is reborn in its world."""
            k_env, k_life = jax.random.split(key)
            state, ev = jax.vmap(env.transition, in_axes=(0, 0, 0, None))(
                jax.random.split(k_env, num_envs), state, actions, params)
            died = ev["died"]
            # Same world, same counts: only the agent is new.
            reborn = jax.vmap(lambda k, s: env.new_life(k, s, params, redraw_counts=False))(
                jax.random.split(k_life, num_envs), state)
            state = jax.tree.map(
                lambda r, s: jnp.where(died.reshape(died.shape + (1,) * (s.ndim - 1)), r, s),
                reborn, state)
            return get_obs(state, params), state, None, died, None, ev

        def record(acc, step: Step):
            ev, died = step.info, step.terminated
            life = acc["life"] + 1
            lf = life.astype(jnp.float32)
            return dict(
                food=acc["food"] + ev["ate_food"],
                poison=acc["poison"] + ev["ate_poison"],
                deaths=acc["deaths"] + died,
                life=jnp.where(died, 0, life),
                life_sum=acc["life_sum"] + jnp.where(died, lf, 0.0),
                life_sq=acc["life_sq"] + jnp.where(died, lf * lf, 0.0),
                life_min=jnp.where(died, jnp.minimum(acc["life_min"], life), acc["life_min"]),
                life_max=jnp.where(died, jnp.maximum(acc["life_max"], life), acc["life_max"]),
            ), None

        def policy(obs, k, mask=None):
            return policy_fn(policy_params, obs, k), None

        out = rollout(env_step, policy, state, get_obs(state, params), k_run, num_steps,
                      record=record, stats=acc)
        return out.stats, out.env_state.energy

    return jax.jit(run)


def survival_evaluation(env, env_params, policy_fn: PolicyFn, key: jax.Array, num_envs: int,
                        num_steps: int) -> dict[str, float]:
    """Continuous-survival evaluation; see the module docstring for the protocol and metrics.

    `policy_fn(obs_batch [num_envs, V, V, C], key) -> actions [num_envs]` must be jittable.
    """
    if num_envs < 1 or num_steps < 1:
        raise ValueError(f"num_envs and num_steps must be >= 1, got {num_envs}, {num_steps}")
    run = _make_run(env, lambda _, obs, k: policy_fn(obs, k), num_envs, num_steps)
    return _summarize(run, env_params, key, None, num_envs, num_steps)


def _summarize(run, env_params, key, policy_params, num_envs: int, num_steps: int) -> dict[str, float]:
    acc, energy = run(key, env_params.replace(immortal=False), policy_params)
    acc = jax.tree.map(np.asarray, acc)
    energy = np.asarray(energy)

    agent_steps = float(num_envs) * num_steps
    food, poison = acc["food"].astype(np.float64), acc["poison"].astype(np.float64)
    deaths = float(acc["deaths"].sum())
    total_food, total_poison = float(food.sum()), float(poison.sum())

    ate = (food + poison) > 0
    efficiency = float(np.mean(food[ate] / (food[ate] + poison[ate]))) if ate.any() else float(
        "nan")

    # Lives: completed (deaths) and censored (alive at the end, length > 0).
    censored = acc["life"][acc["life"] > 0].astype(np.float64)
    n_lives = deaths + len(censored)
    life_sum = float(acc["life_sum"].astype(np.float64).sum()) + censored.sum()
    life_sq = float(acc["life_sq"].astype(np.float64).sum()) + (censored**2).sum()
    mean = life_sum / n_lives if n_lives else float("nan")
    std = float(np.sqrt(max(life_sq / n_lives - mean * mean, 0.0))) if n_lives else float("nan")
    died_any = acc["deaths"] > 0
    mins = [float(acc["life_min"][died_any].min())] if died_any.any() else []
    maxs = [float(acc["life_max"][died_any].max())] if died_any.any() else []
    if len(censored):
        mins.append(float(censored.min()))
        maxs.append(float(censored.max()))

    fe, pe, mc = (float(env_params.food_energy), float(env_params.poison_energy),
                  float(env_params.move_cost))
    per_1k = 1000.0 / agent_steps
    return {
        "efficiency": efficiency,
        "energy_per_1k": (total_food * fe + total_poison * pe - mc * agent_steps) * per_1k,
        "food_per_1k": total_food * per_1k,
        "poison_per_1k": total_poison * per_1k,
        "deaths_per_1k": deaths * per_1k,
        "survival_mean": float(mean),
        "survival_std": std,
        "survival_mean_completed": float(acc["life_sum"].astype(np.float64).sum() / deaths)
        if deaths else float("nan"),
        "survival_min": min(mins) if mins else float("nan"),
        "survival_max": max(maxs) if maxs else float("nan"),
        "num_deaths": deaths,
        "num_censored": float(len(censored)),
        "agent_steps": agent_steps,
        "total_food": total_food,
        "total_poison": total_poison,
        "efficiency_agents_excluded": float((~ate).sum()),
        "mean_final_energy": float(energy.mean()),
    }


def evaluate_policy(cfg, env, env_params, network, params, key) -> dict[str, float]:
    """The runner's hook (`ppo_lab.run.evaluate.EXTRA_EVALUATIONS`): the survival protocol for one
    seed's parameters, sized by `eval.survival_envs` x `eval.survival_steps`, greedy unless
    `eval.deterministic=false`. Metrics not in the protocol's headline set keep their names."""
    run = _policy_run(env, network, cfg.eval.deterministic, cfg.eval.survival_envs, cfg.eval.survival_steps)
    return _summarize(run, env_params, jax.random.fold_in(key, 1), params, cfg.eval.survival_envs, cfg.eval.survival_steps)


@functools.lru_cache(maxsize=8)
def _policy_run(env, network, deterministic: bool, num_envs: int, num_steps: int):
    def policy(params, obs, key):
        return action_policy(network, params, deterministic)(obs, key)[0]

    return _make_run(env, policy, num_envs, num_steps)
