"""The benchmark's configs by name, composed exactly as launch.py composes them."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from ppo_lab.config_keys import CONF_DIR
from ppo_lab.launching import command_line

# Used for an env only while it has no experiment config of its own.
# Foraging: the project's default foraging scale for this hardware (conf/scale). For the
# reference CNN add `network=cnn` (and keep the batch small: on XLA:CPU the CNN's gradient inside
# the trainer's minibatch `lax.scan` is ~15x slower than outside a loop, docs/performance.md).
FALLBACK_OVERRIDES = {"foraging": ["env=foraging", "reward=ground_truth"]}


def family_task(name: str) -> tuple[str, str] | None:
    """`envpool:CoinrunEasy-v0` -> ("envpool", "CoinrunEasy-v0"): an env family's task by id;
    None for a plain name."""
    family, sep, task = name.partition(":")
    return (family, task) if sep and family and task else None


def experiment_for_task(family: str, task: str) -> str | None:
    """The experiment whose env is `family` with `env.id: task` (e.g. coinrun for
    envpool:CoinrunEasy-v0), read from the YAML files without composing; None if none is."""
    for path in sorted((CONF_DIR / "experiment").glob("*.yaml")):
        cfg = OmegaConf.load(path)
        defaults = [d for d in (cfg.get("defaults") or []) if isinstance(d, (dict, DictConfig))]
        env_choice = next((v for d in defaults for k, v in d.items() if k.endswith("/env")), None)
        if env_choice == family and OmegaConf.select(cfg, "env.id") == task:
            return path.stem
    return None


def env_overrides(name: str) -> list[str]:
    """How the suite selects an env: its experiment config if there is one, else env=<name>;
    `family:id` (e.g. envpool:CoinrunEasy-v0): the experiment of that task, else env=family env.id=id."""
    task = family_task(name)
    if task is not None:
        experiment = experiment_for_task(*task)
        return [f"experiment={experiment}"] if experiment else [f"env={task[0]}", f"env.id={task[1]}"]
    if (CONF_DIR / "experiment" / f"{name}.yaml").exists():
        return [f"experiment={name}"]
    return list(FALLBACK_OVERRIDES.get(name, [f"env={name}"]))


def known_env(name: str) -> bool:
    """Whether `name` is an env the suite can select: an experiment or a `conf/env` option (or
    `family:id` of one)."""
    task = family_task(name)
    if task is not None:
        return (CONF_DIR / "env" / f"{task[0]}.yaml").exists()
    return any((CONF_DIR / group / f"{name}.yaml").exists() for group in ("experiment", "env"))


def compose(overrides: list[str]) -> dict:
    """The resolved config for these overrides, composed exactly as launch.py would."""
    return OmegaConf.to_container(command_line.compose(list(overrides)), resolve=True)
