"""Build an env from its config section; the API every env here speaks.

An env is one module plus one YAML file in `conf/env/`: the YAML names the builder
(`_target_`), a jax-free `check` of its keys (run when the config is validated, before XLA
starts) and any extra `evaluations`; `ppo_lab.parts` loads them (late, see there why).

A builder takes the env's keys and the `reward` section (plain dicts) and the
`privileged_critic` switch and returns `(env, env_params)`, where `env` speaks the gymnax
1.0 API: `reset(key, params) -> (obs, state)` and
`step(key, state, action, params) -> (obs, state, reward, terminated, truncated, info)`.
A check takes the same two sections, raises ConfigError on a bad value and imports no jax.

The env itself derives from `ppo_lab.envs.base.Env`: the contract, with every optional
member (batched stepping, an action mask, a privileged critic's channels, action names,
placement on devices, evaluation envs, the `resetting` flag, `info["metrics"]`) and its
default in one place. docs/envs.md adds an env, step by step.
"""

from __future__ import annotations

from ppo_lab import parts
from ppo_lab.config import EnvSection, RewardSection


def make_env(env: EnvSection, reward: RewardSection, *, privileged_critic: bool = False):
    """`(env, env_params)` from validated `env` and `reward` sections. Call after
    `ppo_lab.hardware.start_jax`: the builder's module may import gymnax or Jumanji."""
    return parts.call("env._target_", env.target, dict(env.options), dict(reward.options),
                      privileged_critic=privileged_critic)
