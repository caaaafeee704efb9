"""ppo_lab's Optuna sweeper as a Hydra plugin (Hydra instantiates sweepers only from the
`hydra_plugins` package). The logic lives in `ppo_lab.launching.optuna_sweeper`; config:
`conf/hydra/sweeper/optuna.yaml`.

Optuna is an extra (`pip install -e '.[optuna]'`). Hydra imports every plugin at each start,
so without it this module must still import (else every command warns): the sweeper then says
what to install when `hydra/sweeper=optuna` is asked for, and nothing else notices.
"""

try:
    from ppo_lab.launching.optuna_sweeper import OptunaSweeper as _OptunaSweeper
except ModuleNotFoundError as _exc:
    if _exc.name != "optuna":
        raise
    from hydra.plugins.sweeper import Sweeper as _OptunaSweeper

    from ppo_lab.errors import ConfigError
    from ppo_lab.parts import INSTALL_HINTS

    class OptunaSweeper(_OptunaSweeper):
        """`hydra/sweeper=optuna` without Optuna installed: the install command, nothing else."""

        def __init__(self, *args, **kwargs) -> None:
            raise ConfigError("hydra/sweeper", "optuna", f"Optuna installed: {INSTALL_HINTS['optuna']}")

        def setup(self, *args, **kwargs) -> None:  # pragma: no cover - never built
            pass

        def sweep(self, arguments):  # pragma: no cover - never built
            return []
else:

    class OptunaSweeper(_OptunaSweeper):
        """`hydra/sweeper=optuna`."""
