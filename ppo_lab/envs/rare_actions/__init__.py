"""`env=rare_actions`: the rare-action grid game (`game`) and its jax-free config check (`config`)."""
