"""Experiments built on the generic core: what one experiment adds to the lab, one package each.

An experiment's evaluation protocols (named under `evaluations:` in its env's YAML and loaded by
`ppo_lab.parts`), its own success criteria (`metrics.criteria:`, read by `ppo-lab aggregate`)
and its reports (read by its notebooks) live here, not in `run/`, `ppo/` or
`analysis/`: the core imports nothing from this package (tests/test_import_structure.py ranks
it above `run`), so a researcher's own experiment sits beside these as an equal.

- `goodhart`: Goodhart's law in the foraging world: the continuous-survival protocol, the
  report over reward modes and the fidelity ablation.
- `rare_actions`: the rare-action game's tuning spec: its criteria of rare actions used with
  judgement.
"""
