"""ppo_lab's Optuna sweeper as a Hydra plugin (Hydra instantiates sweepers only from the
`hydra_plugins` package). The logic lives in `ppo_lab.launching.optuna_sweeper`; config:
`conf/hydra/sweeper/optuna.yaml`."""

from ppo_lab.launching.optuna_sweeper import OptunaSweeper as _OptunaSweeper


class OptunaSweeper(_OptunaSweeper):
    """`hydra/sweeper=optuna`."""
