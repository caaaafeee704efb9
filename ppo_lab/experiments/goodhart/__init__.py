"""Goodhart's law in the foraging world (`ppo_lab.envs.foraging`): agents paid a proxy reward
against agents paid the truth.

- `survival`: the reference's continuous-survival evaluation (jax; `conf/env/foraging.yaml`
  names it under `evaluations:`);
- `report`: the mode table, pairwise tests and Goodhart curves of a sweep (jax-free);
- `overoptimisation`: the true objective along training per mode, against the distance from the
  initial policy: Gao et al.'s fit, drop heights, an early-stopping rule (`ppo-lab goodhart-report`);
- `fidelity`: the fidelity ablation of `sweeps/goodhart_fidelity.yaml` (jax-free).
"""
