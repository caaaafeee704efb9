"""Validated, frozen run configuration: one typed section per config group.

Hydra composes a `DictConfig`; `validate` takes it resolved to plain dicts, checks every value
a user can get wrong, each section once (the env's own keys through the jax-free check its
YAML names, `env.check`), and returns frozen dataclasses. Errors name the key, the value and
what is valid, and are raised before XLA starts, anything compiles or the run writes anything.

The values themselves live in one place, `conf/`: every key is read from the composed config
(a missing key is an error that names it), with five exceptions, defaults written in `validate`
for keys a config saved by an older lab (or a hand-written one) may lack: `seed` (0), `reward`
(the section `{name: default}`), `checkpoint.if_all_damaged` ("error"), `benchmark` (false) and
`resume` (null). conf/ gives each the same value; nothing else is filled in here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ppo_lab import parts
from ppo_lab.config_keys import check_sections
from ppo_lab.errors import ConfigError

# The config groups: `conf/` at the top of the repository (the lab runs from its checkout).
CONF_DIR = Path(__file__).resolve().parent.parent / "conf"


def traced():
    """Marks a PPOConfig field as a traced hyperparameter: it changes no shape, so it is an
    argument of the compiled chunk, one value per replica (ppo/hypers.py `Hypers`), and jobs of
    a grid that differ only in such keys share one program (hydra/launcher=vmap). Adding one:
    mark its field here and give its YAML default (conf/ppo/); the trainer reads it by name."""
    return field(metadata={"traced": True})


@dataclass(frozen=True)
class PPOConfig:
    lr: float = traced()
    lr_final: float = traced()
    anneal_lr: bool
    gamma: float = traced()
    gae_lambda: float = traced()
    clip_eps: float = traced()
    clip_eps_final: float = traced()
    clip_vloss: bool
    vf_coef: float = traced()
    ent_coef_initial: float = traced()
    ent_coef_final: float = traced()
    entropy_floor: float | None = traced()
    entropy_floor_coef: float = traced()
    max_grad_norm: float = traced()
    update_epochs: int
    num_minibatches: int
    normalize_advantages: bool
    bootstrap_truncation: bool
    num_envs: int
    num_steps: int
    total_timesteps: int
    auto_scale: bool
    auto_scale_epoch_floor: int
    auto_scale_reference_batch: int
    value_norm: str | None  # None or "popart"
    popart_beta_min: float
    separate_grad_clip: bool
    rollout_obs_dtype: str  # the dtype the rollout stores observations in for the update (ppo/obs_storage.py)
    adam_eps: float
    # The value loss: "mean_of_max" (0.5 x the mean over samples of max(e1, e2), PPO2/CleanRL)
    # or "max_of_means" (the reference's: max(mean e1, mean e2), no 1/2).
    value_loss: str
    privileged_view_after_step: bool  # a privileged critic's extra channels taken after the step (the reference's)
    normalize_obs: bool  # running mean/variance of observations (ppo/normalize.py)
    normalize_reward: bool  # rewards over the running std of the discounted return

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
    """`conf/network/*.yaml`: the torso is the module at `target` (`_target_`), built with
    `torso` (its own keys: hidden_sizes, or conv_channels and dense_size) and `activation`."""
    kind: str
    target: str
    activation: str
    privileged_critic: bool
    shared_torso: bool
    squash: str | None  # continuous actions: None (clip to the bounds) or "tanh"
    torso: tuple[tuple[str, Any], ...]  # the torso's own keys, as sorted (name, value) pairs (hashable)
    recurrent: str | None  # None (feed-forward), "gru" or "lstm": a cell between the torso and the heads
    recurrent_size: int  # the cell's hidden units
    head_hidden: int  # units of a dense + activation layer in each head before its output; 0: linear heads
    head_hidden_gain: float  # that layer's orthogonal initial gain

    @property
    def is_recurrent(self) -> bool:
        return self.recurrent is not None

    def torso_kwargs(self) -> dict:
        return dict(self.torso)


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
    survival_envs: int
    survival_steps: int


@dataclass(frozen=True)
class HealthConfig:
    entropy_min: float
    kl_min: float
    kl_max: float
    clip_frac_max: float


@dataclass(frozen=True)
class HardwareConfig:
    """`conf/hardware/*.yaml` (cpu, gpu, tpu): what `ppo_lab.hardware.start_jax` applies."""
    platform: str
    allow_fallback: bool
    host_devices: int | str  # an integer, or "auto" (one per core)
    num_envs: int | None  # the env count a scale file sizes for this hardware
    preallocate: bool
    mem_fraction: float | None
    compilation_cache_dir: str | None
    layout: str
    precision: str
    memory_limit_gb: float | None
    conv: str
    deterministic: bool  # XLA's deterministic-ops flags where the backend has them (GPU): ppo_lab.hardware
    # one run across processes (ppo_lab.hardware.distributed_settings): null = detected
    coordinator_address: str | None = None
    num_processes: int | None = None
    process_id: int | None = None
    init_timeout_s: float = 60
    split_host_cpus: bool = True  # processes of one CPU run on one host each take their own CPUs


class _KeysByName:
    """A section whose own keys (`options`) read like a mapping: `section["key"]`, `.get`."""

    options: Mapping[str, Any]

    def get(self, key: str, default=None):
        return self.options.get(key, default)

    def __getitem__(self, key: str):
        return self.options[key]


@dataclass(frozen=True)
class EnvSection(_KeysByName):
    """`conf/env/*.yaml`: the builder at `target` (`_target_`), its jax-free `check`, the extra
    evaluations it offers, and its own keys (`options`, `name` included) as its builder reads them."""
    name: str
    target: str
    check: str | None
    evaluations: Mapping[str, str]  # name -> dotted path of `evaluate(cfg, env, env_params, network, params, key)`
    options: Mapping[str, Any]
    # task -> {random, reference}: the returns that normalise scores across tasks (the analysis's only)
    scores: Mapping[str, Any] = field(default_factory=dict)
    # headline, beside, bounds: what the env's runs are judged by (the analysis's only)
    metrics: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RewardSection(_KeysByName):
    """`conf/reward/*.yaml`: a reward mode by `name` and its keys, as the env reads them."""
    name: str
    options: Mapping[str, Any]


@dataclass(frozen=True)
class LoggerSpec:
    """One entry of `logger` (`conf/logger/<name>.yaml`): the factory at `target`
    (`_target_`; null for csv, whose metrics.csv is always written) and its options."""
    name: str
    target: str | None
    options: Mapping[str, Any]


@dataclass(frozen=True)
class ExploredKey:
    """One hyperparameter a population explores (`pbt.hypers.<key>`): its range and scale."""
    low: float
    high: float
    log: bool


@dataclass(frozen=True)
class PBTConfig:
    """`conf/pbt/default.yaml`: population-based training (ppo_lab/run/population.py, docs/pbt.md)."""
    population: int  # members; 0: off
    interval_updates: int
    fraction: float
    fitness: str
    exploit: bool
    hypers: Mapping[str, ExploredKey]  # traced key (config.TRACED_PPO_KEYS) -> its range
    factors: tuple[float, ...]
    resample_prob: float

    @property
    def on(self) -> bool:
        return self.population > 0


@dataclass(frozen=True)
class RunConfig:
    seed: int
    num_seeds: int
    experiment: str
    resume: str | None
    benchmark: bool
    env: EnvSection
    reward: RewardSection
    ppo: PPOConfig
    network: NetworkConfig
    train: TrainConfig
    eval: EvalConfig
    health: HealthConfig
    checkpoint_every_min: float
    hardware: HardwareConfig
    logger: Mapping[str, LoggerSpec]
    pbt: PBTConfig | None = None  # None: no population (pbt.population=0)
    extra: Mapping[str, Any] = field(default_factory=dict)
    # The user's own keys (`+tags.owner=me`): recorded in config.yaml and the loggers' params,
    # read by nothing; the one place an unknown key is allowed (config_keys.USER_NAMESPACE).
    tags: Mapping[str, Any] = field(default_factory=dict)
    # The whole resolved config (plain dicts) this RunConfig was validated from: what
    # config.yaml, loggers and the resume check see. Not part of equality: it repeats the fields.
    resolved: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def seeds(self) -> list[int]:
        return list(range(self.seed, self.seed + self.num_seeds))


ACTIVATIONS = ("tanh", "relu", "gelu", "elu")
# The PPO keys marked `traced()` in PPOConfig, in its order. `entropy_floor` null or not is the
# program's choice, its value is not.
TRACED_PPO_KEYS = tuple(f.name for f in dataclasses.fields(PPOConfig) if f.metadata.get("traced"))


def shared_program_key(resolved: Mapping[str, Any]) -> str:
    """What runs must have in common to train in one compiled program (hydra/launcher=vmap):
    the resolved config (plain dicts, no `hydra`) less `seed` (a seed is a replica's PRNG key)
    and `TRACED_PPO_KEYS`, keeping whether `ppo.entropy_floor` is null (the program's choice)."""
    rest = {k: v for k, v in resolved.items() if k not in ("seed", "hydra", "tags")}
    ppo = dict(rest.get("ppo") or {})
    floor_on = ppo.get("entropy_floor") is not None
    rest["ppo"] = {k: v for k, v in ppo.items() if k not in TRACED_PPO_KEYS} | {"entropy_floor (on)": floor_on}
    return json.dumps(rest, sort_keys=True, default=str)


def config_hash(resolved: Mapping[str, Any], exclude: tuple[str, ...] = ("hydra",)) -> str:
    """The sha256 of a resolved config (plain dicts) less the top-level `exclude` keys, over its
    canonical JSON (keys sorted, no spaces): equal configs hash equal in any process, on any
    host (manifest.json; a multi-process run compares its processes' hashes)."""
    rest = {k: v for k, v in resolved.items() if k not in exclude}
    text = json.dumps(rest, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


# hardware keys a config saved before multi-process runs lacks (defaults: one process)
PROCESS_KEYS = ("coordinator_address", "num_processes", "process_id", "init_timeout_s", "split_host_cpus")
LAYOUTS = ("auto", "seeds", "envs", "single")  # ppo.parallel.choose_layout
PRECISIONS = ("fp32", "bf16")  # networks: compute dtype; parameters stay in the first
CONVS = ("auto", "im2col", "native", "xla")  # networks.conv_for_platform
VALUE_NORMS = (None, "popart")
RECURRENT_CELLS = (None, "gru", "lstm")  # network.recurrent; networks.CELLS
PLATFORMS = ("cpu", "gpu", "tpu")
ROLLOUT_OBS_DTYPES = ("float32", "uint8", "bfloat16")  # ppo.obs_storage
VALUE_LOSSES = ("mean_of_max", "max_of_means")  # ppo.losses


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


def _traced_values(s: Mapping) -> dict[str, float | None]:
    """The traced keys of the `ppo` section: numbers (null too where the field allows None)."""
    fields = [f for f in dataclasses.fields(PPOConfig) if f.name in TRACED_PPO_KEYS]
    return {f.name: (_optional if "None" in str(f.type) else _number)(s, "ppo", f.name) for f in fields}


def _ppo(s: Mapping) -> PPOConfig:
    n = lambda name, kind=float: _number(s, "ppo", name, kind)  # noqa: E731
    ppo = PPOConfig(
        **_traced_values(s),
        anneal_lr=_flag(s, "ppo", "anneal_lr"),
        clip_vloss=_flag(s, "ppo", "clip_vloss"),
        update_epochs=n("update_epochs", int),
        num_minibatches=n("num_minibatches", int),
        normalize_advantages=_flag(s, "ppo", "normalize_advantages"),
        bootstrap_truncation=_flag(s, "ppo", "bootstrap_truncation"),
        num_envs=n("num_envs", int),
        num_steps=n("num_steps", int),
        total_timesteps=n("total_timesteps", int),
        auto_scale=_flag(s, "ppo", "auto_scale"),
        auto_scale_epoch_floor=n("auto_scale_epoch_floor", int),
        auto_scale_reference_batch=n("auto_scale_reference_batch", int),
        value_norm=s.get("value_norm"),
        popart_beta_min=n("popart_beta_min"),
        separate_grad_clip=_flag(s, "ppo", "separate_grad_clip"),
        rollout_obs_dtype=s.get("rollout_obs_dtype"),
        adam_eps=n("adam_eps"),
        value_loss=s.get("value_loss"),
        privileged_view_after_step=_flag(s, "ppo", "privileged_view_after_step"),
        normalize_obs=_flag(s, "ppo", "normalize_obs"),
        normalize_reward=_flag(s, "ppo", "normalize_reward"),
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


NETWORK_KEYS = ("_target_", "kind", "activation", "privileged_critic", "shared_torso", "squash", "recurrent",
                "recurrent_size", "head_hidden", "head_hidden_gain")
SQUASHES = (None, "tanh")  # ppo_lab.ppo.gaussian


def validate_network(s: Mapping) -> NetworkConfig:
    kind = s.get("kind")
    _require(isinstance(kind, str) and kind, "network.kind", kind, "a name for the network (mlp, cnn, ...)")
    target = s.get("_target_")
    _require(isinstance(target, str) and "." in target, "network._target_", target,
             "the dotted path of a flax torso module, e.g. ppo_lab.networks.MLPTorso")
    act = s.get("activation")
    _require(act in ACTIVATIONS, "network.activation", act, f"one of {list(ACTIVATIONS)}")
    _require("squash" in s, "network.squash", None, "a value (the key is missing)")
    _require(s["squash"] in SQUASHES, "network.squash", s["squash"], f"one of {list(SQUASHES)} (continuous actions)")
    torso = {k: v for k, v in s.items() if k not in NETWORK_KEYS}
    for key in ("hidden_sizes", "conv_channels", "stack_channels"):
        if key in torso:
            sizes = torso[key] = tuple(torso[key])
            _require(all(isinstance(h, int) and not isinstance(h, bool) and h > 0 for h in sizes),
                     f"network.{key}", list(sizes), "positive integers")
    recurrent = s.get("recurrent")
    _require(recurrent in RECURRENT_CELLS, "network.recurrent", recurrent, "null (feed-forward), gru or lstm")
    size = s.get("recurrent_size")
    _require(isinstance(size, int) and not isinstance(size, bool) and size > 0, "network.recurrent_size", size, "a positive integer")
    _require(recurrent is None or not (s.get("privileged_critic") and s.get("shared_torso")), "network.recurrent", recurrent,
             "null with a privileged critic on the actor's torso (network.shared_torso=true), or network.shared_torso=false")
    head = s.get("head_hidden")
    _require(isinstance(head, int) and not isinstance(head, bool) and head >= 0, "network.head_hidden", head,
             "0 (linear heads) or a positive integer")
    gain = s.get("head_hidden_gain")
    _require(isinstance(gain, (int, float)) and not isinstance(gain, bool) and gain > 0, "network.head_hidden_gain", gain,
             "a positive number")
    if "dense_size" in torso:
        dense = torso["dense_size"]
        _require(isinstance(dense, int) and dense > 0, "network.dense_size", dense, "a positive integer")
    return NetworkConfig(
        kind=kind,
        target=target,
        activation=act,
        privileged_critic=_flag(s, "network", "privileged_critic"),
        shared_torso=_flag(s, "network", "shared_torso"),
        squash=s["squash"],
        torso=tuple(sorted(torso.items())),
        recurrent=recurrent,
        recurrent_size=size,
        head_hidden=head,
        head_hidden_gain=float(gain),
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
        survival_envs=_number(s, "eval", "survival_envs", int),
        survival_steps=_number(s, "eval", "survival_steps", int),
    )
    _require(e.survival_envs >= 1, "eval.survival_envs", e.survival_envs, "an integer >= 1")
    _require(e.survival_steps >= 1, "eval.survival_steps", e.survival_steps, "an integer >= 1")
    _require(e.episodes >= 1, "eval.episodes", e.episodes, "an integer >= 1")
    if e.max_steps is not None:
        _require(e.max_steps >= 1, "eval.max_steps", e.max_steps, "null or an integer >= 1")
    return e


def _explored(key: str, s) -> ExploredKey:
    prefix = f"pbt.hypers.{key}"
    _require(key in TRACED_PPO_KEYS and key != "entropy_floor", prefix, s,
             f"an explorable key, one of {[k for k in TRACED_PPO_KEYS if k != 'entropy_floor']} (traced: they "
             f"change no shape, so one compiled program trains every member)")
    _require(isinstance(s, Mapping) and set(s) == {"low", "high", "log"}, prefix, s, "{low: NUMBER, high: NUMBER, log: BOOL}")
    low, high = _number(s, prefix, "low"), _number(s, prefix, "high")
    log = _flag(s, prefix, "log")
    _require(low < high, f"{prefix}.low", low, f"a value below high ({high})")
    _require(not log or low > 0, f"{prefix}.low", low, "a value > 0 with log: true (a log-uniform range)")
    return ExploredKey(low, high, log)


def _pbt(s: Mapping | None, num_seeds: int) -> PBTConfig | None:
    """The `pbt` section (None: off). Members share one program, so only traced keys are explored."""
    s = dict(s or {"population": 0})
    population = _number(s, "pbt", "population", int)
    if population == 0:
        return None
    _require(population >= 2, "pbt.population", population, "0 (off) or an integer >= 2")
    _require(num_seeds == 1, "num_seeds", num_seeds, f"1 with pbt.population={population} (member m trains seed "
             f"seed+m; several populations: -m seed=0,{population},{2 * population},...)")
    interval = _number(s, "pbt", "interval_updates", int)
    _require(interval >= 1, "pbt.interval_updates", interval, "an integer >= 1")
    fraction = _number(s, "pbt", "fraction")
    _require(0 < fraction <= 0.5, "pbt.fraction", fraction, "a fraction in (0, 0.5]")
    fitness = s.get("fitness")
    _require(isinstance(fitness, str) and "/" in fitness, "pbt.fitness", fitness, "a logged metric, e.g. train/mean_episode_return")
    hypers = {str(k).removeprefix("ppo."): v for k, v in dict(s.get("hypers") or {}).items()}
    _require(bool(hypers), "pbt.hypers", hypers, "at least one explored key: {KEY: {low, high, log}}")
    perturb = dict(s.get("perturb") or {})
    factors = perturb.get("factors")
    _require(isinstance(factors, (list, tuple)) and factors and all(
        isinstance(f, (int, float)) and not isinstance(f, bool) and f > 0 for f in factors),
        "pbt.perturb.factors", factors, "a list of factors > 0, e.g. [0.8, 1.25]")
    resample = _number(perturb, "pbt.perturb", "resample_prob")
    _require(0 <= resample <= 1, "pbt.perturb.resample_prob", resample, "a probability in [0, 1]")
    return PBTConfig(population, interval, fraction, fitness, _flag(s, "pbt", "exploit"),
                     {k: _explored(k, v) for k, v in hypers.items()}, tuple(float(f) for f in factors), resample)


def _health(s: Mapping) -> HealthConfig:
    return HealthConfig(**{k: _number(s, "health", k) for k in ("entropy_min", "kl_min", "kl_max", "clip_frac_max")})


def _known(s: Mapping, section: str, keys) -> None:
    unknown = sorted(set(s) - set(keys))
    if unknown:
        raise ConfigError(f"{section}.{unknown[0]}", s[unknown[0]], f"one of the known keys {sorted(keys)}")


def _validate_processes(s: Mapping) -> None:
    addr, n, pid = (s.get(k) for k in ("coordinator_address", "num_processes", "process_id"))
    wait = s.get("init_timeout_s", 60)
    _require(addr is None or (isinstance(addr, str) and ":" in addr), "hardware.coordinator_address", addr, "null or host:port")
    _require(n is None or (isinstance(n, int) and not isinstance(n, bool) and n >= 1), "hardware.num_processes", n,
             "null or an integer >= 1")
    _require(pid is None or (isinstance(pid, int) and not isinstance(pid, bool) and pid >= 0 and (n is None or pid < n)),
             "hardware.process_id", pid, f"null or an integer in [0, {n})" if n else "null or an integer >= 0")
    given = [k for k, v in (("coordinator_address", addr), ("num_processes", n), ("process_id", pid)) if v is not None]
    _require(not given or len(given) == 3 or n == 1, "hardware." + given[0] if given else "hardware", None,
             "coordinator_address, num_processes and process_id set together (or all null: detected)")
    _require(isinstance(wait, (int, float)) and not isinstance(wait, bool) and wait > 0, "hardware.init_timeout_s", wait,
             "a number of seconds > 0")
    split = s.get("split_host_cpus", True)
    _require(isinstance(split, bool), "hardware.split_host_cpus", split, "true or false")


def validate_hardware(s: Mapping) -> HardwareConfig:
    """Check the `hardware` section alone: launchers apply it before XLA's backend starts."""
    if isinstance(s, HardwareConfig):
        return s
    _known(s, "hardware", [f.name for f in dataclasses.fields(HardwareConfig)])
    for key in [f.name for f in dataclasses.fields(HardwareConfig) if f.name not in PROCESS_KEYS]:
        _require(key in s, f"hardware.{key}", None, "a value (the key is missing)")
    platform = s["platform"]
    _require(platform in PLATFORMS, "hardware.platform", platform, f"one of {list(PLATFORMS)}")
    hd = s["host_devices"]
    _require(hd == "auto" or (isinstance(hd, int) and hd >= 1), "hardware.host_devices", hd, "'auto' or an integer >= 1")
    mf = s["mem_fraction"]
    _require(mf is None or (isinstance(mf, (int, float)) and 0 < mf <= 1), "hardware.mem_fraction", mf, "null or a fraction in (0, 1]")
    layout = s["layout"]
    _require(layout in LAYOUTS, "hardware.layout", layout, f"one of {list(LAYOUTS)}")
    conv = s["conv"]
    _require(conv in CONVS, "hardware.conv", conv, f"one of {list(CONVS)}")
    precision = s["precision"]
    _require(precision in PRECISIONS, "hardware.precision", precision, f"one of {list(PRECISIONS)}")
    cap = s["memory_limit_gb"]
    _require(cap is None or (isinstance(cap, (int, float)) and not isinstance(cap, bool) and cap > 0),
             "hardware.memory_limit_gb", cap, "null or a number of GB > 0")
    for key in ("allow_fallback", "preallocate", "deterministic"):
        _flag(s, "hardware", key)
    envs = s["num_envs"]
    _require(envs is None or (isinstance(envs, int) and envs >= 1), "hardware.num_envs", envs, "null or an integer >= 1")
    cache = s["compilation_cache_dir"]
    _require(cache is None or isinstance(cache, str), "hardware.compilation_cache_dir", cache, "null or a folder")
    _validate_processes(s)
    return HardwareConfig(**{f.name: s[f.name] for f in dataclasses.fields(HardwareConfig) if f.name in s})


# `scores`: the task -> {random, reference} returns that normalise scores across tasks in
# `ppo-lab aggregate` (rliable.json); `metrics`: what the env's runs are judged by (`headline`,
# `beside`) and the bounds of its metrics (`bounds`). Read by the analysis, never by the env or
# the trainer.
ENV_WIRING_KEYS = ("_target_", "check", "evaluations", "scores", "metrics")
ENV_METRICS_KEYS = ("headline", "beside", "bounds")


def _env(s: Mapping, reward: RewardSection) -> tuple[EnvSection, str | None]:
    """The `env` section: its wiring checked here, its own keys by the check it names; and the
    reward mode's name that check gives, if any (`default` is the env's own: its real name)."""
    name = s.get("name")
    _require(isinstance(name, str) and name, "env.name", name, f"an environment name, one of {env_options()}")
    target = s.get("_target_")
    _require(isinstance(target, str) and "." in target, "env._target_", target,
             "the dotted path of the env's builder, e.g. ppo_lab.envs.foraging.world.build")
    check = s.get("check")
    _require(check is None or isinstance(check, str), "env.check", check, "null or the dotted path of a jax-free check")
    evaluations = dict(s.get("evaluations") or {})
    _require(all(isinstance(v, str) for v in evaluations.values()), "env.evaluations", evaluations,
             "a mapping of name -> dotted path of an evaluation function")
    options = {k: v for k, v in s.items() if k not in ENV_WIRING_KEYS}
    _require(name in env_options(), "env.name", name, f"one of {env_options()}")
    mode = parts.call("env.check", check, options, dict(reward.options)) if check is not None else None
    scores = s.get("scores") or {}
    _require(isinstance(scores, Mapping) and all(isinstance(v, Mapping) and {"random", "reference"} <= set(v) for v in scores.values()),
             "env.scores", scores, "a mapping of task id -> {random: RETURN, reference: RETURN}")
    metrics = dict(s.get("metrics") or {})
    _require(set(metrics) <= set(ENV_METRICS_KEYS), "env.metrics", metrics, f"a mapping with keys among {ENV_METRICS_KEYS}")
    _require(all(isinstance(v, (list, tuple)) and len(v) == 2 for v in (metrics.get("bounds") or {}).values()),
             "env.metrics.bounds", metrics.get("bounds"), "a mapping of metric -> [LOW, HIGH] (null for an open end)")
    env = EnvSection(name=name, target=target, check=check, evaluations=evaluations, options=options, scores=dict(scores),
                     metrics=metrics)
    return env, mode


def env_options() -> list[str]:
    """The env group's options: the files of `conf/env/` next to this package."""
    return sorted(p.stem for p in CONF_DIR.joinpath("env").glob("*.yaml"))


def _logger(s: Mapping | None) -> dict[str, LoggerSpec]:
    specs = {}
    for name, options in dict(s or {}).items():
        options = dict(options or {})
        _require("_target_" in options, f"logger.{name}._target_", None,
                 f"the dotted path of the logger's factory (conf/logger/{name}.yaml writes it)")
        target = options.pop("_target_")
        _require(target is None or (isinstance(target, str) and "." in target), f"logger.{name}._target_", target,
                 "null or the dotted path of a logger factory")
        specs[name] = LoggerSpec(name=name, target=target, options=options)
    return specs


def validate(cfg: Mapping[str, Any], *, saved: bool = False) -> RunConfig:
    """Check a resolved config (plain nested dicts) and freeze it into a RunConfig. `saved`: a
    run directory's config.yaml, a record: a key a later lab no longer has must not make it unreadable."""
    if not saved:
        check_sections(cfg)  # an unknown key (a typo, `+ppo.lrr=...`) first: it would otherwise be ignored
    seed = _number(cfg, "", "seed", int) if "seed" in cfg else 0
    num_seeds = _number(cfg, "", "num_seeds", int)
    _require(num_seeds >= 1, "num_seeds", num_seeds, "an integer >= 1")
    _require(seed >= 0, "seed", seed, "an integer >= 0")
    reward_section = dict(cfg.get("reward") or {"name": "default"})
    _require(isinstance(reward_section.get("name"), str), "reward.name", reward_section.get("name"), "a reward mode name")
    reward = RewardSection(name=reward_section["name"], options=reward_section)
    env, mode = _env(cfg["env"], reward)
    if isinstance(mode, str):  # the log, summary.json and replays name the mode, never `default`
        reward = dataclasses.replace(reward, name=mode)
    every = _number(cfg["checkpoint"], "checkpoint", "every_min")
    _require(every > 0, "checkpoint.every_min", every, "minutes > 0")
    if_all_damaged = cfg["checkpoint"].get("if_all_damaged", "error")  # read by run/resume.py
    _require(if_all_damaged in ("error", "start_over"), "checkpoint.if_all_damaged", if_all_damaged, "error or start_over")
    benchmark = cfg.get("benchmark", False)
    _require(isinstance(benchmark, bool), "benchmark", benchmark, "true or false")
    resume = cfg.get("resume")
    _require(resume is None or isinstance(resume, str), "resume", resume, "null or a run directory")
    logger = _logger(cfg.get("logger"))
    known = {f.name for f in dataclasses.fields(RunConfig)} | {"checkpoint"}
    known.discard("resolved")
    tags = cfg.get("tags") or {}
    _require(isinstance(tags, Mapping), "tags", tags, "a mapping of your own keys (+tags.NAME=VALUE)")
    pbt = _pbt(cfg.get("pbt"), num_seeds)
    return RunConfig(
        seed=seed,
        # A population's members are its seeds seed..seed+population-1 (one replica each).
        num_seeds=pbt.population if pbt else num_seeds,
        experiment=str(cfg.get("experiment")),
        resume=resume,
        benchmark=benchmark,
        env=env,
        reward=reward,
        ppo=_ppo(cfg["ppo"]),
        network=validate_network(cfg["network"]),
        train=_train(cfg["train"]),
        eval=_eval(cfg["eval"]),
        health=_health(cfg["health"]),
        checkpoint_every_min=every,
        hardware=validate_hardware(cfg["hardware"]),
        logger=logger,
        pbt=pbt,
        extra={k: v for k, v in cfg.items() if k not in known},
        tags=dict(tags),
        resolved=dict(cfg),
    )

