"""`python launch.py --help`, written for people: the groups one line each, the keys people
change most with what they mean and their value in the config the command would run, and
where the rest is. Hydra's own dump (138 lines, no meanings) stays at `--hydra-help` and
`--cfg job`.

The values are composed, not copied: `python launch.py experiment=cartpole --help` shows
CartPole's. Which keys are listed, and in which order, is the `help` mark on their fields
(`config.help_keys()`); what a key means is the comment ending its line in its YAML
(`config_keys.meaning`), where its default is.
"""

from __future__ import annotations

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from ppo_lab import config_keys
from ppo_lab.config import help_keys
from ppo_lab.config_keys import USER_NAMESPACE, group_options

GROUPS = {
    "experiment": "a preset setting what differs",
    "env": "the environment",
    "reward": "the env's reward mode, for an env with several (default: the env's own)",
    "network": "the network's torso",
    "hardware": "devices, precision, memory, a ppo.num_envs for them",
    "logger": "besides metrics.csv: logger=[csv,mlflow]",
    "scale": "picked for you: sizes that suit the env on this hardware",
    "fidelity": "Goodhart fidelity cells: +fidelity=reference",
}

def _value(cfg, key: str) -> str:
    value = OmegaConf.select(cfg, key, default="?")
    value = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
    return "null" if value is None else str(value).replace(" ", "")


def help_text(overrides: list[str]) -> str:
    """The help for the config these overrides compose (errors in them are the caller's)."""
    with initialize_config_dir(config_dir=str(config_keys.CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides), return_hydra_config=True)
    lines = ["usage: python launch.py [group=option ...] [key=value ...] [-m for a sweep]", "",
             "Trains PPO on the composed config; a run ends saying where its results are.", "",
             "Config groups (group=option):"]
    for group, meaning in GROUPS.items():
        options = group_options(group) or []
        chosen = OmegaConf.select(cfg, f"hydra.runtime.choices.{group}", default=None)
        listed = ", ".join(options) if len(options) <= 14 else f"{len(options)} in conf/{group}/"
        lines.append(f"  {group:<11} {meaning}: {listed}" + (f" (now {chosen})" if chosen in options else ""))
    lines.append("  ppo, train  the sections every key below is in (conf/ppo/default.yaml, conf/train/default.yaml)")
    shown = " ".join(overrides) or "the defaults"
    lines += ["", f"Keys people change most (key=value; value now, for {shown}):"]
    keys = help_keys()
    choices = OmegaConf.to_container(cfg.hydra.runtime.choices)
    width = max(map(len, keys))
    for key in keys:
        meaning = config_keys.meaning(key, choices) or "(no meaning in its YAML: see conf/)"
        lines.append(f"  {key:<{width}}  {_value(cfg, key):<10} {meaning}")
    lines += ["",
              f"Your own keys: +{USER_NAMESPACE}.NAME=VALUE (recorded, change nothing). Any other unknown key is refused.",
              "The rest: python launch.py [overrides] --cfg job prints every key of the composed config;",
              "each conf/<group>/*.yaml says what its keys do; README.md and docs/guide.md the rest.",
              "Examples: python launch.py experiment=cartpole num_seeds=4",
              "          python launch.py -m experiment=cartpole ppo.lr=1e-3,3e-4",
              "Hydra's own help: --hydra-help."]
    return "\n".join(lines)


def asked_for_help(argv: list[str]) -> bool:
    return "--help" in argv or "-h" in argv
