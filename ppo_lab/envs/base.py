"""`Env`: the contract every env of the lab derives from (as gymnax's `Environment` is the
contract of gymnax's envs), with its optional members and their defaults in one place.

An env is one module plus one YAML file in `conf/env/` naming its builder (`_target_`), a
jax-free `check` of its keys (run at validation, before XLA starts) and any extra `evaluations`,
all loaded by `ppo_lab.parts` (late: see there why). The builder takes the env's keys and the
`reward` section (plain dicts) and the `privileged_critic` switch and returns `(env, env_params)`;
the check takes the same two sections, raises ConfigError on a bad value and imports no jax.

Required (gymnax 1.0's API; our own JAX envs get them by deriving from gymnax's `Environment`
too, the builders of gymnax's own envs wrap them in `envs.gymnax_envs.GymnaxEnv`):
- `reset(key, params) -> (obs, state)`;
- `step(key, state, action, params) -> (obs, state, reward, terminated, truncated, info)`,
  auto-reset included, `info["final_observation"]` the observation the step ended on;
- `action_space(params)`, `observation_space(params)`, `default_params`.

Optional, with the defaults below (an env overrides what it offers):
- `batched`: the env steps whole batches itself (`reset_batch(key, params, n)`,
  `step_batch(key, state, action, params)`; EnvPool, Gymnasium: `HostBatchedEnv`);
- `action_mask(state, params) -> bool[num_actions]`: the actions valid in `state`
  (`has_action_mask` says whether the env defines one);
- `actor_obs_channels`: the actor sees only the first N observation channels, the critic all
  of them (a privileged critic); None: both see everything;
- `critic_plane_channels`: of a privileged critic's extra channels, how many at the end are
  constant planes (one value per observation broadcast over the image, e.g. a world-wide
  density): a critic on the actor's torso reads them once, not pixel by pixel (0: none);
- `action_names`: names for the `actions/<name>` fractions (None: the action index);
- `place(num_devices, axis_name)`: called once the device layout is known (envs outside JAX
  keep one simulator per device);
- `lives_outside_jax` and `for_evaluation()`: an env whose state lives in a simulator outside
  JAX evaluates on envs of its own;
- `episode_limit(params)`: the most steps of an episode (evaluation's cap);
- `params_are_data`: the params differ between runs meant to share one compiled program
  (foraging's reward modes), so the trainer and the episodic evaluation take them as program
  arguments (`ppo.train.env_params_argument`) instead of constants;
- `info[RESETTING]` (bool per env): the step only reset the env (EnvPool resets on the step
  after an episode ends, ignoring the action); it weighs nothing in the update;
- `info["metrics"]`: dict name -> per-step scalar, logged as its mean over a rollout;
- `render_episode(episode, options) -> (frames, summary)`: the frames of one replayed episode
  (`ppo-lab replay`), each a uint8 [H, W, 3] array on the host, and a one-line summary;
  `draws_frames` says whether the env has it, `frame_palette` the colours every frame may be
  mapped onto exactly (None: an adaptive palette), `params_for_replay` the params a replay
  plays with (e.g. an option turning a rule on). An env that draws frames also has gymnax's
  `reset_env` and `step_env` (the step without auto-reset: a replay's last frame is real).

docs/envs.md adds an env with a worked example.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np


def text_palette(colours, backgrounds, texts) -> list[tuple[int, int, int]]:
    """A fixed `Env.frame_palette`: `colours` exactly, then the ramps from each background to each
    text colour (antialiased text), at most 256."""
    ramps = [tuple(round(b + (f - b) * i / 8) for b, f in zip(bg, fg)) for bg in backgrounds for fg in texts
             for i in range(1, 8)]
    return list(dict.fromkeys([*colours, *ramps]))[:256]


@dataclass(frozen=True)
class Episode:
    """One episode a replay played, on the host (numpy), for `Env.render_episode` to draw.

    Frame 0 is the state after reset, frame k the state after step k: `num_steps` steps give
    `num_steps + 1` frames. `ending`: "ended" (the env's step said done), "truncated" (the
    env's step limit reached first), "stopped" (the replay's step budget reached first)."""
    states: Any  # the env's states, each leaf stacked over the frames [num_steps + 1, ...]
    actions: np.ndarray  # [num_steps]: the action taken from frame k
    rewards: np.ndarray  # [num_steps]
    infos: Any  # the step's info (`step_env`'s), each leaf [num_steps, ...]
    action_probs: np.ndarray | None  # [num_steps + 1, num_actions]: the policy at each frame (None: continuous)
    ending: str
    step_cap: int  # the most steps the replay allowed (the env's limit or the budget)
    params: Any  # the env params the episode was played with (`Env.params_for_replay`)
    run_params: Any  # the run's own env params
    labels: Mapping[str, Any]  # what a frame may name: "reward", "policy" (argmax | sampled), "seed", "update"

    @property
    def num_steps(self) -> int:
        return len(self.actions)


class Env:
    """The optional members of an env, and their defaults (see the module docstring)."""

    RESETTING = "resetting"  # the info key of a step that only reset the env

    batched: bool = False
    actor_obs_channels: int | None = None
    critic_plane_channels: int = 0
    action_names: Sequence[str] | None = None
    lives_outside_jax: bool = False
    # Off by default: gymnax's own envs do arithmetic on Python-float params while tracing,
    # which as arguments would move the last bits of their recorded runs.
    params_are_data: bool = False

    @property
    def has_action_mask(self) -> bool:
        """Whether the env defines `action_mask` (the trainer, evaluation and replay honour it)."""
        return type(self).action_mask is not Env.action_mask

    def action_mask(self, state, params):
        """The actions valid in `state` (bool [num_actions]); an env without a mask has none."""
        raise NotImplementedError(f"{type(self).__name__} has no action mask (has_action_mask is False)")

    def place(self, num_devices: int, axis_name: str) -> None:
        """Set up for `num_devices` devices along the mesh axis `axis_name` (default: nothing to do)."""

    def for_evaluation(self) -> "Env":
        """The env to evaluate on (default: this one)."""
        return self

    frame_palette: Sequence[tuple[int, int, int]] | None = None

    @property
    def draws_frames(self) -> bool:
        """Whether the env draws a replay's frames (`render_episode`)."""
        return type(self).render_episode is not Env.render_episode

    def render_episode(self, episode: Episode, options: Mapping[str, Any]) -> tuple[list[np.ndarray], str]:
        """The frames of `episode` (uint8 [H, W, 3], one per frame, all one size) and a line
        summing it up. `options`: the replay's drawing options (`cell_px`, `whole`, `mortal`),
        each None or False when not given; an env reads those it knows."""
        raise NotImplementedError(f"{type(self).__name__} draws no frames (draws_frames is False)")

    def params_for_replay(self, params, options: Mapping[str, Any]):
        """The env params a replay plays with (default: the run's own)."""
        return params

    def episode_limit(self, params) -> int | None:
        """The most steps of an episode under `params` (None: no limit known)."""
        limit = getattr(params, "max_steps_in_episode", None) or getattr(params, "max_steps", None)
        return None if limit is None else int(limit)
