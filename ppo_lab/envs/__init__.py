"""JAX environments speaking the gymnax API, and the registry that names them (jax-free)."""

from ppo_lab.envs.registry import ENVS, check_env_config, make_env

__all__ = ["ENVS", "check_env_config", "make_env"]
