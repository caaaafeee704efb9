"""The foraging world of the Goodhart experiment: its config and checks (`config`, jax-free),
the world (`world`) and the per-life ledger of the survival protocol (`lives`). The experiment's
own protocol and reports live in `ppo_lab.experiments.goodhart`."""
