"""From a validated RunConfig to the objects a run needs: env, network, trainer, layout."""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass
from typing import Any

import jax

from ppo_lab import parts
from ppo_lab.config import PPOConfig, RunConfig
from ppo_lab.errors import ConfigError
from ppo_lab.envs.contract import check_env
from ppo_lab.networks import ActorCritic, conv_for_platform
from ppo_lab.ppo.hypers import Hypers
from ppo_lab.ppo.autoscale import apply_auto_scale
from ppo_lab.ppo.parallel import AXIS, Layout, choose_layout
from ppo_lab.ppo.policies import for_env
from ppo_lab.ppo.train import Trainer, env_params_argument, make_trainer

log = logging.getLogger(__name__)


@dataclass
class Components:
    env: Any
    env_params: Any
    network: ActorCritic
    ppo: PPOConfig  # after auto-scaling
    layout: Layout
    trainer: Trainer
    action_names: list[str]
    # The replicas' traced hyperparameters (`Hypers`, [replicas] per field): this config's,
    # or, for a group of grid cells sharing the program, each cell's for its own replicas.
    hypers: Hypers

    def init_arguments(self) -> tuple:
        """What `parallel.init_replicas` and `replica_template` take after the mesh, as the
        trainer's programs take them: the replicas' hyperparameters, the run's update count and
        the env's params when they are data (`env_params_argument`)."""
        return self.hypers, self.trainer.num_updates, env_params_argument(self.env, self.env_params)


def build_env(cfg: RunConfig):
    """`(env, env_params)` from the builder the env's YAML names (`_target_`), given its keys and
    the reward mode's (its check ran in `validate`)."""
    return parts.call("env._target_", cfg.env.target, dict(cfg.env.options), dict(cfg.reward.options),
                      privileged_critic=cfg.network.privileged_critic)


def build_env_and_network(cfg: RunConfig):
    env, env_params = build_env(cfg)
    # The env against its contract, traced for shapes and dtypes (nothing compiles or runs): a
    # breach is named here, in one message, not as a traceback from inside the trainer.
    check_env(env, env_params, name=f"env={cfg.env.name} ({cfg.env.target})")
    dist = for_env(env, env_params, cfg.network.squash)  # a masked continuous env is refused here
    if dist.continuous:
        check_continuous(cfg, env, env_params)
    conv = conv_for_platform(jax.devices()[0].platform, cfg.hardware.conv)
    network = ActorCritic(dist.action_dim, cfg.network, env.actor_obs_channels,
                          critic_plane_channels=env.critic_plane_channels,
                          conv=conv, precision=cfg.hardware.precision, continuous=dist.continuous,
                          normalize_obs=cfg.ppo.normalize_obs)
    if dist.continuous:  # actions/mean_<i>, actions/std_<i> are named by the trainer
        names = [str(i) for i in range(dist.action_dim)]
    else:
        names = list(env.action_names or [str(i) for i in range(dist.action_dim)])
    return env, env_params, network, names


def check_continuous(cfg: RunConfig, env, env_params) -> None:
    """What a continuous env cannot be combined with, refused before anything compiles."""
    obs_shape = tuple(env.observation_space(env_params).shape)
    if cfg.network.kind == "cnn" and len(obs_shape) < 3:
        raise ConfigError("network", cfg.network.kind, f"network=mlp: this continuous env's observations are flat "
                          f"(shape {obs_shape}), not images a CNN could take")


def chunk_updates(cfg: RunConfig, ppo: PPOConfig, start_update: int = 0) -> int:
    """Updates per chunk: train.chunk_updates (at most the run's), cut to the largest divisor
    of what must fall between chunks: a population's steps (pbt.interval_updates), the
    evaluations along training (eval.every_updates), and the update a run resumes from (its
    chunks then still end on those)."""
    chunk = min(cfg.train.chunk_updates, ppo.num_updates)
    periods = [p for p in (cfg.pbt.interval_updates if cfg.pbt is not None else 0, cfg.eval.every_updates or 0) if p]
    if not periods:
        return chunk
    between = math.gcd(*periods, start_update)
    return max(d for d in range(1, min(chunk, between) + 1) if between % d == 0)


def starting_at(comp: Components, cfg: RunConfig, start_update: int) -> Components:
    """`comp` for a program that starts at `start_update`: its chunks cut so that they still
    end on a population's steps and on evaluations along training (a relaunch with another
    train.chunk_updates may resume between them); as it is otherwise."""
    chunk = chunk_updates(cfg, comp.ppo, start_update)
    if chunk == comp.trainer.chunk_updates:
        return comp
    return dataclasses.replace(comp, trainer=dataclasses.replace(comp.trainer, chunk_updates=chunk))


def build(cfg: RunConfig, num_devices: int) -> Components:
    env, env_params, network, action_names = build_env_and_network(cfg)
    for name, path in cfg.env.evaluations.items():  # load now: a missing one fails before any compile
        parts.load(f"env.evaluations.{name}", path)
    ppo = apply_auto_scale(cfg.ppo)
    recurrent = cfg.network.is_recurrent
    layout = choose_layout(cfg.num_seeds, ppo, num_devices, cfg.hardware.layout, sequences=recurrent)
    env.place(layout.num_devices, AXIS)  # EnvPool, Gymnasium: envs outside JAX, one pool per device of the layout
    if recurrent and layout.envs_per_replica % ppo.num_minibatches:
        # Before any compile: a recurrent policy's minibatches are whole env sequences.
        raise ConfigError("ppo.num_minibatches", ppo.num_minibatches,
                          f"a divisor of the envs per replica ({layout.envs_per_replica}) with network.recurrent="
                          f"{cfg.network.recurrent}: its minibatches are whole env sequences")
    log.info("layout: %s over %d device(s), %d replica(s) of %d envs (%s)", layout.mode, layout.num_devices,
             layout.num_replicas, layout.envs_per_replica, layout.reason)
    trainer = make_trainer(
        ppo, env, env_params, network,
        num_envs=layout.envs_per_replica,
        chunk_updates=chunk_updates(cfg, ppo),
        grad_axis=layout.grad_axis,
        keeps_policy_anchors=cfg.eval.along and not cfg.benchmark,
    )
    hypers = Hypers.replicated(ppo, layout.num_replicas)
    return Components(env, env_params, network, ppo, layout, trainer, action_names, hypers)
