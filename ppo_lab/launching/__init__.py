"""Hydra glue: the sweep callback and resolver, the submitit launchers, SLURM job bookkeeping."""
