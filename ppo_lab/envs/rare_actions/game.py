"""`env=rare_actions`: a small grid game whose actions differ greatly in how often they are valid.

Why it exists: to test, with seeds and intervals, claims about learning rare actions under
action masking (the rare-action tuning spec): 4 moves that are always valid, one resource
action valid some of the time, and three "programs" valid rarely and only in some states,
whose value shows turns later. gymnax 1.0 API (six-value `step` with auto-reset) plus
`action_mask(state, params)`, which the trainer, evaluation and replay honour.

The game (a `grid_size` x `grid_size` square, no wrap; every number below is a config key)
------------------------------------------------------------------------------------------
- Moves N, E, S, W (always valid; a move into the wall stays put). Stepping on a data item
  collects it (`data_reward`, times `overclock_multiplier` while overclocked); it reappears
  on a random cell. Stepping on the siphon cell picks up a siphon (at most `max_siphons`);
  the siphon cell moves to a random cell.
- `siphon` (the resource action): valid when holding a siphon and a data item is next to the
  agent (4-neighbourhood). Uses one siphon, collects every adjacent item (reward as above)
  and earns one credit per item (at most `max_credits`). Credits pay for programs; moving
  onto data earns none.
- A trace hits every `threat_min`..`threat_max` steps (the countdown is observed): unless
  shielded it costs `trace_penalty` and one point of integrity; at 0 integrity the episode
  terminates. Episodes are truncated after `max_steps`.
- Programs (the rare actions), each valid only when affordable and applicable:
  * `shield` (`shield_cost`): applicable when the trace hits within `shield_warning` steps and
    no shield is up; blocks hits for `shield_steps` steps. With the defaults (warning 4,
    duration 2) a shield raised on the first step it becomes valid expires before the hit:
    reflex wastes it, judgement waits.
  * `overclock` (`overclock_cost`): applicable when no overclock runs and a data item lies
    within `overclock_range` steps; multiplies data rewards for `overclock_steps` steps.
  * `cache` (`cache_cost`): applicable when no cache is pending and more than `cache_delay`
    steps remain; pays `cache_payout` `cache_delay` steps later (lost if the agent dies).
An invalid action (only possible without the mask) is a no-op.

Observation: flat float32: agent, data and siphon-cell maps (`grid_size^2` each), then
siphons, credits, integrity, trace countdown, shield, overclock, cache and time, each scaled
to [0, 1].

Per-step `info["metrics"]` (rollout means in metrics.csv)
---------------------------------------------------------
- `reward/data`, `reward/trace` (negative), `reward/cache`: the reward's components (they sum
  to the reward).
- `actions/move_frac`, `actions/resource_frac`, `actions/program_frac`: the group of the action
  taken (1.0 or 0.0 per step, so the mean is the group's share of actions).
- `actions/program_valid_frac`: 1.0 on steps where some program is valid (how rare they are).
- `actions/rare_first_step_frac`: on steps where a program is taken, 1.0 if it is the first
  step that program is valid (a reflex), else 0.0; NaN on other steps, so its rollout mean
  (a NaN-ignoring mean) is the share of program uses made on the first valid step.
- `true/traces_blocked`: 1.0 on a step where a shield blocked a hit.
"""

from __future__ import annotations

from typing import Any, Mapping

import jax
import jax.numpy as jnp
from flax import struct

from ppo_lab.envs.base import Env
from ppo_lab.envs.env_section import refuse_privileged_critic
from ppo_lab.envs.gymnax_api import environment, spaces
from ppo_lab.envs.rare_actions.config import PARAM_DEFAULTS, check_config

ACTION_NAMES = ("N", "E", "S", "W", "siphon", "shield", "overclock", "cache")
_MOVES = ((-1, 0), (0, 1), (1, 0), (0, -1))
SIPHON, SHIELD, OVERCLOCK, CACHE = 4, 5, 6, 7
PROGRAMS = (SHIELD, OVERCLOCK, CACHE)
# Action groups for the `actions/<group>_frac` metrics.
ACTION_GROUPS = {"move": (0, 1, 2, 3), "resource": (SIPHON,), "program": PROGRAMS}


@struct.dataclass
class EnvState(environment.EnvState):
    agent: jax.Array  # int32 [2]: (row, col)
    data: jax.Array  # int32 [n_data, 2]
    siphon_cell: jax.Array  # int32 [2]
    siphons: jax.Array  # int32
    credits: jax.Array  # int32
    integrity: jax.Array  # int32
    threat: jax.Array  # int32: steps until the next trace hit
    shield: jax.Array  # int32: steps of shield left
    boost: jax.Array  # int32: steps of overclock left
    cache: jax.Array  # int32: steps until the cache pays (0: none pending)
    prev_mask: jax.Array  # bool [num_actions]: the mask one step ago (for the first-valid statistic)
    # `time` (int32, steps in this episode) comes from gymnax's EnvState.


