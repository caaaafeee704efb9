"""The rare-action game (`ppo_lab.envs.rare_actions`) as a tuning experiment: can PPO learn to
use actions that are valid rarely and pay turns later, with judgement rather than by reflex?

- `criteria`: the tuning spec's criteria of its own, per seed (jax-free; named as
  `metrics.criteria` in `conf/env/rare_actions.yaml`), computed by `ppo-lab aggregate` beside
  PPO's generic ones.
"""
