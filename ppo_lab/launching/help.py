"""`python launch.py --help`, written for people: the groups one line each, the keys people
change most with what they mean and their value in the config the command would run, and
where the rest is. Hydra's own dump (138 lines, no meanings) stays at `--hydra-help` and
`--cfg job`.

The values are composed, not copied: `python launch.py experiment=cartpole --help` shows
CartPole's. What a key means lives here, next to the list of keys it explains.
"""

from __future__ import annotations

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from ppo_lab.config_keys import CONF_DIR, USER_NAMESPACE, group_options

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

# The keys people change most, in the order they reach for them, and what each means.
KEYS = {
    "seed": "first seed; seeds seed .. seed+num_seeds-1 train vmapped in one process",
    "num_seeds": "how many seeds this process trains",
    "ppo.total_timesteps": "env steps per seed (rounded down to whole batches of num_envs x num_steps)",
    "ppo.lr": "Adam's learning rate (annealed to ppo.lr_final when ppo.anneal_lr)",
    "ppo.num_envs": "parallel envs per seed (the hardware preset's hardware.num_envs unless an experiment sets it)",
    "ppo.num_steps": "rollout length per update",
    "ppo.num_minibatches": "minibatches per epoch (must divide num_envs x num_steps)",
    "ppo.update_epochs": "epochs over each rollout",
    "ppo.gamma": "discount",
    "ppo.gae_lambda": "GAE lambda",
    "ppo.clip_eps": "PPO's clip range (decays to ppo.clip_eps_final)",
    "ppo.ent_coef_initial": "entropy bonus at the start (decays to ppo.ent_coef_final)",
    "ppo.max_grad_norm": "global gradient-norm clip",
    "network.hidden_sizes": "the MLP's layer sizes",
    "network.recurrent": "null (feed-forward), gru or lstm",
    "train.duration_min": "stop after this many minutes of training (counted across resumes; null: no limit)",
    "train.target_return": "stop once the windowed mean return reaches this (null: never)",
    "eval.episodes": "evaluation episodes per seed at the end",
    "checkpoint.every_min": "minutes between checkpoints (and always at the end)",
    "hardware.host_devices": "CPU: XLA devices to split the host into (auto: one per core)",
}


def _value(cfg, key: str) -> str:
    value = OmegaConf.select(cfg, key, default="?")
    value = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
    return "null" if value is None else str(value).replace(" ", "")


def help_text(overrides: list[str]) -> str:
    """The help for the config these overrides compose (errors in them are the caller's)."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
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
    width = max(map(len, KEYS))
    for key, meaning in KEYS.items():
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
