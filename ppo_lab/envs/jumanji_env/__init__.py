"""`env=jumanji`: Jumanji's environments through the lab's gymnax-style API (`adapter`), and the
jax-free check of the config section (`config`)."""
