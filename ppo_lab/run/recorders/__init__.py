"""Where metrics go besides metrics.csv (always written): a registry of optional loggers.

A logger is built as `factory(run_dir, cfg, resolved_config, options)` and offers
`log_rows(rows)` (one dict per (update, seed), DESIGN.md metric names) and
`finish(summary)`. `logger=[csv,wandb,tensorboard]` picks them; the keys under `logger`
are the names.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from ppo_lab.errors import ConfigError

# name -> "module:factory"; csv is metrics.csv itself, written by the runner.
LOGGERS: dict[str, str | None] = {
    "csv": None,
    "wandb": "ppo_lab.run.recorders.wandb_logger:make_logger",
    "tensorboard": "ppo_lab.run.recorders.tensorboard_logger:make_logger",
}


def check_logger_names(names) -> None:
    for name in names:
        if name not in LOGGERS:
            raise ConfigError("logger", name, f"loggers from {sorted(LOGGERS)}, e.g. logger=[csv]")


def make_loggers(run_dir: Path, cfg, resolved: dict) -> list:
    check_logger_names(cfg.logger)
    loggers = []
    for name, options in cfg.logger.items():
        target = LOGGERS[name]
        if target is None:
            continue
        module, factory = target.split(":")
        loggers.append(getattr(importlib.import_module(module), factory)(Path(run_dir), cfg, resolved, dict(options or {})))
    return loggers
