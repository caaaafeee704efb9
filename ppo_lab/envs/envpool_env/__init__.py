"""`env=envpool`: EnvPool's C++ environments stepped through its XLA interface inside the jitted
rollout (`adapter`), and the jax-free check of the config section (`config`)."""
