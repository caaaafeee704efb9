"""The benchmark's configs by name, composed exactly as launch.py composes them."""

from __future__ import annotations

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from omegaconf import OmegaConf

from ppo_lab.config import CONF_DIR

# Used for an env only while it has no experiment config of its own.
# Foraging: the project's default foraging scale for this hardware (conf/scale). For the
# reference CNN add `network=cnn` (and keep the batch small: on XLA:CPU the CNN's gradient inside
# the trainer's minibatch `lax.scan` is ~15x slower than outside a loop, docs/performance.md).
FALLBACK_OVERRIDES = {"foraging": ["env=foraging", "reward=ground_truth"]}


def env_overrides(name: str) -> list[str]:
    """How the suite selects an env: its experiment config if there is one, else env=<name>."""
    if (CONF_DIR / "experiment" / f"{name}.yaml").exists():
        return [f"experiment={name}"]
    return list(FALLBACK_OVERRIDES.get(name, [f"env={name}"]))


def known_env(name: str) -> bool:
    """Whether `name` is an env the suite can select: an experiment or a `conf/env` option."""
    return any((CONF_DIR / group / f"{name}.yaml").exists() for group in ("experiment", "env"))


def compose(overrides: list[str]) -> dict:
    """The resolved config for these overrides, composed exactly as launch.py would."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = hydra_compose(config_name="config", overrides=list(overrides))
    return OmegaConf.to_container(cfg, resolve=True)
