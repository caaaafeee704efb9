"""Goodhart's law in the foraging world (`ppo_lab.envs.foraging`): agents paid a proxy reward
against agents paid the truth.

- `survival`: the reference's continuous-survival evaluation (jax; `conf/env/foraging.yaml`
  names it under `evaluations:`);
- `report`: the mode table, pairwise tests and Goodhart curves of a sweep (jax-free);
- `fidelity`: the fidelity ablation of `sweeps/goodhart_fidelity.yaml` (jax-free).
"""
