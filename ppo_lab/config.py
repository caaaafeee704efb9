"""Validated, frozen run configuration.

Hydra composes a `DictConfig`; `validate` takes it resolved to plain dicts, checks every value
a user can get wrong (the env's own keys too, through the env registry's jax-free checks) and
returns frozen dataclasses. Errors name the key, the value and what is valid, and are raised
before jax is imported, anything compiles or the run writes anything.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from ppo_lab.errors import ConfigError


@dataclass(frozen=True)
class PPOConfig:
    lr: float
    lr_final: float
    anneal_lr: bool
    gamma: float
    gae_lambda: float
    clip_eps: float
    clip_eps_final: float
    clip_vloss: bool
    vf_coef: float
    ent_coef_initial: float
    ent_coef_final: float
    entropy_floor: float | None
    entropy_floor_coef: float
    max_grad_norm: float
    update_epochs: int
    num_minibatches: int
    normalize_advantages: bool
    bootstrap_truncation: bool
    num_envs: int
    num_steps: int
    total_timesteps: int
    auto_scale: bool
    auto_scale_epoch_floor: int = 2
    auto_scale_reference_batch: int = 256 * 128
    value_norm: str | None = None  # None or "popart"
    popart_beta_min: float = 0.001
    separate_grad_clip: bool = False
    # The dtype the rollout stores observations in for the update (ppo/obs_storage.py).
    rollout_obs_dtype: str = "float32"
    # Adam's epsilon.
    adam_eps: float = 1e-5
    # The value loss: "mean_of_max" (0.5 x the mean over samples of max(e1, e2), PPO2/CleanRL)
    # or "max_of_means" (the reference's: max(mean e1, mean e2), no 1/2).
    value_loss: str = "mean_of_max"
    # A privileged critic's extra channels in the update taken after the step (the reference's).
    privileged_view_after_step: bool = False

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.num_minibatches

    @property
    def num_updates(self) -> int:
        return self.total_timesteps // self.batch_size


@dataclass(frozen=True)
class NetworkConfig:
    kind: str
    activation: str
    privileged_critic: bool = False
    shared_torso: bool = False
    hidden_sizes: tuple[int, ...] = (64, 64)
    conv_channels: tuple[int, ...] = (32, 64, 64)
    dense_size: int = 512


@dataclass(frozen=True)
class TrainConfig:
    duration_min: float | None
    target_return: float | None
    patience: int
    return_window: int
    chunk_updates: int


@dataclass(frozen=True)
class EvalConfig:
    episodes: int
    deterministic: bool
    max_steps: int | None
    survival_envs: int = 256
    survival_steps: int = 2048


@dataclass(frozen=True)
class HealthConfig:
    entropy_min: float
    kl_min: float
    kl_max: float
    clip_frac_max: float


@dataclass(frozen=True)
class RunConfig:
    seed: int
    num_seeds: int
    experiment: str
    resume: str | None
    benchmark: bool
    env: Mapping[str, Any]
    reward: Mapping[str, Any]
    ppo: PPOConfig
    network: NetworkConfig
    train: TrainConfig
    eval: EvalConfig
    health: HealthConfig
    checkpoint_every_min: float
    hardware: Mapping[str, Any]
    logger: Mapping[str, Any]
    extra: Mapping[str, Any] = field(default_factory=dict)
    # The whole resolved config (plain dicts) this RunConfig was validated from: what
    # config.yaml, loggers and the resume check see. Not part of equality: it repeats the fields.
    resolved: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def seeds(self) -> list[int]:
        return list(range(self.seed, self.seed + self.num_seeds))


ACTIVATIONS = ("tanh", "relu", "gelu", "elu")
LAYOUTS = ("auto", "seeds", "envs", "single")  # ppo.parallel.choose_layout
PRECISIONS = ("fp32", "bf16")  # networks: compute dtype; parameters stay fp32
CONVS = ("auto", "im2col", "native", "xla")  # networks.conv_for_platform
VALUE_NORMS = (None, "popart")
ROLLOUT_OBS_DTYPES = ("float32", "uint8", "bfloat16")  # ppo.obs_storage
VALUE_LOSSES = ("mean_of_max", "max_of_means")  # ppo.losses
NETWORK_KINDS = ("mlp", "cnn")


def _require(cond: bool, key: str, value, valid: str) -> None:
    if not cond:
        raise ConfigError(key, value, valid)


def _number(section: Mapping, prefix: str, name: str, kind=float):
    """Read `section[name]` as a number, with a ConfigError naming `prefix.name` if it is not."""
    key = f"{prefix}.{name}"
    if name not in section:
        raise ConfigError(key, None, "a value (the key is missing)")
    value = section[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(key, value, f"a number ({kind.__name__})")
    if kind is int:
        if float(value) != int(value):
            raise ConfigError(key, value, "an integer")
        return int(value)
    value = float(value)
    _require(math.isfinite(value), key, value, "a finite number")
    return value


def _flag(section: Mapping, prefix: str, name: str) -> bool:
    value = section.get(name)
    _require(isinstance(value, bool), f"{prefix}.{name}", value, "true or false")
    return value


def _optional(section: Mapping, prefix: str, name: str, kind=float):
    return None if section.get(name) is None else _number(section, prefix, name, kind)


def _ppo(s: Mapping) -> PPOConfig:
    n = lambda name, kind=float: _number(s, "ppo", name, kind)  # noqa: E731
    ppo = PPOConfig(
        lr=n("lr"),
        lr_final=n("lr_final"),
        anneal_lr=_flag(s, "ppo", "anneal_lr"),
        gamma=n("gamma"),
        gae_lambda=n("gae_lambda"),
        clip_eps=n("clip_eps"),
        clip_eps_final=n("clip_eps_final"),
        clip_vloss=_flag(s, "ppo", "clip_vloss"),
        vf_coef=n("vf_coef"),
        ent_coef_initial=n("ent_coef_initial"),
        ent_coef_final=n("ent_coef_final"),
        entropy_floor=_optional(s, "ppo", "entropy_floor"),
        entropy_floor_coef=n("entropy_floor_coef"),
        max_grad_norm=n("max_grad_norm"),
        update_epochs=n("update_epochs", int),
        num_minibatches=n("num_minibatches", int),
        normalize_advantages=_flag(s, "ppo", "normalize_advantages"),
        bootstrap_truncation=_flag(s, "ppo", "bootstrap_truncation"),
        num_envs=n("num_envs", int),
        num_steps=n("num_steps", int),
        total_timesteps=n("total_timesteps", int),
        auto_scale=_flag(s, "ppo", "auto_scale"),
        auto_scale_epoch_floor=n("auto_scale_epoch_floor", int) if "auto_scale_epoch_floor" in s else 2,
        auto_scale_reference_batch=n("auto_scale_reference_batch", int) if "auto_scale_reference_batch" in s else 256 * 128,
        value_norm=s.get("value_norm"),
        popart_beta_min=n("popart_beta_min") if "popart_beta_min" in s else 0.001,
        separate_grad_clip=_flag(s, "ppo", "separate_grad_clip") if "separate_grad_clip" in s else False,
        rollout_obs_dtype=s.get("rollout_obs_dtype", "float32"),
        adam_eps=n("adam_eps") if "adam_eps" in s else 1e-5,
        value_loss=s.get("value_loss", "mean_of_max"),
        privileged_view_after_step=_flag(s, "ppo", "privileged_view_after_step") if "privileged_view_after_step" in s else False,
    )
    _require(ppo.rollout_obs_dtype in ROLLOUT_OBS_DTYPES, "ppo.rollout_obs_dtype", ppo.rollout_obs_dtype,
             f"one of {list(ROLLOUT_OBS_DTYPES)}")
    _require(ppo.adam_eps > 0, "ppo.adam_eps", ppo.adam_eps, "an epsilon > 0")
    _require(ppo.value_loss in VALUE_LOSSES, "ppo.value_loss", ppo.value_loss, f"one of {list(VALUE_LOSSES)}")
    _require(ppo.value_norm in VALUE_NORMS, "ppo.value_norm", ppo.value_norm, f"one of {list(VALUE_NORMS)}")
    _require(0 < ppo.popart_beta_min <= 1, "ppo.popart_beta_min", ppo.popart_beta_min, "a step size in (0, 1]")
    _require(ppo.auto_scale_epoch_floor >= 1, "ppo.auto_scale_epoch_floor", ppo.auto_scale_epoch_floor, "an integer >= 1")
    _require(ppo.auto_scale_reference_batch >= 1, "ppo.auto_scale_reference_batch", ppo.auto_scale_reference_batch, "a batch size (envs x steps) >= 1")
    _require(ppo.lr > 0, "ppo.lr", ppo.lr, "a learning rate > 0")
    _require(0 <= ppo.lr_final <= ppo.lr, "ppo.lr_final", ppo.lr_final, f"0 <= lr_final <= lr ({ppo.lr})")
    _require(0 < ppo.gamma <= 1, "ppo.gamma", ppo.gamma, "a discount in (0, 1]")
    _require(0 <= ppo.gae_lambda <= 1, "ppo.gae_lambda", ppo.gae_lambda, "a value in [0, 1]")
    _require(ppo.clip_eps > 0, "ppo.clip_eps", ppo.clip_eps, "a clip range > 0")
    _require(ppo.clip_eps_final > 0, "ppo.clip_eps_final", ppo.clip_eps_final, "a clip range > 0")
    _require(ppo.vf_coef >= 0, "ppo.vf_coef", ppo.vf_coef, "a coefficient >= 0")
    _require(ppo.ent_coef_initial >= 0, "ppo.ent_coef_initial", ppo.ent_coef_initial, "a coefficient >= 0")
    _require(ppo.ent_coef_final >= 0, "ppo.ent_coef_final", ppo.ent_coef_final, "a coefficient >= 0")
    if ppo.entropy_floor is not None:
        _require(ppo.entropy_floor >= 0, "ppo.entropy_floor", ppo.entropy_floor, "null or an entropy >= 0")
    _require(ppo.entropy_floor_coef >= 0, "ppo.entropy_floor_coef", ppo.entropy_floor_coef, "a coefficient >= 0")
    _require(ppo.max_grad_norm > 0, "ppo.max_grad_norm", ppo.max_grad_norm, "a norm > 0")
    _require(ppo.update_epochs >= 1, "ppo.update_epochs", ppo.update_epochs, "an integer >= 1")
    _require(ppo.num_minibatches >= 1, "ppo.num_minibatches", ppo.num_minibatches, "an integer >= 1")
    _require(ppo.num_envs >= 1, "ppo.num_envs", ppo.num_envs, "an integer >= 1")
    _require(ppo.num_steps >= 1, "ppo.num_steps", ppo.num_steps, "an integer >= 1")
    _require(ppo.total_timesteps > 0, "ppo.total_timesteps", ppo.total_timesteps, "a positive number of steps")
    _require(
        ppo.batch_size % ppo.num_minibatches == 0,
        "ppo.num_minibatches",
        ppo.num_minibatches,
        f"a divisor of the batch num_envs*num_steps = {ppo.num_envs}*{ppo.num_steps} = {ppo.batch_size}",
    )
    _require(
        ppo.total_timesteps >= ppo.batch_size,
        "ppo.total_timesteps",
        ppo.total_timesteps,
        f"at least one batch (num_envs*num_steps = {ppo.batch_size})",
    )
    return ppo


def _network(s: Mapping) -> NetworkConfig:
    kind = s.get("kind")
    _require(kind in NETWORK_KINDS, "network.kind", kind, f"one of {list(NETWORK_KINDS)}")
    act = s.get("activation")
    _require(act in ACTIVATIONS, "network.activation", act, f"one of {list(ACTIVATIONS)}")
    sizes = tuple(s.get("hidden_sizes", (64, 64)))
    _require(all(isinstance(h, int) and h > 0 for h in sizes), "network.hidden_sizes", list(sizes), "positive integers")
    convs = tuple(s.get("conv_channels", (32, 64, 64)))
    _require(all(isinstance(c, int) and c > 0 for c in convs), "network.conv_channels", list(convs), "positive integers")
    dense = s.get("dense_size", 512)
    _require(isinstance(dense, int) and dense > 0, "network.dense_size", dense, "a positive integer")
    return NetworkConfig(
        kind=kind,
        activation=act,
        privileged_critic=_flag(s, "network", "privileged_critic") if "privileged_critic" in s else False,
        shared_torso=_flag(s, "network", "shared_torso") if "shared_torso" in s else False,
        hidden_sizes=sizes,
        conv_channels=convs,
        dense_size=dense,
    )


def _train(s: Mapping) -> TrainConfig:
    t = TrainConfig(
        duration_min=_optional(s, "train", "duration_min"),
        target_return=_optional(s, "train", "target_return"),
        patience=_number(s, "train", "patience", int),
        return_window=_number(s, "train", "return_window", int),
        chunk_updates=_number(s, "train", "chunk_updates", int),
    )
    if t.duration_min is not None:
        _require(t.duration_min > 0, "train.duration_min", t.duration_min, "null or minutes > 0")
    _require(t.patience >= 0, "train.patience", t.patience, "an integer >= 0")
    _require(t.return_window >= 1, "train.return_window", t.return_window, "an integer >= 1")
    _require(t.chunk_updates >= 1, "train.chunk_updates", t.chunk_updates, "an integer >= 1")
    return t


def _eval(s: Mapping) -> EvalConfig:
    e = EvalConfig(
        episodes=_number(s, "eval", "episodes", int),
        deterministic=_flag(s, "eval", "deterministic"),
        max_steps=_optional(s, "eval", "max_steps", int),
        survival_envs=_number(s, "eval", "survival_envs", int) if "survival_envs" in s else 256,
        survival_steps=_number(s, "eval", "survival_steps", int) if "survival_steps" in s else 2048,
    )
    _require(e.survival_envs >= 1, "eval.survival_envs", e.survival_envs, "an integer >= 1")
    _require(e.survival_steps >= 1, "eval.survival_steps", e.survival_steps, "an integer >= 1")
    _require(e.episodes >= 1, "eval.episodes", e.episodes, "an integer >= 1")
    if e.max_steps is not None:
        _require(e.max_steps >= 1, "eval.max_steps", e.max_steps, "null or an integer >= 1")
    return e


def _health(s: Mapping) -> HealthConfig:
    return HealthConfig(**{k: _number(s, "health", k) for k in ("entropy_min", "kl_min", "kl_max", "clip_frac_max")})


def validate_hardware(s: Mapping) -> dict:
    """Check the `hardware` section alone: launchers apply it before anything imports jax."""
    platform = s.get("platform")
    _require(platform in ("cpu", "gpu", "tpu"), "hardware.platform", platform, "one of ['cpu', 'gpu', 'tpu']")
    hd = s.get("host_devices", 1)
    _require(hd == "auto" or (isinstance(hd, int) and hd >= 1), "hardware.host_devices", hd, "'auto' or an integer >= 1")
    mf = s.get("mem_fraction")
    _require(mf is None or (isinstance(mf, (int, float)) and 0 < mf <= 1), "hardware.mem_fraction", mf, "null or a fraction in (0, 1]")
    layout = s.get("layout", "auto")
    _require(layout in LAYOUTS, "hardware.layout", layout, f"one of {list(LAYOUTS)}")
    conv = s.get("conv", "auto")
    _require(conv in CONVS, "hardware.conv", conv, f"one of {list(CONVS)}")
    precision = s.get("precision", "fp32")
    _require(precision in PRECISIONS, "hardware.precision", precision, f"one of {list(PRECISIONS)}")
    cap = s.get("memory_limit_gb")
    _require(cap is None or (isinstance(cap, (int, float)) and not isinstance(cap, bool) and cap > 0),
             "hardware.memory_limit_gb", cap, "null or a number of GB > 0")
    return dict(s)


def validate(cfg: Mapping[str, Any]) -> RunConfig:
    """Check a resolved config (plain nested dicts) and freeze it into a RunConfig."""
    from ppo_lab.envs.registry import check_env_config  # jax-free: the env modules stay unloaded

    seed = _number(cfg, "", "seed", int) if "seed" in cfg else 0
    num_seeds = _number(cfg, "", "num_seeds", int)
    _require(num_seeds >= 1, "num_seeds", num_seeds, "an integer >= 1")
    _require(seed >= 0, "seed", seed, "an integer >= 0")
    env = dict(cfg["env"])
    _require(isinstance(env.get("name"), str), "env.name", env.get("name"), "an environment name")
    reward = dict(cfg.get("reward") or {"name": "default"})
    check_env_config(env, reward)
    every = _number(cfg["checkpoint"], "checkpoint", "every_min")
    _require(every > 0, "checkpoint.every_min", every, "minutes > 0")
    benchmark = cfg.get("benchmark", False)
    _require(isinstance(benchmark, bool), "benchmark", benchmark, "true or false")
    resume = cfg.get("resume")
    _require(resume is None or isinstance(resume, str), "resume", resume, "null or a run directory")
    logger = dict(cfg.get("logger") or {})
    known = {f.name for f in dataclasses.fields(RunConfig)} | {"checkpoint"}
    known.discard("resolved")
    return RunConfig(
        seed=seed,
        num_seeds=num_seeds,
        experiment=str(cfg.get("experiment")),
        resume=resume,
        benchmark=benchmark,
        env=env,
        reward=reward,
        ppo=_ppo(cfg["ppo"]),
        network=_network(cfg["network"]),
        train=_train(cfg["train"]),
        eval=_eval(cfg["eval"]),
        health=_health(cfg["health"]),
        checkpoint_every_min=every,
        hardware=validate_hardware(cfg["hardware"]),
        logger=logger,
        extra={k: v for k, v in cfg.items() if k not in known},
        resolved=dict(cfg),
    )

