"""Name -> builder registry for environments.

A builder takes the `env` and `reward` config sections (plain dicts) and the
`privileged_critic` switch and returns `(env, env_params)`, where `env` speaks the gymnax
1.0 API: `reset(key, params) -> (obs, state)` and
`step(key, state, action, params) -> (obs, state, reward, terminated, truncated, info)`.

Optional extras an env may offer (the trainer uses them when present):
- `info["metrics"]`: dict name -> per-step scalar; the trainer logs each one's mean over a
  rollout under its own name (e.g. `reward/food`).
- `env.action_names`: names for `actions/<name>` fractions (else the action index).
- `env.actor_obs_channels`: if set, the actor sees only the first N observation channels
  while the critic sees all of them (a privileged critic).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ppo_lab.errors import ConfigError

Builder = Callable[..., tuple[Any, Any]]
ENV_BUILDERS: dict[str, Builder] = {}


def register_env(name: str):
    """Decorator: register `builder` under `name` (the value of `env.name` in config)."""

    def deco(builder: Builder) -> Builder:
        ENV_BUILDERS[name] = builder
        return builder

    return deco


def _load_builtin_envs() -> None:
    # Imported for their registration side effect; kept lazy so `import ppo_lab` stays light.
    import ppo_lab.envs.gymnax_envs  # noqa: F401

    try:
        import ppo_lab.envs.foraging.world  # noqa: F401
    except ImportError as exc:  # pragma: no cover - only while the module is absent
        if "ppo_lab.envs.foraging.world" not in str(exc):
            raise


def check_env_name(name: str) -> None:
    _load_builtin_envs()
    if name not in ENV_BUILDERS:
        raise ConfigError("env.name", name, f"one of {sorted(ENV_BUILDERS)}")


def make_env(env_cfg: Mapping, reward_cfg: Mapping, *, privileged_critic: bool = False):
    """Build `(env, env_params)` for the `env` and `reward` config sections."""
    check_env_name(env_cfg["name"])
    return ENV_BUILDERS[env_cfg["name"]](env_cfg, reward_cfg, privileged_critic=privileged_critic)