@struct.dataclass
class EnvParams(environment.EnvParams):
    # Defaults: config.PARAM_DEFAULTS (`RareActions.default_params`); see the module docstring.
    data_reward: float = 1.0
    trace_penalty: float = 1.0
    integrity: int = 3
    threat_min: int = 8
    threat_max: int = 14
    max_siphons: int = 2
    max_credits: int = 4
    shield_cost: int = 1
    shield_steps: int = 2
    shield_warning: int = 4
    overclock_cost: int = 2
    overclock_steps: int = 8
    overclock_multiplier: float = 2.0
    overclock_range: int = 2
    cache_cost: int = 1
    cache_delay: int = 8
    cache_payout: float = 2.0


def _manhattan(cells: jax.Array, cell: jax.Array) -> jax.Array:
    return jnp.sum(jnp.abs(cells - cell), axis=-1)


class RareActions(environment.Environment[EnvState, EnvParams], Env):
    """The game above. Static: grid side and number of data items; the rest is EnvParams."""

    def __init__(self, grid_size: int = 5, n_data: int = 3):
        super().__init__()
        self.grid_size = int(grid_size)
        self.n_data = int(n_data)
        self.action_names = list(ACTION_NAMES)
        self._moves = jnp.asarray(_MOVES, jnp.int32)

    def __hash__(self) -> int:
        return hash((type(self), self.grid_size, self.n_data))

    def __eq__(self, other) -> bool:
        return isinstance(other, RareActions) and (self.grid_size, self.n_data) == (other.grid_size, other.n_data)

    @property
    def name(self) -> str:
        return "RareActions"

    @property
    def num_actions(self) -> int:
        return len(ACTION_NAMES)

    @property
    def default_params(self) -> EnvParams:
        return make_params(PARAM_DEFAULTS)

    def action_space(self, params: EnvParams | None = None) -> spaces.Discrete:
        return spaces.Discrete(self.num_actions)

    def observation_space(self, params: EnvParams | None = None) -> spaces.Box:
        return spaces.Box(0.0, 1.0, (3 * self.grid_size**2 + 8,), jnp.float32)

    # ---- the mask -------------------------------------------------------------------------
    def action_mask(self, state: EnvState, params: EnvParams) -> jax.Array:
        """bool[num_actions]: the actions valid in `state`."""
        dist = _manhattan(state.data, state.agent)
        moves = jnp.ones(4, bool)
        siphon = (state.siphons > 0) & jnp.any(dist == 1)
        shield = ((state.credits >= params.shield_cost) & (state.threat <= params.shield_warning)
                  & (state.shield == 0))
        overclock = ((state.credits >= params.overclock_cost) & (state.boost == 0)
                     & jnp.any(dist <= params.overclock_range))
        cache = ((state.credits >= params.cache_cost) & (state.cache == 0)
                 & (params.max_steps_in_episode - state.time > params.cache_delay))
        return jnp.concatenate([moves, jnp.stack([siphon, shield, overclock, cache])])

    # ---- building blocks --------------------------------------------------------------------
    def _random_cells(self, key: jax.Array, n: int) -> jax.Array:
        return jax.random.randint(key, (n, 2), 0, self.grid_size, jnp.int32)

    def get_obs(self, state: EnvState, params: EnvParams | None = None, key=None) -> jax.Array:
        if params is None:
            params = self.default_params
        g = self.grid_size
        flat = lambda cells: cells[..., 0] * g + cells[..., 1]  # noqa: E731
        agent = jnp.zeros(g * g).at[flat(state.agent)].set(1.0)
        data = jnp.zeros(g * g).at[flat(state.data)].add(1.0)
        siphon = jnp.zeros(g * g).at[flat(state.siphon_cell)].set(1.0)
        scalars = jnp.stack([
            state.siphons / params.max_siphons, state.credits / params.max_credits,
            state.integrity / params.integrity, state.threat / params.threat_max,
            state.shield / params.shield_steps, state.boost / params.overclock_steps,
            state.cache / params.cache_delay, state.time / params.max_steps_in_episode,
        ]).astype(jnp.float32)
        return jnp.concatenate([agent, data, siphon, scalars]).astype(jnp.float32)

    def reset_env(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, EnvState]:
        k_cells, k_threat = jax.random.split(key)
        cells = self._random_cells(k_cells, self.n_data + 2)
        zero = jnp.zeros((), jnp.int32)
        state = EnvState(
            time=zero, agent=cells[0], data=cells[2:], siphon_cell=cells[1], siphons=zero,
            credits=zero, integrity=jnp.asarray(params.integrity, jnp.int32),
            threat=jax.random.randint(k_threat, (), params.threat_min, params.threat_max + 1, jnp.int32),
            shield=zero, boost=zero, cache=zero, prev_mask=jnp.zeros(self.num_actions, bool))
        return self.get_obs(state, params), state

    def _collect(self, key, state: EnvState, action, params: EnvParams):
        """Move, siphon and pick-ups: returns the state, data reward and items collected."""
        g = self.grid_size
        move = self._moves[jnp.clip(action, 0, 3)] * ((action >= 0) & (action < 4))
        agent = jnp.clip(state.agent + move, 0, g - 1)
        dist = _manhattan(state.data, agent)
        siphoned = (action == SIPHON) & (dist == 1)
        taken = siphoned | (dist == 0)
        k_data, k_siphon = jax.random.split(key)
        data = jnp.where(taken[:, None], self._random_cells(k_data, self.n_data), state.data)
        multiplier = jnp.where(state.boost > 0, params.overclock_multiplier, 1.0)
        reward = params.data_reward * multiplier * jnp.sum(taken)
        picked = jnp.all(agent == state.siphon_cell)
        siphon_cell = jnp.where(picked, self._random_cells(k_siphon, 1)[0], state.siphon_cell)
        siphons = jnp.minimum(state.siphons + picked - (action == SIPHON), params.max_siphons)
        credits = jnp.minimum(state.credits + jnp.sum(siphoned), params.max_credits)
        state = state.replace(agent=agent, data=data, siphon_cell=siphon_cell,
                              siphons=siphons.astype(jnp.int32), credits=credits.astype(jnp.int32))
        return state, reward

    def _programs_and_timers(self, key, state: EnvState, action, params: EnvParams):
        """Pay for and start a program, run the timers: returns the state and the events."""
        cost = jnp.select([action == SHIELD, action == OVERCLOCK, action == CACHE],
                          [params.shield_cost, params.overclock_cost, params.cache_cost], 0)
        shield = jnp.where(action == SHIELD, params.shield_steps, state.shield)
        threat = state.threat - 1
        hit = threat <= 0
        blocked = hit & (shield > 0)
        damaged = hit & ~blocked
        pays = state.cache == 1
        new_threat = jax.random.randint(key, (), params.threat_min, params.threat_max + 1, jnp.int32)
        state = state.replace(
            credits=state.credits - cost,
            shield=jnp.maximum(shield - 1, 0),
            boost=jnp.where(action == OVERCLOCK, params.overclock_steps, jnp.maximum(state.boost - 1, 0)),
            cache=jnp.where(action == CACHE, params.cache_delay, jnp.maximum(state.cache - 1, 0)),
            threat=jnp.where(hit, new_threat, threat),
            integrity=state.integrity - damaged,
            time=state.time + 1,
        )
        return state, dict(blocked=blocked, damaged=damaged, pays=pays)

    def transition(self, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams):
        """One step, no reset and no time limit: the next state, the reward and the metrics."""
        mask = self.action_mask(state, params)
        action = jnp.asarray(action, jnp.int32)
        valid = mask[action]
        effective = jnp.where(valid, action, -1)  # -1: an invalid action does nothing
        k_collect, k_timers = jax.random.split(key)
        state_c, data_reward = self._collect(k_collect, state, effective, params)
        new, events = self._programs_and_timers(k_timers, state_c, effective, params)
        new = new.replace(prev_mask=mask)
        f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
        is_program = jnp.isin(action, jnp.asarray(PROGRAMS))
        first_valid = valid & ~state.prev_mask[action]
        metrics = {
            "reward/data": f32(data_reward),
            "reward/trace": f32(-params.trace_penalty * events["damaged"]),
            "reward/cache": f32(params.cache_payout * events["pays"]),
            "actions/program_valid_frac": f32(jnp.any(mask[jnp.asarray(PROGRAMS)])),
            "actions/rare_first_step_frac": jnp.where(is_program, f32(first_valid), jnp.nan),
            "true/traces_blocked": f32(events["blocked"]),
        }
        for group, actions in ACTION_GROUPS.items():
            metrics[f"actions/{group}_frac"] = f32(jnp.isin(action, jnp.asarray(actions)))
        reward = metrics["reward/data"] + metrics["reward/trace"] + metrics["reward/cache"]
        return new, reward, self.is_terminated(new, params), metrics

    def step_env(self, key, state, action, params):
        """gymnax's hook (no auto-reset; gymnax's `step` adds it, with `is_truncated`)."""
        state, reward, terminated, metrics = self.transition(key, state, action, params)
        return self.get_obs(state, params), state, reward, terminated, {"metrics": metrics}

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """Integrity gone."""
        return state.integrity <= 0

    def is_truncated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """The step limit reached while alive: `terminated` and `truncated` are never both true."""
        return ~self.is_terminated(state, params) & super().is_truncated(state, params)


# ---- config -> (env, params) -------------------------------------------------------------------
def make_params(c: Mapping[str, Any]) -> EnvParams:
    """EnvParams from a checked env section (`config.read_config`)."""
    fields = {k: v for k, v in c.items() if k in PARAM_DEFAULTS and k != "max_steps"}
    return EnvParams(max_steps_in_episode=c["max_steps"], **fields)


def build(env_cfg: Mapping, reward_cfg: Mapping, *, privileged_critic: bool = False):
    """`(RareActions, EnvParams)` from the `env` section; ConfigError on a bad value."""
    c = check_config(env_cfg, reward_cfg)
    refuse_privileged_critic(privileged_critic, "rare_actions has no privileged observation")
    return RareActions(grid_size=c["grid_size"], n_data=c["n_data"]), make_params(c)
