"""ppo_lab: a Hydra-configured PPO experiment lab in JAX."""

__version__ = "0.1.0"
