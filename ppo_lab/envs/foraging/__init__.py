"""The foraging world of the Goodhart experiment: its config and checks (`config`, jax-free),
the world (`world`), the reference's continuous-survival evaluation (`survival`) and a renderer
of trained agents (`replay`)."""
