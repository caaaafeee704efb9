"""What a run says about itself, used inside the training process as well as by the offline
tools (`ppo_lab.analysis`): the headline metric an env is judged by and the bounds it declares,
a metric's label, the reward mode that paid a return, training-health warnings, the objective a
tuning job reports, a reproduction's comparison, and the closing summary. No jax, no plotting;
its statistics come from `ppo_lab.estimators`. Modules are imported by their own names.
"""
