"""ppo_lab: a Hydra-configured PPO experiment lab in JAX."""

__version__ = "1.0.0"
