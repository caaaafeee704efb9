"""Build an env from its config section; the API every env here speaks.

An env is one module plus one YAML file in `conf/env/`: the YAML names the builder
(`_target_`), a jax-free `check` of its keys (run when the config is validated, before XLA
starts) and any extra `evaluations`; `ppo_lab.parts` loads them (late, see there why).

A builder takes the env's keys and the `reward` section (plain dicts) and the
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

from ppo_lab import parts
from ppo_lab.config import EnvSection, RewardSection


def make_env(env: EnvSection, reward: RewardSection, *, privileged_critic: bool = False):
    """`(env, env_params)` from validated `env` and `reward` sections. Call after
    `ppo_lab.hardware.start_jax`: the builder's module may import gymnax or Jumanji."""
    return parts.call("env._target_", env.target, dict(env.options), dict(reward.options),
                      privileged_critic=privileged_critic)
