"""The foraging world: a JAX port of the Goodhart's-law foraging grid (gymnax 1.0 API).

World (see `docs/foraging-reference.md` for the reference facts)
-----------------------------------------------------------------
A square torus of `grid_size` x `grid_size` cells holding food and poison. Each episode draws
its food and poison counts uniformly from `[food_min, food_max]` and `[poison_min, poison_max]`
(with `fixed_counts: true`, as in the reference's training, a world keeps the counts its first
`reset` drew for the whole run); the counts stay constant within the episode: an eaten item reappears at a cell drawn uniformly
among the EMPTY cells that are not the agent's cell (exactly, see `_kth_free_cell`). The agent
sees a wrapped square of side `2*view_range+1` centred on itself (centre zeroed), moves with the
8 compass actions (no "stay"), starts with `energy_start`, pays `move_cost` a move, gains
`food_energy` / `poison_energy` when it steps on an item, dies at energy <= 0 and is truncated
after `max_steps` steps.

Representation (why it is fast)
-------------------------------
There is no grid array. The state holds one flat cell index per item *slot*: slots
`[0, food_slots)` are food, `[food_slots, food_slots+poison_slots)` poison, where the slot counts
are the config maxima; an episode with `n_food` food uses the first `n_food` food slots (the
others are "reserved": invisible, holding a distinct cell so they can be switched on at the next
episode). Every step is then O(#slots) whatever the grid size:
- eating: compare the agent's cell with the slot cells;
- respawn: an exact uniform draw among free cells by a 14-step binary search (`_kth_free_cell`),
  instead of a masked categorical over all grid cells (O(grid) random numbers);
- observation: scatter the items that fall inside the view window into a zero view.

Auto-reset (why it is cheap)
----------------------------
gymnax's default `Environment.step` computes a full `reset_env` on every step and selects it
where done. A full reset here places up to 513 distinct cells (a sort per rejection round, about
4-5 rounds over a big batch), which made the step several times slower (see
`scripts/bench_foraging_env.py`). Our `step` instead starts the next episode in the same world:
counts re-drawn (slots switched on/off), the agent placed uniformly on a cell held by no slot,
energy and clock restarted. Items keep their places, as in the reference's training, which never
re-lays a grid after the first reset (goodharts_law `goodharts/environments/torch_env.py`:
`step` resets only the agents, `_reset_agents_masked`). `fresh_world_on_done: true` lays out a
fresh world every episode instead, at the measured cost. `reset` always lays out a fresh world.
`respawn_in_place: true` keeps the agent where its last life ended, as the reference's code
does: its `_reset_agents_masked` clears `self.dones`, which is the mask it was passed, before
it selects the new positions with that mask, so no agent ever moves (`torch_env.py` lines
574-585); energy and clock are reset.

Modes are data
--------------
Everything that differs between the reward modes lives in `EnvParams` (observation tables,
reward weights, step cost, death penalty, immortality, shaping coefficient, clip), so one
compiled env serves every mode: `params_are_data` makes them arguments of the trainer's and the
evaluation's programs too, so a sweep over modes compiles once. Observation channels (channels
last, float32, `[V, V, C]`):
- `one_hot` (ground_truth, handhold): `[is_food, is_poison]`: food and poison apart.
- `interestingness` (ground_truth_blinded, proxy_mortal, proxy): food 1.0 and poison 0.5 in
  both channels: the two still differ in brightness, so these agents CAN tell them apart.
- `blind` (ground_truth_blind, our control): any item 1.0 in the first channel, the second
  always 0: where items are, never which.
- privileged critic (`privileged_critic=True`): 6 channels, the policy's 2, the ground-truth
  one-hot 2, and the world's food and poison densities as constant planes (`densities`);
  `env.actor_obs_channels == 2` tells the network to feed the actor only the first 2, and
  `env.critic_plane_channels == 2` that the last 2 are constant planes.

Training reward (clipped to `[-reward_clip, reward_clip]`):
`reward_food*ate_food + reward_poison*ate_poison + reward_step + reward_death*died + shaping`.
`ground_truth_handhold` shaping is potential-based with potential `-shaping_coef * d`, `d` the
king-move (Chebyshev) torus distance from the agent to the nearest food (0 when there is no
food): `shaping = shaping_coef * (d(s) - d(s'))`, positive when the agent closes in. It uses
gamma = 1, so it telescopes over an episode to `coef * (d(s_0) - d(s_T))` and cannot change which
behaviour is optimal by more than that bounded amount. Note that eating moves the food away, so
the step that eats usually has a negative shaping term, more than paid for by the food reward.
`immortal` (mode `proxy`) freezes the energy during training: no costs, no gains, no death.

Per-step `info["metrics"]` (float32 scalars, averaged over a rollout by the trainer)
-----------------------------------------------------------------------------------
The TRUE objective, whatever the training reward:
- `true/objective_per_1k`: 1000 x (food_energy x ate_food + poison_energy x ate_poison -
  move_cost): its rollout mean is the true objective per 1k agent steps, from counts, so it
  means the same in every mode (the immortal proxy's too, whose energy is frozen).
- `reward/paid_per_1k`: 1000 x the training reward: what the agent is paid per 1k steps. The
  two together are the Goodhart curve.
- `reward/food`: `food_energy` (+1) when food was eaten this step, else 0.
- `reward/poison`: `poison_energy` (-2) when poison was eaten this step, else 0.
- `reward/step_cost`: `-move_cost` (-0.01) every step.
- `reward/death`: the mode's death penalty (`reward_death`) on the step the agent dies, else 0.
- `reward/shaping`: the shaping term (non-zero only with a shaping coefficient, i.e. handhold).
- `true/food_eaten`, `true/poison_eaten`: 1.0 on a step that ate one, else 0.
- `true/energy`: the energy at the end of the step (before any auto-reset; frozen when immortal).
- `true/deaths`: 1.0 on the step the agent dies, else 0.

`terminated` is death; `truncated` is the step limit reached while alive (never both).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Mapping

import jax
import jax.numpy as jnp
from flax import struct

from ppo_lab.envs.base import Env, Episode
from ppo_lab.envs.gymnax_api import environment, spaces
from ppo_lab.envs.foraging import frames
from ppo_lab.envs.foraging.config import OBS_TABLES, env_defaults, mode_defaults, validate_env_cfg, validate_reward_cfg

ACTION_NAMES = ["N", "NE", "E", "SE", "S", "SW", "W", "NW"]
# (row, col) deltas; row -1 is north. Order matches ACTION_NAMES.
_MOVES = ((-1, 0), (-1, 1), (0, 1), (1, 1), (1, 0), (1, -1), (0, -1), (-1, -1))

# Energies are sums of multiples of 0.01 in float32: 100 moves of 0.01 from 1.0 land a hair
# above 0 (+6.7e-7). Treat anything within this tolerance of zero as zero so starvation takes
# exactly energy_start / move_cost moves (the default of `env.energy_tolerance`). The
# reference's code tests energy <= 0 in float32 (tolerance 0.0): its agents starve at move 101.
ENERGY_EPS = 1e-5

# A privileged critic's observation: the policy's 2 channels, the ground-truth one-hot 2, and
# the world's food and poison densities as 2 constant planes (as the reference's critic had).
PRIVILEGED_CHANNELS = 6

@struct.dataclass
class EnvState(environment.EnvState):
    item_pos: jax.Array  # [food_slots + poison_slots] int32 flat cell index (row * G + col)
    n_food: jax.Array  # int32: active food slots this episode
    n_poison: jax.Array  # int32: active poison slots this episode
    agent: jax.Array  # int32 flat cell index
    energy: jax.Array  # float32
    # `time` (int32, steps in this episode) comes from gymnax's EnvState.


@struct.dataclass
class EnvParams(environment.EnvParams):
    # World (max_steps_in_episode comes from gymnax's EnvParams).
    food_min: int = 64
    food_max: int = 256  # must not exceed the env's food_slots
    poison_min: int = 64
    poison_max: int = 256  # must not exceed the env's poison_slots
    energy_start: float = 1.0
    move_cost: float = 0.01
    food_energy: float = 1.0
    poison_energy: float = -2.0
    # Mode, as data.
    food_obs: jax.Array = None  # [C] observation of a food cell
    poison_obs: jax.Array = None  # [C] observation of a poison cell
    reward_food: float = 1.0
    reward_poison: float = -2.0
    reward_step: float = -0.01  # added every step (negative = a cost)
    reward_death: float = -4.0  # added on the step the agent dies
    immortal: bool = False  # energy frozen: no costs, no gains, no death
    shaping_coef: float = 0.0
    reward_clip: float = 20.0
    fixed_counts: bool = False  # a world keeps the counts `reset` drew, through every episode
    energy_tolerance: float = ENERGY_EPS  # dead at energy <= this (0.0: the reference's test)
    respawn_in_place: bool = False  # a new life starts where the last one ended (the reference's)


def _torus_delta(a: jax.Array, b: jax.Array, size: int) -> jax.Array:
    d = jnp.abs(a - b)
    return jnp.minimum(d, size - d)


def _kth_free_cell(occ_pos: jax.Array, occ_mask: jax.Array, k: jax.Array, n_cells: int):
    """The k-th (0-based) cell, in flat order, that no masked-in `occ_pos` holds.

    `free(c) = c + 1 - #{occupied <= c}` counts the free cells up to c and is non-decreasing;
    the answer is the smallest c with `free(c) >= k + 1` (that c is itself free). A binary search
    costs ceil(log2(n_cells)) passes over the occupied list. With k uniform in
    [0, #free), the result is uniform over the free cells: an exact draw, no rejection.
    Occupied cells must be distinct.
    """
    lo = jnp.zeros((), jnp.int32)
    hi = jnp.asarray(n_cells - 1, jnp.int32)

    def body(_, lohi):
        lo, hi = lohi
        mid = (lo + hi) // 2
        n_occ = jnp.sum(occ_mask & (occ_pos <= mid), dtype=jnp.int32)
        ok = mid + 1 - n_occ >= k + 1
        return jnp.where(ok, lo, mid + 1), jnp.where(ok, mid, hi)

    lo, _ = jax.lax.fori_loop(0, max(1, math.ceil(math.log2(n_cells))), body, (lo, hi),
                              unroll=True)
    return lo


def _distinct_cells(key: jax.Array, n: int, n_cells: int) -> jax.Array:
    """n distinct cells, uniformly random as an ordered tuple.

    Draw with replacement; while some cells repeat, keep the lowest-index holder of each cell
    and redraw the others. Every step treats all cells alike (it uses only equality of cells and
    slot order), so the result's law is invariant under relabelling cells, and an ordered tuple
    of distinct cells with a relabelling-invariant law is uniform.
    """

    def dup_mask(cells):
        # Sort (cell, slot) pairs encoded in one int32; ties broken by slot, so the first of a
        # run of equal cells is its lowest slot.
        keys = jnp.sort(cells * n + jnp.arange(n, dtype=jnp.int32))
        cell, slot = keys // n, keys % n
        dup_sorted = jnp.concatenate([jnp.zeros(1, bool), cell[1:] == cell[:-1]])
        return jnp.zeros(n, bool).at[slot].set(dup_sorted)

    def cond(carry):
        return jnp.any(carry[2])

    def body(carry):
        key, cells, dup = carry
        key, sub = jax.random.split(key)
        cells = jnp.where(dup, jax.random.randint(sub, (n,), 0, n_cells, jnp.int32), cells)
        return key, cells, dup_mask(cells)

    key, sub = jax.random.split(key)
    cells = jax.random.randint(sub, (n,), 0, n_cells, jnp.int32)
    _, cells, _ = jax.lax.while_loop(cond, body, (key, cells, dup_mask(cells)))
    return cells


class Foraging(environment.Environment[EnvState, EnvParams], Env):
    """Torus foraging world. Shapes (grid, view, slots, channels) are static; the rest is data."""

    params_are_data = True  # every reward mode is one program (arguments, not constants)

    def __init__(self, grid_size: int = 128, view_range: int = 5, food_slots: int = 256,
                 poison_slots: int = 256, obs_channels: int = 2,
                 actor_obs_channels: int | None = None, fresh_world_on_done: bool = False):
        super().__init__()
        self.grid_size = int(grid_size)
        self.view_range = int(view_range)
        # At least one slot in all (kept inactive when both max counts are 0), so that no
        # reduction runs over an empty array.
        self.food_slots = int(food_slots) if food_slots + poison_slots > 0 else 1
        self.poison_slots = int(poison_slots)
        self.obs_channels = int(obs_channels)
        self.actor_obs_channels = actor_obs_channels
        self.fresh_world_on_done = bool(fresh_world_on_done)
        self.action_names = list(ACTION_NAMES)
        self._moves = jnp.asarray(_MOVES, jnp.int32)

    def _static_key(self) -> tuple:
        return (type(self), self.grid_size, self.view_range, self.food_slots, self.poison_slots,
                self.obs_channels, self.actor_obs_channels, self.fresh_world_on_done)

    # Equal static shapes => equal envs, so jitted methods (static `self`) are compiled once per
    # shape, not once per env object (every mode shares one compiled env).
    def __hash__(self) -> int:
        return hash(self._static_key())

    def __eq__(self, other) -> bool:
        return isinstance(other, Foraging) and self._static_key() == other._static_key()

    # ---- gymnax properties (its `name` is the class's) -----------------------------------------
    @property
    def num_actions(self) -> int:
        return len(_MOVES)

    @property
    def n_slots(self) -> int:
        return self.food_slots + self.poison_slots

    @property
    def privileged(self) -> bool:
        """Observations carry the critic's extra channels (ground truth and densities)."""
        return self.obs_channels == PRIVILEGED_CHANNELS

    @property
    def critic_plane_channels(self) -> int:
        """The densities: the privileged observation's last 2 channels are constant planes."""
        return 2 if self.privileged else 0

    # ---- replay (the `Env` contract's frames) --------------------------------------------------
    frame_palette = frames.palette()

    def render_episode(self, episode: Episode, options: Mapping[str, Any]):
        return frames.render_episode(self, episode, options)

    def params_for_replay(self, params: EnvParams, options: Mapping[str, Any]) -> EnvParams:
        """`mortal`: energy on, also for a run trained immortal (as the survival evaluation)."""
        return params.replace(immortal=False) if options.get("mortal") else params

    @property
    def n_cells(self) -> int:
        return self.grid_size * self.grid_size

    @property
    def view_size(self) -> int:
        return 2 * self.view_range + 1

    @property
    def default_params(self) -> EnvParams:
        """conf/'s world in the ground_truth mode, its item counts capped at this env's slots."""
        e = env_defaults()
        e = {**e, "food_min": min(e["food_min"], self.food_slots), "food_max": self.food_slots,
             "poison_min": min(e["poison_min"], self.poison_slots), "poison_max": self.poison_slots}
        return make_params(self, e, mode_defaults("ground_truth"))

    def action_space(self, params: EnvParams | None = None) -> spaces.Discrete:
        return spaces.Discrete(self.num_actions)

    def observation_space(self, params: EnvParams | None = None) -> spaces.Box:
        low = -1.0 if self.privileged else 0.0  # densities lie in [-1, 1]
        return spaces.Box(low, 1.0, (self.view_size, self.view_size, self.obs_channels),
                          jnp.float32)

    # ---- building blocks (also used by the survival evaluation) ------------------------------
    def active_mask(self, state: EnvState) -> jax.Array:
        slot = jnp.arange(self.n_slots)
        return jnp.where(slot < self.food_slots, slot < state.n_food,
                         slot - self.food_slots < state.n_poison)

    def get_obs(self, state: EnvState, params: EnvParams | None = None, key=None) -> jax.Array:
        if params is None:
            params = self.default_params
        g, v, vs = self.grid_size, self.view_range, self.view_size
        iy, ix = state.item_pos // g, state.item_pos % g
        ay, ax = state.agent // g, state.agent % g
        # Offset of each item in the view window on the torus; out of view -> index vs (dropped).
        dy, dx = (iy - ay + v) % g, (ix - ax + v) % g
        inside = self.active_mask(state) & (dy < vs) & (dx < vs)
        dy = jnp.where(inside, dy, vs)
        is_food = jnp.arange(self.n_slots) < self.food_slots
        vals = jnp.where(is_food[:, None], params.food_obs[None, :], params.poison_obs[None, :])
        n_item_channels = vals.shape[-1]
        obs = jnp.zeros((vs, vs, n_item_channels), jnp.float32)
        obs = obs.at[dy, dx].set(vals.astype(jnp.float32), mode="drop")
        # The centre is the agent's own cell; items never sit there, zero it anyway (reference).
        obs = obs.at[v, v].set(0.0)
        if not self.privileged:
            return obs
        planes = jnp.broadcast_to(self.densities(state, params), (vs, vs, 2))
        return jnp.concatenate([obs, planes], axis=-1)

    def densities(self, state: EnvState, params: EnvParams) -> jax.Array:
        """[food, poison] counts of this world scaled to [-1, 1] over their config ranges (the
        reference critic's `(count - mid) / half_range`; 0 when a range is a single value)."""
        def scaled(n, lo, hi):
            half = jnp.maximum((hi - lo) / 2.0, 0.5)
            return jnp.where(hi > lo, (n - (lo + hi) / 2.0) / half, 0.0)

        return jnp.stack([scaled(state.n_food, params.food_min, params.food_max),
                          scaled(state.n_poison, params.poison_min, params.poison_max)]
                         ).astype(jnp.float32)

    def nearest_food_distance(self, state: EnvState) -> jax.Array:
        """King-move torus distance to the nearest active food (0.0 if there is none)."""
        g = self.grid_size
        if self.food_slots == 0:
            return jnp.zeros((), jnp.float32)
        fpos = state.item_pos[: self.food_slots]
        d = jnp.maximum(_torus_delta(fpos // g, state.agent // g, g),
                        _torus_delta(fpos % g, state.agent % g, g))
        active = jnp.arange(self.food_slots) < state.n_food
        d = jnp.min(jnp.where(active, d, g))
        return jnp.where(state.n_food > 0, d, 0).astype(jnp.float32)

    def draw_counts(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, jax.Array]:
        kf, kp = jax.random.split(key)
        n_food = jax.random.randint(kf, (), params.food_min, params.food_max + 1, jnp.int32)
        n_poison = jax.random.randint(kp, (), params.poison_min, params.poison_max + 1,
                                      jnp.int32)
        return n_food, n_poison

    def new_life(self, key: jax.Array, state: EnvState, params: EnvParams,
                 redraw_counts: bool = True) -> EnvState:
        """Next life in the same world: agent on a uniform cell held by no slot (active or
        reserved, so switching slots on can never land on it), full energy, clock at 0;
        with `redraw_counts`, a fresh draw of the episode's counts."""
        k_counts, k_cell = jax.random.split(key)
        if redraw_counts:
            n_food, n_poison = self.draw_counts(k_counts, params)
        else:
            n_food, n_poison = state.n_food, state.n_poison
        r = jax.random.randint(k_cell, (), 0, self.n_cells - self.n_slots, jnp.int32)
        agent = _kth_free_cell(state.item_pos, jnp.ones(self.n_slots, bool), r, self.n_cells)
        # In place: its cell holds no active item (an eaten one has moved on); a reserved slot
        # there switched on by a count redraw is not eaten until the agent comes back to it.
        agent = jnp.where(params.respawn_in_place, state.agent, agent)
        return state.replace(n_food=n_food, n_poison=n_poison, agent=agent,
                             energy=jnp.asarray(params.energy_start, jnp.float32),
                             time=jnp.zeros((), jnp.int32))

    def transition(self, key: jax.Array, state: EnvState, action: jax.Array,
                   params: EnvParams) -> tuple[EnvState, dict[str, jax.Array]]:
        """One move, no reset and no step limit. Returns the new state and the step's events:
        ate_food, ate_poison, died (bool) and shaping (float32)."""
        g = self.grid_size
        move = self._moves[action]
        ay, ax = state.agent // g, state.agent % g
        agent = ((ay + move[0]) % g) * g + (ax + move[1]) % g

        active = self.active_mask(state)
        hit = active & (state.item_pos == agent)
        ate = jnp.any(hit)
        j = jnp.argmax(hit)
        ate_food = ate & (j < self.food_slots)
        ate_poison = ate & (j >= self.food_slots)

        # Respawn the eaten item j uniformly among cells free of active items and not the
        # agent's: slot j still holds the agent's cell, so "occupied" = all active slots.
        n_free = self.n_cells - state.n_food - state.n_poison
        r = jax.random.randint(key, (), 0, jnp.maximum(n_free, 1), jnp.int32)
        cell = _kth_free_cell(state.item_pos, active, r, self.n_cells)
        # If a reserved (inactive) slot holds that cell, it moves to the cell j leaves, so all
        # slot cells stay distinct.
        clash = ~active & (state.item_pos == cell)
        pos = jnp.where(clash, agent, state.item_pos)
        pos = jnp.where(ate, pos.at[j].set(cell), state.item_pos)

        delta = (-params.move_cost + jnp.where(ate_food, params.food_energy, 0.0)
                 + jnp.where(ate_poison, params.poison_energy, 0.0))
        energy = jnp.where(params.immortal, state.energy, state.energy + delta)
        energy = energy.astype(jnp.float32)

        new = state.replace(item_pos=pos, agent=agent, energy=energy, time=state.time + 1)
        died = self.is_terminated(new, params)
        shaping = params.shaping_coef * (self.nearest_food_distance(state)
                                         - self.nearest_food_distance(new))
        events = dict(ate_food=ate_food, ate_poison=ate_poison, died=died,
                      shaping=shaping.astype(jnp.float32))
        return new, events

    def training_reward(self, events: Mapping[str, jax.Array], params: EnvParams) -> jax.Array:
        r = (jnp.where(events["ate_food"], params.reward_food, 0.0)
             + jnp.where(events["ate_poison"], params.reward_poison, 0.0)
             + params.reward_step
             + jnp.where(events["died"], params.reward_death, 0.0)
             + events["shaping"])
        return jnp.clip(r, -params.reward_clip, params.reward_clip).astype(jnp.float32)

    def true_metrics(self, events: Mapping[str, jax.Array], state: EnvState,
                     params: EnvParams, paid: jax.Array) -> dict[str, jax.Array]:
        """Per-step metrics; `paid` is the step's training reward. The two `_per_1k` entries are
        x1000 per step, so their mean over a rollout is per 1k agent steps: the Goodhart curve,
        what the agent is paid against the true objective from counts, alike in every mode."""
        f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
        food = jnp.where(events["ate_food"], params.food_energy, 0.0)
        poison = jnp.where(events["ate_poison"], params.poison_energy, 0.0)
        return {
            "true/objective_per_1k": f32(1000.0 * (food + poison - params.move_cost)),
            "reward/paid_per_1k": f32(1000.0 * paid),
            "reward/food": f32(food),
            "reward/poison": f32(poison),
            "reward/step_cost": f32(-params.move_cost),
            "reward/death": f32(jnp.where(events["died"], params.reward_death, 0.0)),
            "reward/shaping": f32(events["shaping"]),
            "true/food_eaten": f32(events["ate_food"]),
            "true/poison_eaten": f32(events["ate_poison"]),
            "true/energy": f32(state.energy),
            "true/deaths": f32(events["died"]),
        }

    # ---- gymnax API ------------------------------------------------------------------------
    def reset_env(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, EnvState]:
        """A fresh world: counts drawn, agent and every slot on distinct uniform cells."""
        k_counts, k_cells = jax.random.split(key)
        n_food, n_poison = self.draw_counts(k_counts, params)
        cells = _distinct_cells(k_cells, self.n_slots + 1, self.n_cells)
        state = EnvState(time=jnp.zeros((), jnp.int32), item_pos=cells[1:], n_food=n_food,
                         n_poison=n_poison, agent=cells[0],
                         energy=jnp.asarray(params.energy_start, jnp.float32))
        return self.get_obs(state, params), state

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """gymnax's termination (its `discount`, `is_terminal` read it): out of energy, unless immortal."""
        return jnp.logical_not(params.immortal) & (state.energy <= params.energy_tolerance)

    def step_env(self, key, state, action, params):
        """gymnax's hook, the step without auto-reset (a replay's step; `step` adds the reset)."""
        state, events = self.transition(key, state, action, params)
        terminated = events["died"]
        reward = self.training_reward(events, params)
        info = {"metrics": self.true_metrics(events, state, params, reward), "events": events}
        return self.get_obs(state, params), state, reward, terminated, info

    @partial(jax.jit, static_argnames=("self",))
    def step(self, key: jax.Array, state: EnvState, action: int | jax.Array,
             params: EnvParams | None = None):
        """gymnax 1.0 step with a cheap auto-reset (see the module docstring)."""
        if params is None:
            params = self.default_params
        k_step, k_reset = jax.random.split(key)
        obs_st, state_st, reward, terminated, info_st = self.step_env(k_step, state, action, params)
        truncated = ~terminated & self.is_truncated(state_st, params)  # gymnax's: the step limit reached
        done = terminated | truncated

        if self.fresh_world_on_done:
            _, state_re = self.reset_env(k_reset, params)
        else:
            state_re = self.new_life(k_reset, state_st, params, redraw_counts=True)
        # Fixed counts: the next episode keeps this world's counts (a fresh layout keeps them
        # too: `reset_env` places every slot, so any counts fit it).
        state_re = state_re.replace(
            n_food=jnp.where(params.fixed_counts, state_st.n_food, state_re.n_food),
            n_poison=jnp.where(params.fixed_counts, state_st.n_poison, state_re.n_poison))
        next_state = jax.tree.map(lambda r, s: jnp.where(done, r, s), state_re, state_st)
        # One observation from the selected state instead of two plus a select.
        obs = self.get_obs(next_state, params)
        info = {
            "metrics": info_st["metrics"],
            "terminated": terminated,
            "truncated": truncated,
            "final_observation": obs_st,
        }
        return obs, next_state, reward, terminated, truncated, info


# ---- config -> (env, params) -----------------------------------------------------------------
def _obs_vectors(kind: str, privileged: bool) -> tuple[jax.Array, jax.Array]:
    food, poison = OBS_TABLES[kind]
    if privileged:
        gt_food, gt_poison = OBS_TABLES["one_hot"]
        food, poison = food + gt_food, poison + gt_poison
    return jnp.asarray(food, jnp.float32), jnp.asarray(poison, jnp.float32)


def make_params(env: Foraging, e: Mapping[str, Any], r: Mapping[str, Any]) -> EnvParams:
    food_obs, poison_obs = _obs_vectors(r["observation"], env.privileged)
    return EnvParams(
        max_steps_in_episode=e["max_steps"], food_min=e["food_min"], food_max=e["food_max"],
        poison_min=e["poison_min"], poison_max=e["poison_max"],
        energy_start=float(e["energy_start"]), move_cost=float(e["move_cost"]),
        food_energy=float(e["food_energy"]), poison_energy=float(e["poison_energy"]),
        food_obs=food_obs, poison_obs=poison_obs, reward_food=float(r["food"]),
        reward_poison=float(r["poison"]), reward_step=float(r["step"]),
        reward_death=float(r["death"]), immortal=bool(r["immortal"]),
        shaping_coef=float(r["shaping_coef"]), reward_clip=float(r["clip"]),
        fixed_counts=bool(e["fixed_counts"]), energy_tolerance=float(e["energy_tolerance"]),
        respawn_in_place=bool(e["respawn_in_place"]))


def build(env_cfg: Mapping, reward_cfg: Mapping, *, privileged_critic: bool = False):
    """`(Foraging, EnvParams)` from the `env` and `reward` config sections, checked and completed
    from conf/ by the checks of `config.check_config` (conf/env/foraging.yaml's `check`). With
    `privileged_critic`, observations get the ground-truth one-hot as channels 3-4 and the
    densities as channels 5-6, and `env.actor_obs_channels = 2`."""
    e, r = validate_env_cfg(env_cfg), validate_reward_cfg(reward_cfg)
    env = Foraging(grid_size=e["grid_size"], view_range=e["view_range"],
                   food_slots=e["food_max"], poison_slots=e["poison_max"],
                   obs_channels=PRIVILEGED_CHANNELS if privileged_critic else 2,
                   actor_obs_channels=2 if privileged_critic else None,
                   fresh_world_on_done=e["fresh_world_on_done"])
    return env, make_params(env, e, r)
