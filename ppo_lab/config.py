"""The run configuration on Hydra's structured configs: one dataclass per section.

`LabConfig`, the composed config's shape, is conf/config.yaml's first default in Hydra's
ConfigStore (`register`), so Hydra composes every YAML into typed, closed nodes. A key's default
and its one-line meaning (the comment ending its line, shown by `--help`) live in its YAML; here
its type (no default: a missing key is an error naming it), check and marks (`key`). `validate`
reads a config (composed, or a run dir's config.yaml) through the same dataclasses into a
`RunConfig`, before XLA starts or anything is written; the env's own keys by its jax-free check.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Union

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, MissingMandatoryValue, OmegaConfBaseException

from ppo_lab import parts
from ppo_lab.config_keys import UnknownKeyError, group_options, suggest
from ppo_lab.errors import ConfigError

# How a key may change when a run directory is relaunched (or resumed from): see run/resume.py.
FREE = "free"  # freely: it changes nothing trained (a stopping budget, where logs go)
ALLOWED = "allowed"  # only with allow_config_change=true, recorded in config_history.jsonl
FIXED = "fixed"  # never: the checkpoint's shapes or meaning depend on it


def key(check: Callable[[Any, Mapping], bool] | None = None, valid: str | None = None, *,
        choices: tuple | None = None, entries: type | None = None, traced: bool = False, resume: str | None = None,
        help: bool = False, default: Any = MISSING, default_factory: Callable | None = None):
    """A config key's field, without a default unless given, and its marks:
      check, valid  `check(value, the section's values)`, else a ConfigError saying `valid` (text
                    formatted with the section's values); `valid` alone: what a value should be
      choices       its valid values; entries: each value of the mapping is this dataclass (an
                    Any-typed mapping: OmegaConf takes no plain mapping into a dataclass's node)
      traced        a hyperparameter that changes no shape: an argument of the compiled chunk,
                    one value per replica (ppo/hypers.py `Hypers`), never a trainer's constant
      resume        FREE, ALLOWED or FIXED (unmarked: its section's mark, else ALLOWED)
      help          listed by `python launch.py --help`, in the order of the fields"""
    marks = dict(check=check, valid=valid, choices=choices, entries=entries, traced=traced, resume=resume, help=help)
    metadata = {k: v for k, v in marks.items() if v is not None and v is not False}
    if default_factory is not None:
        return field(default_factory=default_factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def traced(check=None, valid=None, **marks):
    """A traced key's field (a field of PPOConfig and a line of conf/ppo/default.yaml: `hypers.<name>`)."""
    return key(check, valid, traced=True, **marks)


def _sizes(v, s) -> bool:
    return len(v) > 0 and all(h > 0 for h in v)


LAYOUTS = ("auto", "seeds", "envs", "single")  # ppo.parallel.choose_layout
PRECISIONS = ("fp32", "bf16")  # networks: compute dtype; parameters stay in the first
CONVS = ("auto", "im2col", "native", "xla")  # networks.conv_for_platform
PLATFORMS = ("cpu", "gpu", "tpu")
ACTIVATIONS = ("tanh", "relu", "gelu", "elu")
RECURRENT_CELLS = (None, "gru", "lstm")  # network.recurrent; networks.CELLS
SQUASHES = (None, "tanh")  # ppo_lab.ppo.gaussian
ROLLOUT_OBS_DTYPES = ("float32", "uint8", "bfloat16")  # ppo.obs_storage
FITNESS_MODES = ("max", "min")  # pbt.fitness_mode: which direction of the fitness ranks better


class PPOSizes:
    """The batch sizes a `ppo` section implies (PPOConfig's and its static part's, ppo/hypers.py)."""
    batch_size = property(lambda self: self.num_envs * self.num_steps)
    num_updates = property(lambda self: self.total_timesteps // self.batch_size)


@dataclass
class PPOConfig(PPOSizes):
    """`conf/ppo/default.yaml`. Its traced keys keep their order: `Hypers`' fields."""
    total_timesteps: int = key(lambda v, s: v > 0, "a positive number of steps", help=True)
    lr: float = traced(lambda v, s: v > 0, "a learning rate > 0", help=True)
    lr_final: float = traced(lambda v, s: 0 <= v <= s["lr"], "0 <= lr_final <= lr ({lr})")
    anneal_lr: bool = key()
    num_envs: int = key(lambda v, s: v >= 1, "an integer >= 1", resume=FIXED, help=True)
    num_steps: int = key(lambda v, s: v >= 1, "an integer >= 1", resume=FIXED, help=True)
    num_minibatches: int = key(lambda v, s: v >= 1, "an integer >= 1", help=True)
    update_epochs: int = key(lambda v, s: v >= 1, "an integer >= 1", help=True)
    gamma: float = traced(lambda v, s: 0 < v <= 1, "a discount in (0, 1]", help=True)
    gae_lambda: float = traced(lambda v, s: 0 <= v <= 1, "a value in [0, 1]", help=True)
    clip_eps: float = traced(lambda v, s: v > 0, "a clip range > 0", help=True)
    clip_eps_final: float = traced(lambda v, s: v > 0, "a clip range > 0")
    clip_vloss: bool = key()
    vf_coef: float = traced(lambda v, s: v >= 0, "a coefficient >= 0")
    ent_coef_initial: float = traced(lambda v, s: v >= 0, "a coefficient >= 0", help=True)
    ent_coef_final: float = traced(lambda v, s: v >= 0, "a coefficient >= 0")
    # Traced, and null or not is the program's choice: an entropy floor is in the loss or not.
    entropy_floor: Optional[float] = traced(lambda v, s: v >= 0, "null or an entropy >= 0")
    entropy_floor_coef: float = traced(lambda v, s: v >= 0, "a coefficient >= 0")
    max_grad_norm: float = traced(lambda v, s: v > 0, "a norm > 0", help=True)
    normalize_advantages: bool = key()
    bootstrap_truncation: bool = key()
    auto_scale: bool = key()
    auto_scale_epoch_floor: int = key(lambda v, s: v >= 1, "an integer >= 1")
    auto_scale_reference_batch: int = key(lambda v, s: v >= 1, "a batch size (envs x steps) >= 1")
    value_norm: Optional[str] = key(choices=(None, "popart"))
    popart_beta_min: float = key(lambda v, s: 0 < v <= 1, "a step size in (0, 1]")
    separate_grad_clip: bool = key()
    rollout_obs_dtype: str = key(choices=ROLLOUT_OBS_DTYPES)
    adam_eps: float = key(lambda v, s: v > 0, "an epsilon > 0")
    value_loss: str = key(choices=("mean_of_max", "max_of_means"))  # ppo.losses
    privileged_view_after_step: bool = key()
    normalize_obs: bool = key()  # ppo/normalize.py
    normalize_reward: bool = key()

    def rules(self, at: str) -> None:
        if self.batch_size % self.num_minibatches:
            raise ConfigError(f"{at}.num_minibatches", self.num_minibatches, f"a divisor of the batch num_envs*num_steps "
                              f"= {self.num_envs}*{self.num_steps} = {self.batch_size}")
        if self.total_timesteps < self.batch_size:
            raise ConfigError(f"{at}.total_timesteps", self.total_timesteps,
                              f"at least one batch (num_envs*num_steps = {self.batch_size})")


# The lab's torsos' own keys: a torso takes those among its dataclass fields (a scale file sizes
# an MLP and a CNN alike, whichever `network=` is chosen), the others are null.
TORSO_KEYS = ("hidden_sizes", "conv_channels", "stack_channels", "dense_size")


@dataclass(unsafe_hash=True)  # hashable: a flax module's attribute
class NetworkConfig:
    """`conf/network/*.yaml`: the torso is the flax module at `_target_`, built with its own keys
    (`torso_kwargs`) and `activation`; a recurrent cell and hidden head layers may follow."""
    _target_: str = key(lambda v, s: "." in v, "the dotted path of a flax torso module, e.g. ppo_lab.networks.MLPTorso")
    kind: str = key(lambda v, s: bool(v), "a name for the network (mlp, cnn, ...)")
    hidden_sizes: Optional[List[int]] = key(_sizes, "a list of positive integers", help=True, default=None)
    conv_channels: Optional[List[int]] = key(_sizes, "a list of positive integers", default=None)
    stack_channels: Optional[List[int]] = key(_sizes, "a list of positive integers", default=None)
    dense_size: Optional[int] = key(lambda v, s: v > 0, "a positive integer", default=None)
    activation: str = key(choices=ACTIVATIONS)
    privileged_critic: bool = key()
    shared_torso: bool = key()
    squash: Optional[str] = key(choices=SQUASHES)  # continuous actions: null (clip to the bounds) or tanh
    recurrent: Optional[str] = key(choices=RECURRENT_CELLS, help=True)
    recurrent_size: int = key(lambda v, s: v > 0, "a positive integer")
    head_hidden: int = key(lambda v, s: v >= 0, "0 (linear heads) or a positive integer")
    head_hidden_gain: float = key(lambda v, s: v > 0, "a positive number")

    def __post_init__(self):  # lists as tuples: hashable, and equal however they were read
        for name in TORSO_KEYS:
            if isinstance(getattr(self, name), list):
                setattr(self, name, tuple(getattr(self, name)))

    def rules(self, at: str) -> None:
        if self.recurrent and self.privileged_critic and self.shared_torso:
            raise ConfigError(f"{at}.recurrent", self.recurrent, "null with a privileged critic on the actor's torso "
                              "(network.shared_torso=true), or network.shared_torso=false")

    target = property(lambda self: self._target_)
    is_recurrent = property(lambda self: self.recurrent is not None)

    def torso_kwargs(self) -> dict:
        return {name: getattr(self, name) for name in TORSO_KEYS if getattr(self, name) is not None}


@dataclass
class TrainConfig:
    """`conf/train/default.yaml`: the host loop's budget and chunks, free to change on a relaunch."""
    duration_min: Optional[float] = key(lambda v, s: v > 0, "null or minutes > 0", resume=FREE, help=True)
    target_return: Optional[float] = key(resume=FREE, help=True)
    patience: int = key(lambda v, s: v >= 0, "an integer >= 0", resume=FREE)
    return_window: int = key(lambda v, s: v >= 1, "an integer >= 1", resume=FREE)
    chunk_updates: int = key(lambda v, s: v >= 1, "an integer >= 1", resume=FREE)


@dataclass
class EvalConfig:
    episodes: int = key(lambda v, s: v >= 1, "an integer >= 1", help=True)
    deterministic: bool = key()
    max_steps: Optional[int] = key(lambda v, s: v >= 1, "null or an integer >= 1")
    survival_envs: int = key(lambda v, s: v >= 1, "an integer >= 1")
    survival_steps: int = key(lambda v, s: v >= 1, "an integer >= 1")
    # Along training (run/along.py); fixed in a run: the checkpoint keeps the policies it measures from
    every_updates: Optional[int] = key(lambda v, s: v >= 0, "null or 0 (off), or an integer >= 1", resume=FIXED)
    along_episodes: int = key(lambda v, s: v >= 1, "an integer >= 1")
    along_survival_envs: int = key(lambda v, s: v >= 1, "an integer >= 1")
    along_survival_steps: int = key(lambda v, s: v >= 1, "an integer >= 1")
    kl_states: int = key(lambda v, s: v >= 1, "an integer >= 1")

    along = property(lambda self: bool(self.every_updates))  # evaluation along training is on


@dataclass
class HealthConfig:
    entropy_min: float = key()
    kl_min: float = key()
    kl_max: float = key()
    clip_frac_max: float = key()


@dataclass
class CheckpointConfig:
    every_min: float = key(lambda v, s: v > 0, "minutes > 0", help=True)
    if_all_damaged: str = key(lambda v, s: v in ("error", "start_over"), "error or start_over")  # run/resume.py


@dataclass
class HardwareConfig:
    """`conf/hardware/*.yaml`: what `ppo_lab.hardware.start_jax` applies. Where compiled code is
    cached, how device memory is taken and laid out, how many processes run: nothing trained."""
    platform: str = key(choices=PLATFORMS)
    allow_fallback: bool = key(resume=FREE)
    # int or "auto" (OmegaConf's unions fail in Hydra's composition): its check says which
    host_devices: Any = key(lambda v, s: v == "auto" or (type(v) is int and v >= 1), "'auto' or an integer >= 1", help=True)
    num_envs: Optional[int] = key(lambda v, s: v >= 1, "null or an integer >= 1")  # a scale's env count for it
    preallocate: bool = key(resume=FREE)
    mem_fraction: Optional[float] = key(lambda v, s: 0 < v <= 1, "null or a fraction in (0, 1]", resume=FREE)
    compilation_cache_dir: Optional[str] = key(valid="null or a folder", resume=FREE)
    layout: str = key(choices=LAYOUTS, resume=FREE)  # a split of envs is refused by its own check on resume
    precision: str = key(choices=PRECISIONS)
    memory_limit_gb: Optional[float] = key(lambda v, s: v > 0, "null or a number of GB > 0", resume=FREE)
    conv: str = key(choices=CONVS, resume=FREE)
    deterministic: bool = key()
    coordinator_address: Optional[str] = key(lambda v, s: ":" in v, "null or host:port", resume=FREE)
    num_processes: Optional[int] = key(lambda v, s: v >= 1, "null or an integer >= 1", resume=FREE)
    process_id: Optional[int] = key(lambda v, s: 0 <= v and (s["num_processes"] is None or v < s["num_processes"]),
                                    "null or an integer in [0, num_processes={num_processes})", resume=FREE)
    init_timeout_s: float = key(lambda v, s: v > 0, "a number of seconds > 0", resume=FREE)
    split_host_cpus: bool = key()

    def rules(self, at: str) -> None:
        """The processes of one run are named together, or not at all (detected)."""
        given = [k for k in ("coordinator_address", "num_processes", "process_id") if getattr(self, k) is not None]
        if given and len(given) < 3 and self.num_processes != 1:
            raise ConfigError(f"{at}.{given[0]}", getattr(self, given[0]),
                              "coordinator_address, num_processes and process_id set together (or all null: detected)")


@dataclass
class Bound:
    """What one constrained metric (`pbt.constraints.<metric>`) must stay within, inclusive."""
    VALID = "{min: NUMBER} and/or {max: NUMBER}"  # what an entry of the mapping must be
    min: Optional[float] = None
    max: Optional[float] = None

    def rules(self, at: str) -> None:
        if self.min is None and self.max is None:
            raise ConfigError(at, {"min": None, "max": None}, f"{self.VALID} (not both null)")
        if self.max is not None and self.min is not None and self.min > self.max:
            raise ConfigError(f"{at}.min", self.min, f"a value <= max ({self.max})")


@dataclass
class ExploredKey:
    """One hyperparameter a population explores (`pbt.hypers.<key>`): its range and scale."""
    VALID = "{low: NUMBER, high: NUMBER, log: BOOL}"
    low: float
    high: float
    log: bool

    def rules(self, at: str) -> None:
        if self.low >= self.high:
            raise ConfigError(f"{at}.low", self.low, f"a value below high ({self.high})")
        if self.log and self.low <= 0:
            raise ConfigError(f"{at}.low", self.low, "a value > 0 with log: true (a log-uniform range)")


@dataclass
class Perturb:
    factors: List[float] = key(lambda v, s: len(v) > 0 and all(f > 0 for f in v), "a list of factors > 0, e.g. [0.8, 1.25]")
    resample_prob: float = key(lambda v, s: 0 <= v <= 1, "a probability in [0, 1]")


@dataclass
class PBTConfig:
    """`conf/pbt/default.yaml`: population-based training (ppo_lab/run/population.py, docs/pbt.md)."""
    population: int = key(lambda v, s: v == 0 or v >= 2, "0 (off) or an integer >= 2", resume=FIXED)
    interval_updates: int = key(lambda v, s: v >= 1, "an integer >= 1")
    fraction: float = key(lambda v, s: 0 < v <= 0.5, "a fraction in (0, 0.5]")
    fitness: str = key(lambda v, s: "/" in v, "a logged metric, e.g. train/mean_episode_return")
    fitness_mode: str = key(choices=FITNESS_MODES)
    # metric -> its bound; null: none ({} once read). Any: OmegaConf 2.3 merges no override into a null Optional[Dict]
    constraints: Any = key(lambda v, s: isinstance(v, dict), "null or a mapping of logged metric -> {min: X} and/or "
                           "{max: Y}", entries=Bound)
    exploit: bool = key()
    hypers: Dict[str, Any] = key(entries=ExploredKey)  # traced key (`ppo.` optional) -> its range
    perturb: Perturb = key()

    def rules(self, at: str) -> None:
        for metric in self.constraints or {}:
            if "/" not in metric:
                raise ConfigError(f"{at}.constraints", metric, "logged metrics as keys, e.g. {train/entropy: {min: 1.0}}")
        if not self.hypers:
            raise ConfigError(f"{at}.hypers", self.hypers, "at least one explored key: {KEY: {low, high, log}}")
        explorable = [k for k in traced_keys() if k not in nullable_traced_keys()]
        for name in self.hypers:
            if name.removeprefix("ppo.") not in explorable:
                raise ConfigError(f"{at}.hypers.{name}", self.hypers[name], f"an explorable key, one of {explorable} "
                                  f"(traced: they change no shape, so one compiled program trains every member)")

    on = property(lambda self: self.population > 0)


@dataclass
class OptimizeConfig:
    """`optimize` (hydra/sweeper=optuna sets it): a job's summary.json metric a sweep optimises."""
    metric: str = key(lambda v, s: bool(v), "a metric of summary.json, e.g. eval/episode_return or "
                      "final/train/mean_episode_return")
    direction: str = key(choices=("maximize", "minimize"))
    reduce: str = key(choices=("mean", "iqm"))


# The lab's loggers' keys (what each means: conf/logger/<name>.yaml, which names its schema);
# a logger of the user's has any keys and its factory at `_target_`.
@dataclass
class CsvLogger:
    _target_: Optional[str] = key(valid="null: metrics.csv and summary.json are written by every run")


@dataclass
class MLflowLogger:
    _target_: str
    dir: str
    tracking_uri: Optional[str]
    connect_timeout_s: float
    on_unreachable: str
    experiment_name: Optional[str]
    tags: Any  # a mapping or null (Any: see PBTConfig.constraints)
    artifacts: bool
    register: bool
    model_name: Optional[str]
    register_if: Dict[str, Any]


@dataclass
class TensorBoardLogger:
    _target_: str
    subdir: str


@dataclass
class WandbLogger:
    _target_: str
    project: str
    mode: str
    entity: Optional[str]
    group: Optional[str]
    tags: Optional[Any]
    connect_timeout_s: float
    on_unreachable: str


LOGGERS = {"csv": CsvLogger, "mlflow": MLflowLogger, "tensorboard": TensorBoardLogger, "wandb": WandbLogger}


@dataclass
class LoggerSpec:
    """One entry of `logger`: its factory (`target`; null for csv) and the options it reads."""
    name: str
    target: str | None
    options: Mapping[str, Any]


ENV_METRICS_KEYS = ("headline", "beside", "bounds", "criteria")


class _KeysByName:
    """A section whose own keys (`options`) read like a mapping: `section["key"]`, `.get`."""

    def get(self, name: str, default=None):
        return self.options.get(name, default)

    def __getitem__(self, name: str):
        return self.options[name]


@dataclass
class EnvSection(_KeysByName):
    """`conf/env/*.yaml`: its wiring (how its parts are found; what its runs are judged by, the
    analysis's), read here; its own keys (`options`, name included), by the check it names."""
    name: str
    _target_: str = key(lambda v, s: "." in v, "the dotted path of the env's builder, e.g. ppo_lab.envs.foraging.world.build")
    check: Optional[str] = key(valid="null or the dotted path of a jax-free check", default=None)
    evaluations: Dict[str, str] = key(default_factory=dict)  # name -> dotted path of its `evaluate(...)`
    scores: Dict[str, Dict[str, Any]] = key(lambda v, s: all({"random", "reference"} <= set(r) for r in v.values()),
                                            "a mapping of task id -> {random: RETURN, reference: RETURN}", resume=FREE,
                                            default_factory=dict)  # the returns that normalise scores across tasks
    metrics: Dict[str, Any] = key(
        lambda v, s: set(v) <= set(ENV_METRICS_KEYS) and all(len(b) == 2 for b in (v.get("bounds") or {}).values()),
        f"a mapping with keys among {ENV_METRICS_KEYS}, bounds: metric -> [LOW, HIGH] (null for an open end)",
        resume=FREE, default_factory=dict)
    options: Dict[str, Any] = field(default_factory=dict)
    target = property(lambda self: self._target_)


ENV_WIRING_KEYS = ("_target_", "check", "evaluations", "scores", "metrics")


@dataclass
class RewardSection(_KeysByName):
    """`conf/reward/*.yaml`: a mode by `name`, its keys as the env reads them (`env`: whose mode)."""
    name: str
    options: Mapping[str, Any]


@dataclass
class LabConfig:
    """The composed config. `env`, `reward` and `logger` hold their parts' own keys (read into a
    RunConfig's parts); `tags`, `sweep` and `local` the user's (read by nothing but interpolations)."""
    seed: int = key(lambda v, s: v >= 0, "an integer >= 0", resume=FIXED, help=True)
    num_seeds: int = key(lambda v, s: v >= 1, "an integer >= 1", resume=FIXED, help=True)
    experiment: str = key(lambda v, s: bool(v), "a name")
    resume: Optional[str] = key(valid="null or a run directory", resume=FREE)
    allow_config_change: bool = key(resume=FREE)
    benchmark: bool = key()
    tags: Dict[str, Any] = key(valid="a mapping of your own keys (+tags.NAME=VALUE)", resume=FREE)
    sweep: Dict[str, Any] = key(valid="a mapping of a named sweep's own keys", resume=FREE, default_factory=dict)
    local: Dict[str, Any] = key(valid="a mapping of this machine's own keys (conf/local/)", resume=FREE, default_factory=dict)
    env: Dict[str, Any] = key(resume=FIXED)
    reward: Dict[str, Any] = key(resume=FIXED)
    ppo: PPOConfig = key()
    network: NetworkConfig = key(resume=FIXED)
    train: TrainConfig = key()
    eval: EvalConfig = key(resume=FREE)
    health: HealthConfig = key(resume=FREE)
    checkpoint: CheckpointConfig = key(resume=FREE)
    hardware: HardwareConfig = key()
    logger: Dict[str, Any] = key(resume=FREE)
    pbt: PBTConfig = key()
    # Only a tuning sweep's (null otherwise): a default here would undo hydra/sweeper=optuna's (merged first).
    optimize: Optional[OptimizeConfig] = key(resume=FREE)

    def rules(self, at: str) -> None:
        if self.pbt.on and self.num_seeds != 1:
            n = self.pbt.population
            raise ConfigError("num_seeds", self.num_seeds, f"1 with pbt.population={n} (member m trains seed seed+m; "
                              f"several populations: -m seed=0,{n},{2 * n},...)")


@dataclass
class RunConfig(LabConfig):
    """A validated LabConfig, its parts read; `pbt` None when no population trains (else
    `num_seeds` is its size); `resolved`: the config as plain dicts, what config.yaml keeps."""
    env: EnvSection = key(resume=FIXED)
    reward: RewardSection = key(resume=FIXED)
    logger: Mapping[str, LoggerSpec] = key(resume=FREE)
    pbt: Optional[PBTConfig] = None
    resolved: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    seeds = property(lambda self: list(range(self.seed, self.seed + self.num_seeds)))


def register() -> None:
    """The schemas in Hydra's ConfigStore: `lab` (conf/config.yaml's first default), `schema/logger/<name>`."""
    store = ConfigStore.instance()
    store.store(name="lab", node=LabConfig)
    for name, schema in LOGGERS.items():
        store.store(group="schema/logger", name=name, node=schema)


register()


# --- the marks, read --------------------------------------------------------------------------

def traced_keys(ppo_class: type | None = None) -> tuple[str, ...]:
    """The PPO keys marked traced, in the order of their fields (of `PPOConfig`, or `ppo_class`)."""
    return tuple(f.name for f in dataclasses.fields(ppo_class or PPOConfig) if f.metadata.get("traced"))


def nullable_traced_keys() -> tuple[str, ...]:
    """Traced keys that may be null (whether they are is the program's: an entropy floor in the loss
    or not); a population never explores them."""
    hints = typing.get_type_hints(PPOConfig)
    return tuple(k for k in traced_keys() if type(None) in typing.get_args(hints[k]))


def _unwrap(hint):
    """The type inside Optional[...], and whether it was optional."""
    if typing.get_origin(hint) in (Union, types.UnionType) and type(None) in typing.get_args(hint):
        return next(t for t in typing.get_args(hint) if t is not type(None)), True
    return hint, False


def field_at(dotted: str, root: type = RunConfig) -> tuple[dataclasses.Field | None, Any, list]:
    """The field declaring a dotted key (None for a key of a mapping: then its value type), its
    type (None: no such key), and the fields met on the way (its section's first)."""
    hint, found, path = root, None, []
    for name in dotted.split(".") if dotted else []:
        hint, _ = _unwrap(hint)
        if dataclasses.is_dataclass(hint):
            found = next((f for f in dataclasses.fields(hint) if f.name == name), None)
            if found is None:
                return None, None, path
            hint = typing.get_type_hints(hint, globalns=globals())[name]
            path.append(found)
        elif typing.get_origin(hint) in (dict, collections.abc.Mapping):
            found, hint = None, typing.get_args(hint)[1]
        else:
            return None, None, path
    return found, hint, path


def declared_keys() -> dict[str, dataclasses.Field]:
    """Every key a dataclass declares, to `section.key` (`logger.<name>.key` of the lab's
    loggers), with its field, in the order of the fields."""
    out = {}
    for top in dataclasses.fields(LabConfig):
        out[top.name] = top
        section = _unwrap(field_at(top.name, LabConfig)[1])[0]
        if dataclasses.is_dataclass(section):
            out |= {f"{top.name}.{f.name}": f for f in dataclasses.fields(section)}
    for name, schema in LOGGERS.items():
        out |= {f"logger.{name}.{f.name}": f for f in dataclasses.fields(schema)}
    return out


# --- reading and checking ------------------------------------------------------------------------

def _says(valid: str, values: Mapping) -> str:
    try:
        return valid.format_map(values)
    except (KeyError, TypeError):  # a value of a wrong type met before the section's others
        return valid


def _wrong_type(f: dataclasses.Field | None, hint, value, values: Mapping) -> str:
    """What a value of field `f` (of type `hint`) should be, as the field says it."""
    kind, nullable = _unwrap(hint)
    marks, null = (f.metadata if f is not None else {}), "null or " if nullable else ""
    valid = _says(marks["valid"], values) if "valid" in marks else None
    if "choices" in marks:
        return f"one of {list(marks['choices'])}"
    if dataclasses.is_dataclass(kind):
        return getattr(kind, "VALID", "a mapping of its keys")
    if kind is bool:
        return "true or false"
    if kind in (int, float):
        if kind is int and isinstance(value, float) and value.is_integer():  # `1e6`: Hydra's grammar reads a float
            return f"an integer: write {int(value)} (a number with an exponent or a point is a float to Hydra)"
        if kind is int and isinstance(value, float):
            return valid or "an integer"
        return f"a number ({kind.__name__}): {valid}" if valid else f"{null}a number ({kind.__name__})"
    if typing.get_origin(kind) in (list, dict):
        return valid or ("a mapping" if typing.get_origin(kind) is dict else f"a list of {typing.get_args(kind)[0].__name__}")
    return valid or f"{null}text"


def config_error(exc: OmegaConfBaseException, at: str = "", root: type = LabConfig) -> ConfigError:
    """An OmegaConf error met reading a config into dataclass `root` (the section at `at`), as
    the lab says it: a missing key, an unknown one (naming the closest), a value of a wrong type."""
    relative = str(exc.full_key or exc.key or "")
    dotted = ".".join(p for p in (at, relative) if p)
    if isinstance(exc, MissingMandatoryValue):
        return ConfigError(dotted, None, "a value (the key is missing)")
    f, hint, _ = field_at(relative, root)
    if isinstance(exc, (ConfigAttributeError, ConfigKeyError)) and hint is None:
        owner = _unwrap(field_at(relative.rpartition(".")[0], root)[1])[0]
        if hasattr(owner, "VALID"):  # an entry of a mapping (a Bound, an ExploredKey)
            return ConfigError(dotted, exc.value, f"one of the known keys {sorted(x.name for x in dataclasses.fields(owner))}")
        return UnknownKeyError(dotted, suggest(dotted, declared_keys()))
    return ConfigError(dotted, exc.value, _wrong_type(f, hint, exc.value, exc.parent_node or {}))


def typed(cls: type, values: Mapping, at: str = ""):
    """`values` merged into dataclass `cls`'s schema (types, closed keys); a ConfigError otherwise."""
    try:
        return OmegaConf.merge(OmegaConf.structured(cls), values)
    except OmegaConfBaseException as exc:
        raise config_error(exc, at, cls) from None


def typed_config(values: Mapping) -> Any:
    """A config merged into the schema, each lab logger's entry into its own: its types and keys
    checked (a key Hydra added to a closed node with `+` among them)."""
    config = typed(LabConfig, values)
    for name, entry in (values.get("logger") or {}).items():
        if name in LOGGERS:
            typed(LOGGERS[name], entry, f"logger.{name}")
    return config


def check(obj, at: str = "") -> None:
    """Each field's `check` and `choices`, then the dataclass's `rules(at)`, depth first (a
    section's rules see its keys checked); the dataclasses in a mapping too, at `at.KEY`."""
    values = vars(obj)
    for f in dataclasses.fields(obj):
        value, dotted = getattr(obj, f.name), f"{at}.{f.name}" if at else f.name
        if "entries" in f.metadata and isinstance(value, dict):
            setattr(obj, f.name, value := {k: read(f.metadata["entries"], v, f"{dotted}.{k}") for k, v in value.items()})
        elif dataclasses.is_dataclass(value):
            check(value, dotted)
        if value is None:  # null where the type allows it (OmegaConf refused it elsewhere)
            continue
        if "choices" in f.metadata and value not in f.metadata["choices"]:
            raise ConfigError(dotted, value, f"one of {list(f.metadata['choices'])}")
        if "check" in f.metadata and not f.metadata["check"](value, values):
            raise ConfigError(dotted, list(value) if isinstance(value, tuple) else value, _says(f.metadata["valid"], values))
    if hasattr(obj, "rules"):
        obj.rules(at)


def read(cls: type, values, at: str = ""):
    """`values` read into a checked `cls` (as they are if they are one already)."""
    if not isinstance(values, (cls, Mapping, DictConfig)):
        raise ConfigError(at, values, getattr(cls, "VALID", "a mapping of its keys"))
    if not isinstance(values, cls):
        try:
            values = OmegaConf.to_object(typed(cls, values, at))
        except OmegaConfBaseException as exc:
            raise config_error(exc, at, cls) from None
    check(values, at)
    return values


def _env(raw: Mapping, saved: bool) -> EnvSection:
    """The env section: its wiring read here, its own keys (name included) as they are."""
    name, options = raw.get("name"), group_options("env") or []
    if not isinstance(name, str) or not (saved or name in options):
        raise ConfigError("env.name", name, f"an environment name, one of {options}")
    env = read(EnvSection, {k: v for k, v in raw.items() if k in (*ENV_WIRING_KEYS, "name")}, "env")
    env.options = {k: v for k, v in raw.items() if k not in ENV_WIRING_KEYS}
    if env.metrics.get("criteria") is not None:  # loaded now (it imports no jax): a wrong path fails before training
        parts.load("env.metrics.criteria", env.metrics["criteria"])
    return env


def _reward(raw: Mapping, env: EnvSection) -> RewardSection:
    """The reward mode, checked by the env's check, which may name the env's own (`default`: the
    env's own reward, which the log, summary.json and replays name as the env does)."""
    if not isinstance(raw.get("name"), str):
        raise ConfigError("reward.name", raw.get("name"), "a reward mode name")
    mode = parts.call("env.check", env.check, dict(env.options), dict(raw)) if env.check is not None else None
    if raw.get("env") not in (None, env.name):
        raise ConfigError("reward", raw["name"], f"a reward mode of env={env.name}, or reward=default "
                          f"(reward={raw['name']} is env={raw['env']}'s)")
    return RewardSection(name=mode if isinstance(mode, str) else raw["name"], options=dict(raw))


def _logger(name: str, raw) -> LoggerSpec:
    """A logger entry: a lab logger's keys read by its schema; a user's, with its factory."""
    if name in LOGGERS:
        raw = dataclasses.asdict(read(LOGGERS[name], raw, f"logger.{name}"))
    elif not isinstance(raw, Mapping) or not isinstance(raw.get("_target_"), str) or "." not in raw["_target_"]:
        raise ConfigError(f"logger.{name}._target_", raw.get("_target_") if isinstance(raw, Mapping) else raw,
                          "the dotted path of the logger's factory (its conf/logger/ file writes it)")
    options = {k: v for k, v in raw.items() if k != "_target_"}
    return LoggerSpec(name=name, target=raw["_target_"], options=options)


def validate(cfg: Mapping[str, Any], *, saved: bool = False) -> RunConfig:
    """Check a config (a composed DictConfig, or plain dicts) and read it into a RunConfig.
    `saved`: a run dir's config.yaml, whose env is found by its parts' paths (its option file,
    in a user's config folder, may be on no path of this process)."""
    keys = [k for k in cfg if k != "hydra"]
    values = OmegaConf.to_container(OmegaConf.masked_copy(cfg, keys), resolve=True) if OmegaConf.is_config(cfg) \
        else {k: cfg[k] for k in keys}
    config = typed_config(values)
    if OmegaConf.is_missing(config, "optimize"):
        config.optimize = None
    lab = read(LabConfig, config)
    env, pbt = _env(lab.env, saved), lab.pbt if lab.pbt.on else None
    if pbt is not None:  # explored keys by their names in the PPO section; no constraints: {}
        pbt.hypers = {k.removeprefix("ppo."): v for k, v in pbt.hypers.items()}
        pbt.constraints = dict(pbt.constraints or {})
    parts_read = dict(env=env, reward=_reward(lab.reward, env), pbt=pbt, num_seeds=pbt.population if pbt else lab.num_seeds,
                      logger={name: _logger(name, entry) for name, entry in lab.logger.items()})
    return RunConfig(**{f.name: getattr(lab, f.name) for f in dataclasses.fields(LabConfig)} | parts_read,
                     resolved=OmegaConf.to_container(config))
