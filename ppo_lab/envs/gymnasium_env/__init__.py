"""`env=gymnasium`: any Gymnasium env (a registered id or an env class by import path) through
`jax.pure_callback` around a Gymnasium vector env (`adapter`), and the jax-free check of the
config section (`config`)."""
