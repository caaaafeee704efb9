"""The one place where ppo_lab loads code named by a string: the `_target_` of a config part.

Envs, their config checks, network torsos, loggers and extra evaluations are chosen by a
dotted path in their config group (`conf/env/*.yaml`, `conf/network/*.yaml`,
`conf/logger/*.yaml`) and loaded here through Hydra (`hydra.utils.get_object`), so adding one
is a module plus a YAML file, with no table to edit.

Why by string at all, and why late: importing gymnax or Jumanji starts XLA's backend, and the
device flags of `hardware` (`ppo_lab.hardware.start_jax`) must be set before that. The env
adapters import them at their top, so they may be loaded only once the run has started jax;
a string in the config is what lets everything else import at its top.

A part that fails to load is a `PartError` (a ConfigError: exit 2, before anything compiles)
naming the part, its path, and the missing package with the extra that brings it.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Any, Callable

from hydra.utils import get_object

from ppo_lab.errors import ConfigError

# Packages some parts need that a plain `pip install -e .` may not bring, and how to get them.
INSTALL_HINTS = {  # the extras of pyproject.toml
    "jumanji": "pip install -e '.[jumanji]'",
    "brax": "pip install -e '.[brax]'",
    "envpool": "pip install -e '.[envpool]'",
    "gymnasium": "pip install -e '.[gymnasium]'",
    "mlflow": "pip install -e '.[mlflow]'",
    "wandb": "pip install wandb",
    "tensorboardX": "pip install -e '.[tensorboard]'",
    "tensorboard": "pip install -e '.[tensorboard]'",
    "optuna": "pip install -e '.[optuna]'",
}


class PartError(ConfigError):
    """A configured part (`key` = its config key, e.g. `env._target_`) could not be loaded."""


def _missing_module(exc: BaseException) -> str | None:
    while exc is not None:
        if isinstance(exc, ModuleNotFoundError) and exc.name:
            return exc.name
        exc = exc.__cause__ or exc.__context__
    return None


@contextmanager
def _quiet(logger: logging.Logger):
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def load(key: str, path: Any) -> Callable:
    """The object at dotted `path` (a function or class), configured under `key`."""
    if not isinstance(path, str) or "." not in path:
        raise PartError(key, path, "a dotted path to a function or class, e.g. ppo_lab.envs.foraging.world.build")
    try:
        with _quiet(logging.getLogger("hydra.utils")):  # Hydra logs the failure; the PartError says it once
            return get_object(path)
    except Exception as exc:  # noqa: BLE001 - Hydra wraps the import error: unwrap it for the user
        missing = _missing_module(exc)
        if missing and missing.split(".")[0] == "ppo_lab":
            raise PartError(key, path, f"a path inside ppo_lab that exists (no module {missing})") from exc
        if missing:
            missing = missing.split(".")[0]
            hint = INSTALL_HINTS.get(missing, f"pip install {missing}")
            raise PartError(key, path, f"an importable part: it needs the package '{missing}', "
                                       f"which is not installed ({hint})") from exc
        raise PartError(key, path, f"an importable function or class ({type(exc).__name__}: {exc})") from exc


def call(key: str, path: Any, *args, **kwargs):
    """Load the part at `path` and call it."""
    return load(key, path)(*args, **kwargs)
