"""JAX environments speaking the gymnax API (`ppo_lab.envs.base`), each wired by its
`conf/env/*.yaml`. The adapters import gymnax or Jumanji, so this package imports none of them."""
