"""Env name -> where its builder and its config check live, without importing either.

To add an env, add a row. The table holds "module:function" strings, so `ppo_lab.config.validate` can check an env's
config (through its jax-free `check` function) before the hardware settings are applied and
jax is imported; the builder's module, which imports jax, is loaded only by `make_env`.

A builder takes the `env` and `reward` config sections (plain dicts) and the
`privileged_critic` switch and returns `(env, env_params)`, where `env` speaks the gymnax
1.0 API: `reset(key, params) -> (obs, state)` and
`step(key, state, action, params) -> (obs, state, reward, terminated, truncated, info)`.
A check takes the same two sections, raises ConfigError on a bad value and imports no jax.

Optional extras an env may offer (the trainer uses them when present):
- `info["metrics"]`: dict name -> per-step scalar; the trainer logs each one's mean over a
  rollout under its own name (e.g. `reward/food`).
- `env.action_names`: names for `actions/<name>` fractions (else the action index).
- `env.actor_obs_channels`: if set, the actor sees only the first N observation channels
  while the critic sees all of them (a privileged critic).
- `env.action_mask(state, params) -> bool[num_actions]`: the actions valid in `state`. An env
  may expose such a mask of valid actions; the trainer, evaluation and replay honour it: invalid
  actions are never sampled nor chosen greedily, log-probs and entropy are over the valid
  actions (`ppo_lab.ppo.distributions`), and every masked run logs `actions/invalid_frac`
  (always 0). Envs without it (gymnax's own) train exactly as before.
- An `info["metrics"]` value may be NaN on steps where it is undefined (e.g. a rate over rare
  events): its rollout mean ignores those steps.
"""

from __future__ import annotations

import importlib
from typing import Mapping, NamedTuple

from ppo_lab.errors import ConfigError


class EnvSpec(NamedTuple):
    builder: str  # "module:function(env_cfg, reward_cfg, *, privileged_critic) -> (env, env_params)"
    check: str  # "module:function(env_cfg, reward_cfg) -> None", jax-free


ENVS: dict[str, EnvSpec] = {
    "cartpole": EnvSpec("ppo_lab.envs.gymnax_envs:make_cartpole", "ppo_lab.envs.gymnax_envs:check_cartpole"),
    "gymnax": EnvSpec("ppo_lab.envs.gymnax_envs:make_any_gymnax", "ppo_lab.envs.gymnax_envs:check_gymnax"),
    "foraging": EnvSpec("ppo_lab.envs.foraging.world:build", "ppo_lab.envs.foraging.config:check_config"),
    "rare_actions": EnvSpec("ppo_lab.envs.rare_actions.game:build", "ppo_lab.envs.rare_actions.config:check_config"),
    "jumanji": EnvSpec("ppo_lab.envs.jumanji_env.adapter:build", "ppo_lab.envs.jumanji_env.config:check_config"),
}


def _load(target: str):
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)


def check_env_name(name: str) -> None:
    if name not in ENVS:
        raise ConfigError("env.name", name, f"one of {sorted(ENVS)}")


def check_env_config(env_cfg: Mapping, reward_cfg: Mapping) -> None:
    """The env's own config checks (ConfigError on a bad value); imports no jax."""
    check_env_name(env_cfg.get("name"))
    _load(ENVS[env_cfg["name"]].check)(env_cfg, reward_cfg)


def make_env(env_cfg: Mapping, reward_cfg: Mapping, *, privileged_critic: bool = False):
    """Build `(env, env_params)` for the `env` and `reward` config sections."""
    check_env_config(env_cfg, reward_cfg)
    return _load(ENVS[env_cfg["name"]].builder)(env_cfg, reward_cfg, privileged_critic=privileged_critic)
