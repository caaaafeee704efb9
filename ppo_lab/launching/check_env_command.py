"""`ppo-lab check-env TARGET [KEY=VALUE ...]`: an env against the lab's env contract, before
training it (`envs.contract.check_env`, compiled and run: reset and step under jit and vmap, the
outputs' shapes and dtypes against the spaces, action sampling, the mask, the params as a pytree,
a few frames if the env draws them).

TARGET is an env option (`cartpole`, or one of one's own project's: `keydoor`, from the working
folder's conf/env/ as `ppo-lab train` finds it) composed with the overrides given (`env.length=4`,
`reward=...`) and validated as a run's; or the dotted path of a builder (`my_envs.keydoor.build`),
called with the keys of the env option that names it, else with the `env.KEY=VALUE` given (or none).

Exit 0: the env keeps the contract; 1: it breaks it (every breach listed); 2: a bad command
(an unknown option, a builder that does not load, a config the env's check refuses).
"""

from __future__ import annotations

import argparse
import sys

from omegaconf import OmegaConf

from ppo_lab import config_keys, parts
from ppo_lab.errors import ConfigError
from ppo_lab.launching.command_line import check_overrides, compose, searchpath_entries
from ppo_lab.launching.train_command import with_project_config

BROKEN = 1  # the env breaks the contract


def option_naming(builder: str) -> str | None:
    """The env option (of conf/ or a config folder of one's own) whose `_target_` is `builder`."""
    for option in config_keys.group_options("env") or []:
        if OmegaConf.load(config_keys.option_file("env", option)).get("_target_") == builder:
            return option
    return None


def _built(target: str, overrides: list[str]):
    """(env, params, how it was built) for `target` (see the module docstring)."""
    from ppo_lab.config import validate
    from ppo_lab.hardware import start_jax
    from ppo_lab.ppo.parallel import AXIS
    from ppo_lab.run.build import build_env

    argv = with_project_config(overrides)
    config_keys.use_config_dirs(searchpath_entries(argv))  # the project's options count, its modules import
    option = target if "." not in target else option_naming(target)
    own = [] if option is not None else [a for a in argv if a.startswith("env.")]  # a bare builder's keys
    argv = [f"env={option}", *argv] if option is not None else [a for a in argv if a not in own]
    check_overrides(argv)
    cfg = validate(OmegaConf.to_container(compose(argv), resolve=True))  # the env's own check included
    start_jax(cfg.hardware)
    if option is None:  # a builder no option names: the keys given, else its own defaults
        keys = OmegaConf.to_container(OmegaConf.from_dotlist([a.removeprefix("env.") for a in own]))
        env, params = parts.call("env._target_", target, keys, {}, privileged_critic=False)
        return env, params, f"{target} (no env option names it: called with {keys or 'no keys'})"
    env, params = build_env(cfg)
    env.place(1, AXIS)  # one simulator, for an env stepped outside JAX
    return env, params, f"env={option} ({cfg.env.target})"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="ppo-lab check-env", description=__doc__.split("\n\n")[0])
    parser.add_argument("target", help="an env option (cartpole, or your own conf/env/NAME.yaml) or a builder's dotted path")
    parser.add_argument("overrides", nargs="*", help="KEY=VALUE overrides composed with the option (env.length=4)")
    args = parser.parse_args(argv)
    if "=" in args.target:  # `env=cartpole` as train writes it: Hydra would fail on env=env=cartpole, with a traceback
        parser.error(f"TARGET is an env option or a builder's dotted path, not an override: "
                     f"ppo-lab check-env {args.target.partition('=')[2] or 'cartpole'} [KEY=VALUE ...]")
    try:
        env, params, built = _built(args.target, list(args.overrides))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from ppo_lab.envs.contract import EnvContractError, check_env, describe

    try:
        check_env(env, params, name=built, concrete=True, render=True)
    except EnvContractError as exc:
        print(exc, file=sys.stderr)
        return BROKEN
    print(f"{built} keeps the env contract: {describe(env, params)}")
    return 0
