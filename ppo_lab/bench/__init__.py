"""The performance suite, `ppo-lab benchmark`, and its sections.

- `suite`: the suite itself (in-process steps/s per env, fresh-process seeds, devices and
  compilation cache), and the table it prints;
- `sidebyside` with `purejaxrl_peer`: the lab against PureJaxRL, imported from a user's checkout;
- `accel`: the reference-scale experiment over seeds and precisions (GPU/TPU);
- `configs`: configs by name, composed as `launch.py` composes them.

`sidebyside` and `accel` run in processes of their own (`python -m ppo_lab.bench.sidebyside`,
`python -m ppo_lab.bench.accel`): each starts JAX with its own hardware settings. Every section
imports jax at the top (importing it does not start XLA's backend); its `main` applies the
`hardware` settings with `ppo_lab.hardware.start_jax` before anything runs on a device.
"""
