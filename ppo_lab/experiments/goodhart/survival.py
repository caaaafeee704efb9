"""The reference's "continuous survival" evaluation of a foraging policy.

Protocol
--------
`num_envs` worlds (vmapped) run for `num_steps` steps in one jitted `lax.scan`:
- energy always on, also for modes trained immortal (`proxy`): `immortal` is forced off;
- no episode cap: the step limit is ignored;
- respawn after death: a fresh agent (full energy) on a uniform cell (with `env.respawn_in_place`,
  where it died, as the reference's evaluator does: it steps the same env) of the SAME world, with the
  same item counts. The world lives on across lives, as a population living in one habitat
  would, and it costs no world reset. Each world is laid out once by `env.reset`, so its counts
  come from the ranges in `env_params` (pass e.g. `food_min = food_max = 128` for the
  reference's fixed 128/128).

Metrics (all Python floats; `lives.py` keeps the books and defines the efficiencies)
-----------------------------------------------------------------------------------
Totals are over all agents and steps; `agent_steps = num_envs * num_steps`.
- `efficiency_per_life` (the reference's headline), `food_share`, `efficiency_per_world`: see `lives`.
- `food_per_1k`, `poison_per_1k`, `deaths_per_1k`: totals / agent_steps * 1000.
- `energy_per_1k`: (food*1 - poison*2 - 0.01*agent_steps) / agent_steps * 1000, with the
  env's own `food_energy`, `poison_energy` and `move_cost` (the reference's 1, -2, 0.01): the
  true objective. `paid_per_1k`: what the reward mode pays for the same counts (`paid_per_1k`).
- Survival: every death ends a *completed* life (an event, its length in steps). At the end,
  each agent still alive is a right-censored life of the length it has lived so far (lives of
  length 0, i.e. agents that died on the very last step, are not counted).
  `survival_mean` / `survival_std` (population std) are over completed AND censored lives, the
  censored ones counted at their censored length, as in the reference; because censored lives
  are cut short this underestimates the true mean lifetime when censoring is common (e.g. an
  agent that never dies has survival = num_steps). `survival_mean_completed` is over deaths only
  (NaN if none); `survival_min` / `survival_max` over all counted lives.
- Extras: `num_deaths`, `num_censored`, `agent_steps`, `total_food`, `total_poison`,
  `efficiency_worlds_excluded`, `mean_final_energy`.

Sampled and greedy
------------------
The runner's hook (`evaluate_policy`) plays each seed's policy twice in the same worlds (the
same key): sampling actions from the policy, the reference's protocol, under the metric names
above; and taking the argmax, under `<name>_greedy`. Greedy play removes accidental eating.
"""

from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp

from ppo_lab.envs.foraging import lives
from ppo_lab.ppo.rollout import Step, action_policy, initial_memory, rollout

PolicyFn = Callable[[jax.Array, jax.Array], jax.Array]


def _make_run(env, make_policy, num_envs: int, num_steps: int, memory=None):
    """`run(key, env_params, policy_params)`; `make_policy(policy_params)`: a policy as
    `ppo.rollout` takes it. The policy's parameters are an argument, not a closed-over constant,
    so one compile serves every seed. A recurrent policy starts from `memory`
    (`ppo.rollout.initial_memory`); a death ends a life, and the state is zeroed before the
    reborn agent's first step."""

    def run(key, params, policy_params):
        k_reset, k_run = jax.random.split(key)
        _, state = jax.vmap(env.reset_env, in_axes=(0, None))(
            jax.random.split(k_reset, num_envs), params)
        get_obs = jax.vmap(env.get_obs, in_axes=(0, None))
        acc = lives.init(num_envs)

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
            ev = step.info
            return lives.record(acc, ev["ate_food"], ev["ate_poison"], step.terminated), None

        out = rollout(env_step, make_policy(policy_params), state, get_obs(state, params), k_run, num_steps,
                      record=record, stats=acc, memory=memory)
        return out.stats, out.env_state.energy

    return jax.jit(run)


def survival_evaluation(env, env_params, policy_fn: PolicyFn, key: jax.Array, num_envs: int,
                        num_steps: int) -> dict[str, float]:
    """Continuous-survival evaluation; see the module docstring for the protocol and metrics.

    `policy_fn(obs_batch [num_envs, V, V, C], key) -> actions [num_envs]` must be jittable.
    """
    if num_envs < 1 or num_steps < 1:
        raise ValueError(f"num_envs and num_steps must be >= 1, got {num_envs}, {num_steps}")
    run = _make_run(env, lambda _: lambda obs, k, mask=None: (policy_fn(obs, k), None), num_envs, num_steps)
    return _summarize(run, env_params, key, None, num_envs, num_steps)


def _summarize(run, env_params, key, policy_params, num_envs: int, num_steps: int) -> dict[str, float]:
    acc, energy = run(key, env_params.replace(immortal=False), policy_params)
    metrics = lives.summarize(acc, energy, num_envs=num_envs, num_steps=num_steps,
                              food_energy=float(env_params.food_energy),
                              poison_energy=float(env_params.poison_energy),
                              move_cost=float(env_params.move_cost))
    return {**metrics, "paid_per_1k": paid_per_1k(metrics, env_params)}


def paid_per_1k(metrics: dict[str, float], env_params) -> float:
    """What the mode pays per 1k agent steps of the protocol, from its counts: its reward for
    each food, poison, step and death (the immortal proxy's too, whose agents die here; the
    handhold mode's shaping toward food is not a count and is left out)."""
    paid = (metrics["total_food"] * float(env_params.reward_food) + metrics["total_poison"] * float(env_params.reward_poison)
            + metrics["num_deaths"] * float(env_params.reward_death) + metrics["agent_steps"] * float(env_params.reward_step))
    return paid * 1000.0 / metrics["agent_steps"]


def evaluate_policy(cfg, env, env_params, network, params, key) -> dict[str, float]:
    """The runner's hook (`env.evaluations.survival`, run by `ppo_lab.run.evaluate`): the
    survival protocol for one seed's parameters, sized by `eval.survival_envs` x
    `eval.survival_steps`, played twice in the same worlds: sampled (the reference's protocol)
    under each metric's name, and greedy (argmax) under `<name>_greedy`. `eval.deterministic` governs only the episodic evaluation."""
    n, steps = cfg.eval.survival_envs, cfg.eval.survival_steps
    key = jax.random.fold_in(key, 1)
    run = _policy_run(env, network, n, steps)  # one program for both plays: greedy is an argument
    sampled = _summarize(run, env_params, key, (params, jnp.bool_(False)), n, steps)
    greedy = _summarize(run, env_params, key, (params, jnp.bool_(True)), n, steps)
    return {**sampled, **{f"{name}_greedy": value for name, value in greedy.items()}}


@functools.lru_cache(maxsize=8)
def _policy_run(env, network, num_envs: int, num_steps: int):
    """The survival run of `network`'s policy; its policy parameters are `(params, greedy)`, the
    flag traced, so sampled and greedy play share one compiled program (compiling the foraging
    world's scan twice was about half of a foraging run's evaluation time)."""
    return _make_run(env, lambda params_and_greedy: action_policy(network, *params_and_greedy), num_envs, num_steps,
                     initial_memory(network, num_envs))
