"""The survival evaluation's ledger: what each world's agents ate, how long they lived.

`init(num_envs)` makes the ledger, `record(ledger, ate_food, ate_poison, died)` adds one step
of every world (jittable, fixed size: it runs inside the evaluation's `lax.scan`), and
`summarize(ledger, final_energy, ...)` turns it into the protocol's metrics on the host.

Lives without lists
-------------------
A life ends at each death, and every agent alive at the end is a right-censored life. The
per-life numbers need no list of lives: each world keeps the running food and poison of its
current life, and on a death adds that life's efficiency (and length, and length squared) to
running sums, then restarts the life's counters. The survivors are added on the host at the
end from the counters of their unfinished lives. Lives of length 0 (an agent born on the very
last step) are no lives: they count neither in survival nor in efficiency.

Efficiency, three ways (all in [0, 1])
--------------------------------------
- `efficiency_per_life` (the reference's headline, `DeathEvent.efficiency()` averaged in its
  `analysis/report.py`): the mean over lives, deaths and survivors, of food / (food + poison)
  eaten in that life; a life that ate nothing counts 1.0. Short lives that starve without eating
  pull it up; short lives that die of one poison pull it down.
- `food_share`: total food / (total food + total poison) over every world and step, the
  reference's "aggregate efficiency"; NaN when nothing was eaten.
- `efficiency_per_world`: per world (one lineage of agents), food / (food + poison) over the
  whole run, averaged over the worlds that ate anything (NaN if none did); the worlds left out
  are counted in `efficiency_worlds_excluded`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def init(num_envs: int) -> dict[str, jax.Array]:
    zeros_i = jnp.zeros(num_envs, jnp.int32)
    zeros_f = jnp.zeros(num_envs, jnp.float32)
    return dict(
        food=zeros_i, poison=zeros_i, deaths=zeros_i,  # per world, whole run
        life=zeros_i, life_food=zeros_i, life_poison=zeros_i,  # the current life
        life_sum=zeros_f, life_sq=zeros_f, eff_sum=zeros_f,  # over finished lives
        life_min=jnp.full(num_envs, jnp.iinfo(jnp.int32).max, jnp.int32), life_max=zeros_i,
    )


def life_efficiency(food, poison):
    """food / (food + poison) of one life, 1.0 for a life that ate nothing (the reference's)."""
    eaten = food + poison
    return jnp.where(eaten > 0, food / jnp.maximum(eaten, 1), 1.0).astype(jnp.float32)


def record(ledger: dict, ate_food: jax.Array, ate_poison: jax.Array, died: jax.Array) -> dict:
    """One step of every world. What the agent ate on the step it died belongs to that life."""
    life = ledger["life"] + 1
    life_food = ledger["life_food"] + ate_food
    life_poison = ledger["life_poison"] + ate_poison
    lf = life.astype(jnp.float32)
    return dict(
        food=ledger["food"] + ate_food,
        poison=ledger["poison"] + ate_poison,
        deaths=ledger["deaths"] + died,
        life=jnp.where(died, 0, life),
        life_food=jnp.where(died, 0, life_food),
        life_poison=jnp.where(died, 0, life_poison),
        life_sum=ledger["life_sum"] + jnp.where(died, lf, 0.0),
        life_sq=ledger["life_sq"] + jnp.where(died, lf * lf, 0.0),
        eff_sum=ledger["eff_sum"] + jnp.where(died, life_efficiency(life_food, life_poison), 0.0),
        life_min=jnp.where(died, jnp.minimum(ledger["life_min"], life), ledger["life_min"]),
        life_max=jnp.where(died, jnp.maximum(ledger["life_max"], life), ledger["life_max"]),
    )


def _ratio(num: float, den: float) -> float:
    return num / den if den else float("nan")


def _survival(ledger: dict, deaths: float, censored: np.ndarray) -> dict[str, float]:
    n_lives = deaths + len(censored)
    completed = float(ledger["life_sum"].astype(np.float64).sum())
    life_sum = completed + censored.sum()
    life_sq = float(ledger["life_sq"].astype(np.float64).sum()) + (censored**2).sum()
    mean = _ratio(life_sum, n_lives)
    std = float(np.sqrt(max(life_sq / n_lives - mean * mean, 0.0))) if n_lives else float("nan")
    died_any = ledger["deaths"] > 0
    # Every counted life lies between the shortest and the longest of these.
    extremes = np.concatenate([ledger["life_min"][died_any], ledger["life_max"][died_any], censored])
    return {
        "survival_mean": float(mean),
        "survival_std": std,
        "survival_mean_completed": _ratio(completed, deaths),
        "survival_min": float(extremes.min()) if extremes.size else float("nan"),
        "survival_max": float(extremes.max()) if extremes.size else float("nan"),
    }


def _efficiencies(ledger: dict, deaths: float, alive: np.ndarray) -> dict[str, float]:
    food, poison = ledger["food"].astype(np.float64), ledger["poison"].astype(np.float64)
    total_food, total_poison = float(food.sum()), float(poison.sum())
    ate = (food + poison) > 0
    per_world = float(np.mean(food[ate] / (food[ate] + poison[ate]))) if ate.any() else float("nan")
    survivors = np.asarray(life_efficiency(ledger["life_food"], ledger["life_poison"]))[alive]
    eff_sum = float(ledger["eff_sum"].astype(np.float64).sum()) + float(survivors.astype(np.float64).sum())
    return {
        "efficiency_per_life": _ratio(eff_sum, deaths + len(survivors)),
        "food_share": _ratio(total_food, total_food + total_poison),
        "efficiency_per_world": per_world,
        "efficiency_worlds_excluded": float((~ate).sum()),
    }


def summarize(ledger: dict, final_energy, *, num_envs: int, num_steps: int, food_energy: float,
              poison_energy: float, move_cost: float) -> dict[str, float]:
    """The protocol's metrics (Python floats) from a finished ledger; see `survival`."""
    ledger = {k: np.asarray(v) for k, v in jax.device_get(ledger).items()}
    agent_steps = float(num_envs) * num_steps
    deaths = float(ledger["deaths"].sum())
    total_food, total_poison = float(ledger["food"].sum()), float(ledger["poison"].sum())
    alive = ledger["life"] > 0
    censored = ledger["life"][alive].astype(np.float64)
    per_1k = 1000.0 / agent_steps
    return {
        **_efficiencies(ledger, deaths, alive),
        "energy_per_1k": (total_food * food_energy + total_poison * poison_energy
                          - move_cost * agent_steps) * per_1k,
        "food_per_1k": total_food * per_1k,
        "poison_per_1k": total_poison * per_1k,
        "deaths_per_1k": deaths * per_1k,
        **_survival(ledger, deaths, censored),
        "num_deaths": deaths,
        "num_censored": float(len(censored)),
        "agent_steps": agent_steps,
        "total_food": total_food,
        "total_poison": total_poison,
        "mean_final_energy": float(np.asarray(final_energy).mean()),
    }
