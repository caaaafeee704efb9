"""JAX environments speaking the gymnax API, and the registry that builds them from config."""

from ppo_lab.envs.registry import ENV_BUILDERS, make_env, register_env

__all__ = ["ENV_BUILDERS", "make_env", "register_env"]
