"""Offline tools over run dirs and sweeps: aggregate, compare, plots, watch, the zoo table,
rliable's report, populations. Nothing here runs inside a training process; what a run itself
uses (its closing lines, health warnings, objective, headline metric) is `ppo_lab.judging`, and
every estimator both use is `ppo_lab.estimators`. Modules are imported by their own names.
"""
