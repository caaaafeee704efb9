"""Validated, frozen run configuration: one typed section per config group.

Hydra composes a `DictConfig`; `validate` takes it resolved to plain dicts, checks every value
a user can get wrong, each section once (the env's own keys through the jax-free check its
YAML names, `env.check`), and returns frozen dataclasses. Errors name the key, the value and
what is valid, and are raised before XLA starts, anything compiles or the run writes anything.

Each key is declared once. Its default and its one-line meaning (the comment at the end of
its line, which `--help` shows) live in its YAML in `conf/`; its type, validation and marks
live on its field here (`declared`, `traced`): whether it is a traced hyperparameter, how it
may change when a run dir is relaunched (run/resume.py), the value a run dir written before it
existed reads (rundir/older_configs.py), its place in `--help`. Every key is read from the
composed config (a missing key is an error that names it); nothing is filled in here, except in
a saved config, where a key added since reads as its `before` mark says.
"""

from __future__ import annotations

import collections.abc
import copy
import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field
import types
import typing
from pathlib import Path
from typing import Any, Callable, Mapping

from ppo_lab import parts
from ppo_lab.config_keys import check_sections, group_options
from ppo_lab.errors import ConfigError

# The config groups: `conf/` at the top of the repository (the lab runs from its checkout).
CONF_DIR = Path(__file__).resolve().parent.parent / "conf"


@dataclass(frozen=True)
class Check:
    """A field's validation: `holds(value, section)` (the section's values, for a bound set by
    another key), else a ConfigError saying `valid`: a text formatted with the section's values,
    or a function of them. A value of the wrong type is refused saying `valid` too."""
    holds: Callable[[Any, Mapping], bool]
    valid: str | Callable[[Mapping], str]

    def says(self, section: Mapping) -> str:
        return self.valid(section) if callable(self.valid) else self.valid.format_map(section)


@dataclass(frozen=True)
class LabDefaultWhen:
    """The `before` mark of a key that sizes a part: a run dir written before the key existed
    reads this lab's conf/ default while the key `key` of the same section has `value` (the part
    is not there, so its size changes nothing)."""
    key: str
    value: Any


# How a key may change when a run directory is relaunched (or resumed from): see run/resume.py.
FREE = "free"  # freely: it changes nothing trained (a stopping budget, where logs go)
ALLOWED = "allowed"  # only with allow_config_change=true, recorded in config_history.jsonl
FIXED = "fixed"  # never: the checkpoint's shapes or meaning depend on it


def declared(*, traced: bool = False, resume: str | None = None, before: Any = dataclasses.MISSING,
             help: int | Mapping[str, int] | None = None, key: str | None = None, check: Check | None = None,
             choices: tuple | None = None, read: Callable[[Any, str], Any] | None = None,
             rest: Mapping[str, Check] | None = None, **field_options):
    """A config key's field with its marks; its default and one-line meaning live in its YAML.
      traced    a hyperparameter that changes no shape: an argument of the compiled chunk, one
                value per replica (ppo/hypers.py `Hypers`), never a constant of the trainer
      resume    FREE, ALLOWED or FIXED (unmarked: its section's mark, else ALLOWED)
      before    the value a run dir written before the key existed reads (rundir/older_configs.py),
                or `LabDefaultWhen(...)`
      help      its place among the keys `python launch.py --help` lists (a mapping of own key ->
                place for a field holding a part's own keys)
      key       its name in the config where it differs from the field's (dotted: a key of a
                mapping in the section, `perturb.factors`)
      check     `Check`: its validation; choices: its valid values
      read      for a key whose value is a structure of its own: `read(value, dotted_key)`, which
                checks it and returns the field's value
      rest      for a field holding a part's own keys (the section's keys no other field names,
                as sorted (name, value) pairs): own key -> its `Check`, for those the lab knows"""
    marks = {"traced": traced, "resume": resume, "help": help, "key": key, "check": check, "choices": choices,
             "read": read, "rest": rest}
    metadata = {k: v for k, v in marks.items() if v is not None and v is not False}
    if before is not dataclasses.MISSING:  # None and False are values a key can be added at
        metadata["before"] = before
    return field(metadata=metadata, **field_options)


def traced(**marks):
    """A traced hyperparameter's field (`declared(traced=True, ...)`). Adding one is its field
    here and its line in conf/ppo/default.yaml; the trainer reads it as `hypers.<name>`."""
    return declared(traced=True, **marks)


def _at_least(low: float, valid: str) -> Check:
    return Check(lambda v, s: v >= low, valid)


def _above(low: float, valid: str) -> Check:
    return Check(lambda v, s: v > low, valid)


def _says(valid: str) -> Check:
    """No check beyond the field's type: `valid` says what a value of the wrong type should be."""
    return Check(lambda v, s: True, valid)


LAYOUTS = ("auto", "seeds", "envs", "single")  # ppo.parallel.choose_layout
PRECISIONS = ("fp32", "bf16")  # networks: compute dtype; parameters stay in the first
CONVS = ("auto", "im2col", "native", "xla")  # networks.conv_for_platform
PLATFORMS = ("cpu", "gpu", "tpu")
ACTIVATIONS = ("tanh", "relu", "gelu", "elu")
RECURRENT_CELLS = (None, "gru", "lstm")  # network.recurrent; networks.CELLS
SQUASHES = (None, "tanh")  # ppo_lab.ppo.gaussian


def _is_list(v) -> bool:
    """A YAML list: a list, a tuple or an OmegaConf ListConfig (a config passed in unresolved)."""
    return isinstance(v, collections.abc.Sequence) and not isinstance(v, str)


def _sizes(v, s) -> bool:
    return _is_list(v) and all(isinstance(h, int) and not isinstance(h, bool) and h > 0 for h in v)


# The lab's torsos' own keys (a torso of the user's may have others, checked by the module).
TORSO_KEYS = {
    "hidden_sizes": Check(_sizes, "a list of positive integers"),
    "conv_channels": Check(_sizes, "a list of positive integers"),
    "stack_channels": Check(_sizes, "a list of positive integers"),
    "dense_size": Check(lambda v, s: isinstance(v, int) and not isinstance(v, bool) and v > 0, "a positive integer"),
}
ROLLOUT_OBS_DTYPES = ("float32", "uint8", "bfloat16")  # ppo.obs_storage
VALUE_NORMS = (None, "popart")
VALUE_LOSSES = ("mean_of_max", "max_of_means")  # ppo.losses


class _PPOSizes:
    """The batch sizes a `ppo` section implies (PPOConfig's and its static part's)."""

    num_envs: int
    num_steps: int
    num_minibatches: int
    total_timesteps: int

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
class PPOConfig(_PPOSizes):
    lr: float = traced(help=3, check=_above(0, "a learning rate > 0"))
    lr_final: float = traced(check=Check(lambda v, s: 0 <= v <= s["lr"], "0 <= lr_final <= lr ({lr})"))
    anneal_lr: bool = declared()
    gamma: float = traced(help=8, check=Check(lambda v, s: 0 < v <= 1, "a discount in (0, 1]"))
    gae_lambda: float = traced(help=9, check=Check(lambda v, s: 0 <= v <= 1, "a value in [0, 1]"))
    clip_eps: float = traced(help=10, check=_above(0, "a clip range > 0"))
    clip_eps_final: float = traced(check=_above(0, "a clip range > 0"))
    clip_vloss: bool = declared()
    vf_coef: float = traced(check=_at_least(0, "a coefficient >= 0"))
    ent_coef_initial: float = traced(help=11, check=_at_least(0, "a coefficient >= 0"))
    ent_coef_final: float = traced(check=_at_least(0, "a coefficient >= 0"))
    # Traced, and null or not is the program's choice: an entropy floor is in the loss or not.
    entropy_floor: float | None = traced(check=_at_least(0, "null or an entropy >= 0"))
    entropy_floor_coef: float = traced(check=_at_least(0, "a coefficient >= 0"))
    max_grad_norm: float = traced(help=12, check=_above(0, "a norm > 0"))
    update_epochs: int = declared(help=7, check=_at_least(1, "an integer >= 1"))
    num_minibatches: int = declared(help=6, check=_at_least(1, "an integer >= 1"))
    normalize_advantages: bool = declared()
    bootstrap_truncation: bool = declared()
    num_envs: int = declared(help=4, resume=FIXED, check=_at_least(1, "an integer >= 1"))
    num_steps: int = declared(help=5, resume=FIXED, check=_at_least(1, "an integer >= 1"))
    total_timesteps: int = declared(help=2, check=_above(0, "a positive number of steps"))
    auto_scale: bool = declared()
    auto_scale_epoch_floor: int = declared(check=_at_least(1, "an integer >= 1"))
    auto_scale_reference_batch: int = declared(check=_at_least(1, "a batch size (envs x steps) >= 1"))
    value_norm: str | None = declared(choices=VALUE_NORMS)
    popart_beta_min: float = declared(check=Check(lambda v, s: 0 < v <= 1, "a step size in (0, 1]"))
    separate_grad_clip: bool = declared()
    # the dtype the rollout stores observations in for the update (ppo/obs_storage.py)
    rollout_obs_dtype: str = declared(choices=ROLLOUT_OBS_DTYPES, before="float32")
    adam_eps: float = declared(check=_above(0, "an epsilon > 0"))
    value_loss: str = declared(choices=VALUE_LOSSES, before="mean_of_max")
    privileged_view_after_step: bool = declared(before=False)
    normalize_obs: bool = declared(before=False)  # ppo/normalize.py
    normalize_reward: bool = declared(before=False)

    def static(self) -> "StaticPPO":
        """This config less its traced keys: what the trainer may read as constants."""
        traced_names = traced_keys(type(self))
        return StaticPPO(
            values=tuple((f.name, getattr(self, f.name)) for f in dataclasses.fields(self) if f.name not in traced_names),
            null_traced=frozenset(k for k in traced_names if getattr(self, k) is None),
        )


@dataclass(frozen=True)
class StaticPPO(_PPOSizes):
    """The static part of a `ppo` section: its keys that are not traced, by name (`.num_envs`),
    and which traced keys are null (a program's choice: `is_null("entropy_floor")`). A traced
    key's value is no constant of a program: reading one here fails, naming `hypers.<key>`."""
    values: tuple[tuple[str, Any], ...]
    null_traced: frozenset

    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("values", "null_traced"):
            raise AttributeError(name)
        found = dict(self.values)
        if name in found:
            return found[name]
        if name in traced_keys():
            raise AttributeError(f"ppo.{name} is a traced hyperparameter, one value per replica: read it from the "
                                 f"replica's `hypers.{name}` (ppo/hypers.py), never as a constant of the trainer")
        raise AttributeError(name)

    def is_null(self, traced_key: str) -> bool:
        return traced_key in self.null_traced


@dataclass(frozen=True)
class NetworkConfig:
    """`conf/network/*.yaml`: the torso is the module at `target` (`_target_`), built with
    `torso` (its own keys: hidden_sizes, or conv_channels and dense_size) and `activation`."""
    kind: str = declared(check=Check(lambda v, s: bool(v), "a name for the network (mlp, cnn, ...)"))
    target: str = declared(key="_target_", check=Check(lambda v, s: "." in v,
                           "the dotted path of a flax torso module, e.g. ppo_lab.networks.MLPTorso"))
    activation: str = declared(choices=ACTIVATIONS)
    privileged_critic: bool = declared()
    shared_torso: bool = declared()
    # continuous actions: None (clip to the bounds) or "tanh"
    squash: str | None = declared(before=None, check=Check(lambda v, s: v in SQUASHES,
                                                           f"one of {list(SQUASHES)} (continuous actions)"))
    # the torso's own keys, as sorted (name, value) pairs (hashable)
    torso: tuple[tuple[str, Any], ...] = declared(help={"hidden_sizes": 13}, rest=TORSO_KEYS)
    # None (feed-forward), "gru" or "lstm": a cell between the torso and the heads
    recurrent: str | None = declared(help=14, before=None, check=Check(lambda v, s: v in RECURRENT_CELLS,
                                                                      "null (feed-forward), gru or lstm"))
    recurrent_size: int = declared(before=LabDefaultWhen("recurrent", None),  # the cell's hidden units
                                   check=_above(0, "a positive integer"))
    # units of a dense + activation layer in each head before its output; 0: linear heads
    head_hidden: int = declared(before=0, check=_at_least(0, "0 (linear heads) or a positive integer"))
    head_hidden_gain: float = declared(before=LabDefaultWhen("head_hidden", 0),  # that layer's orthogonal initial gain
                                       check=_above(0, "a positive number"))

    @property
    def is_recurrent(self) -> bool:
        return self.recurrent is not None

    def torso_kwargs(self) -> dict:
        return dict(self.torso)


@dataclass(frozen=True)
class TrainConfig:
    """`conf/train/default.yaml`: the host loop's budget and chunks, free to change on a relaunch."""
    duration_min: float | None = declared(help=15, resume=FREE, check=_above(0, "null or minutes > 0"))
    target_return: float | None = declared(help=16, resume=FREE)
    patience: int = declared(resume=FREE, check=_at_least(0, "an integer >= 0"))
    return_window: int = declared(resume=FREE, check=_at_least(1, "an integer >= 1"))
    chunk_updates: int = declared(resume=FREE, check=_at_least(1, "an integer >= 1"))


@dataclass(frozen=True)
class EvalConfig:
    episodes: int = declared(help=17, check=_at_least(1, "an integer >= 1"))
    deterministic: bool = declared()
    max_steps: int | None = declared(check=_at_least(1, "null or an integer >= 1"))
    survival_envs: int = declared(check=_at_least(1, "an integer >= 1"))
    survival_steps: int = declared(check=_at_least(1, "an integer >= 1"))


@dataclass(frozen=True)
class HealthConfig:
    entropy_min: float = declared()
    kl_min: float = declared()
    kl_max: float = declared()
    clip_frac_max: float = declared()


@dataclass(frozen=True)
class CheckpointConfig:
    every_min: float = declared(help=18, check=_above(0, "minutes > 0"))
    if_all_damaged: str = declared(check=Check(lambda v, s: v in ("error", "start_over"), "error or start_over"),
                                   before="error")  # read by run/resume.py


@dataclass(frozen=True)
class HardwareConfig:
    """`conf/hardware/*.yaml` (cpu, gpu, tpu): what `ppo_lab.hardware.start_jax` applies. Where
    compiled code is cached, how device memory is taken, how the same computation is laid out
    and checked, and how many processes run it change nothing trained (`resume=FREE`)."""
    platform: str = declared(choices=PLATFORMS)
    allow_fallback: bool = declared(resume=FREE)
    host_devices: int | str = declared(help=19, check=Check(  # an integer, or "auto" (one per core)
        lambda v, s: v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and v >= 1), "'auto' or an integer >= 1"))
    # the env count a scale file sizes for this hardware
    num_envs: int | None = declared(check=_at_least(1, "null or an integer >= 1"))
    preallocate: bool = declared(resume=FREE)
    mem_fraction: float | None = declared(resume=FREE, check=Check(lambda v, s: 0 < v <= 1, "null or a fraction in (0, 1]"))
    compilation_cache_dir: str | None = declared(resume=FREE, check=_says("null or a folder"))
    layout: str = declared(resume=FREE, choices=LAYOUTS)  # a split of envs is refused by its own check on resume
    precision: str = declared(choices=PRECISIONS)
    memory_limit_gb: float | None = declared(resume=FREE, check=_above(0, "null or a number of GB > 0"))
    conv: str = declared(resume=FREE, choices=CONVS)
    # XLA's deterministic-ops flags where the backend has them (GPU): ppo_lab.hardware
    deterministic: bool = declared(before=False)
    # one run across processes (ppo_lab.hardware.distributed_settings): null = detected; a
    # config saved before multi-process runs reads as one process
    coordinator_address: str | None = declared(resume=FREE, before=None,
                                               check=Check(lambda v, s: ":" in v, "null or host:port"))
    num_processes: int | None = declared(resume=FREE, before=None, check=_at_least(1, "null or an integer >= 1"))
    process_id: int | None = declared(resume=FREE, before=None, check=Check(
        lambda v, s: 0 <= v and (s["num_processes"] is None or v < s["num_processes"]),
        lambda s: f"null or an integer in [0, {s['num_processes']})" if s["num_processes"] else "null or an integer >= 0"))
    init_timeout_s: float = declared(resume=FREE, before=60, check=_above(0, "a number of seconds > 0"))
    split_host_cpus: bool = declared(before=True)  # processes of one CPU run on one host each take their own CPUs


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
    scores: Mapping[str, Any] = declared(resume=FREE)
    # headline, beside, bounds, criteria: what the env's runs are judged by (the analysis's only)
    metrics: Mapping[str, Any] = declared(resume=FREE)


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
class Bound:
    """What one constrained metric must stay within (`pbt.constraints.<metric>`): `min` and/or
    `max`, inclusive; None: that side is open."""
    min: float | None
    max: float | None


BOUND_KEYS = ("min", "max")
FITNESS_MODES = ("max", "min")  # pbt.fitness_mode: which direction of the fitness ranks better


@dataclass(frozen=True)
class PBTConfig:
    """`conf/pbt/default.yaml`: population-based training (ppo_lab/run/population.py, docs/pbt.md)."""
    population: int = declared(resume=FIXED, check=Check(lambda v, s: v == 0 or v >= 2, "0 (off) or an integer >= 2"))
    interval_updates: int = declared(check=_at_least(1, "an integer >= 1"))
    fraction: float = declared(check=Check(lambda v, s: 0 < v <= 0.5, "a fraction in (0, 0.5]"))
    fitness: str = declared(check=Check(lambda v, s: "/" in v, "a logged metric, e.g. train/mean_episode_return"))
    exploit: bool = declared()
    # a run dir written before these keys ranked by the higher fitness, under no bounds
    fitness_mode: str = declared(choices=FITNESS_MODES, before="max")
    constraints: Mapping[str, Bound] = declared(before=None, read=lambda value, key: _constraints(value, key))  # metric -> its bound
    # traced key (`traced_keys()`, named with or without `ppo.`) -> its range
    hypers: Mapping[str, ExploredKey] = declared(read=lambda value, key: _explored_keys(value, key))
    factors: tuple[float, ...] = declared(key="perturb.factors", check=Check(
        lambda v, s: len(v) > 0 and all(f > 0 for f in v), "a list of factors > 0, e.g. [0.8, 1.25]"))
    resample_prob: float = declared(key="perturb.resample_prob",
                                    check=Check(lambda v, s: 0 <= v <= 1, "a probability in [0, 1]"))

    @property
    def on(self) -> bool:
        return self.population > 0


@dataclass(frozen=True)
class RunConfig:
    seed: int = declared(help=0, resume=FIXED, before=0, check=_at_least(0, "an integer >= 0"))
    num_seeds: int = declared(help=1, resume=FIXED, check=_at_least(1, "an integer >= 1"))
    experiment: str = declared(check=Check(lambda v, s: bool(v), "a name"))
    resume: str | None = declared(resume=FREE, before=None, check=_says("null or a run directory"))
    # a relaunch into a run dir under another config goes on (run/resume.py)
    allow_config_change: bool = declared(resume=FREE, before=False)
    benchmark: bool = declared(before=False)
    env: EnvSection = declared(resume=FIXED)
    reward: RewardSection = declared(resume=FIXED, before={"name": "default"})
    ppo: PPOConfig = declared()
    network: NetworkConfig = declared(resume=FIXED)
    train: TrainConfig = declared()
    eval: EvalConfig = declared(resume=FREE)
    health: HealthConfig = declared(resume=FREE)
    checkpoint: CheckpointConfig = declared(resume=FREE)
    hardware: HardwareConfig = declared()
    logger: Mapping[str, LoggerSpec] = declared(resume=FREE)
    # None: no population (pbt.population=0); a config saved before populations trains none
    pbt: PBTConfig | None = declared(before=LabDefaultWhen("population", 0))
    # The user's own keys (`+tags.owner=me`): recorded in config.yaml and the loggers' params,
    # read by nothing; the one place an unknown key is allowed (config_keys.USER_NAMESPACE).
    tags: Mapping[str, Any] = declared(resume=FREE, before={}, check=_says("a mapping of your own keys (+tags.NAME=VALUE)"))
    # The whole resolved config (plain dicts) this RunConfig was validated from: what
    # config.yaml, loggers and the resume check see. Not part of equality: it repeats the fields.
    resolved: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def seeds(self) -> list[int]:
        return list(range(self.seed, self.seed + self.num_seeds))

    @property
    def checkpoint_every_min(self) -> float:
        return self.checkpoint.every_min

    def part_paths(self) -> list[str]:
        """The dotted paths of the parts this run loads (`ppo_lab.parts`): the env's builder,
        check, extra evaluations and own criteria, the network's torso, the loggers' factories."""
        paths = [self.env.target, self.env.check, *self.env.evaluations.values(), self.env.metrics.get("criteria"),
                 self.network.target, *(spec.target for spec in self.logger.values())]
        return [path for path in paths if path is not None]


def traced_keys(ppo_class: type | None = None) -> tuple[str, ...]:
    """The PPO keys marked `traced()`, in the order of their fields (of `PPOConfig`, or of
    `ppo_class`)."""
    return tuple(f.name for f in dataclasses.fields(ppo_class or PPOConfig) if f.metadata.get("traced"))


def nullable_traced_keys() -> tuple[str, ...]:
    """Traced keys that may be null: null or not is the program's choice (an entropy floor in
    the loss or not), only their value is traced; a population never explores them."""
    hints = typing.get_type_hints(PPOConfig)
    return tuple(k for k in traced_keys() if type(None) in typing.get_args(hints[k]))


@dataclass(frozen=True)
class DeclaredKey:
    """A key of the config as a field declares it: its dotted name, its field and section type."""
    key: str
    field: dataclasses.Field
    section: type | None  # the dataclass of its keys, for a section; else None

    def mark(self, name: str, default=None):
        return self.field.metadata.get(name, default)

    def has(self, name: str) -> bool:
        return name in self.field.metadata


def _section_type(hint) -> type | None:
    for candidate in (hint, *typing.get_args(hint)):
        if dataclasses.is_dataclass(candidate):
            return candidate
    return None


def declared_keys(cls: type | None = None, prefix: str = "") -> list[DeclaredKey]:
    """Every key the config's dataclasses declare, sections first then their keys (the
    current `RunConfig`'s: a test may swap a section's class)."""
    cls = RunConfig if cls is None else cls
    hints = typing.get_type_hints(cls, globalns=globals())
    out = []
    for f in dataclasses.fields(cls):
        if f.name == "resolved":
            continue
        name = prefix + f.metadata.get("key", f.name)
        section = _section_type(hints[f.name])
        out.append(DeclaredKey(name, f, section))
        if section is not None:
            out.extend(declared_keys(section, name + "."))
    return out


def keys_marked(mark: str) -> dict[str, Any]:
    """dotted key -> its `mark`, for every key (or section) that carries it."""
    return {k.key: k.mark(mark) for k in declared_keys() if k.has(mark)}


def help_keys() -> list[str]:
    """The keys `python launch.py --help` lists, in their marked order."""
    places = {}
    for k, place in keys_marked("help").items():
        if isinstance(place, Mapping):  # a part's own keys, which sit beside the field's in its section
            places.update({f"{k.rpartition('.')[0]}.{own}": p for own, p in place.items()})
        else:
            places[k] = place
    return sorted(places, key=places.get)


def keys_added_as_before() -> dict[str, Any]:
    """dotted key -> the value a config saved before the key existed reads (`before` marks that
    are values, not `LabDefaultWhen`)."""
    return {k: v for k, v in keys_marked("before").items() if not isinstance(v, LabDefaultWhen)}


def with_keys_added_since(saved: Mapping[str, Any]) -> dict:
    """A copy of a saved config with each key added since it was written (a `before` value
    mark) that it lacks, at that value. The `LabDefaultWhen` keys read conf/ (rundir/older_configs.py)."""
    out = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in saved.items()}
    for dotted, value in keys_added_as_before().items():
        *section, name = dotted.split(".")
        body = out
        for part in section:
            if not isinstance(body.get(part), Mapping):
                body = None
                break
            body = body[part]
        if body is not None and name not in body:
            body[name] = copy.deepcopy(value)
    return out


def shared_program_key(resolved: Mapping[str, Any]) -> str:
    """What runs must have in common to train in one compiled program (hydra/launcher=vmap):
    the resolved config (plain dicts, no `hydra`) less `seed` (a seed is a replica's PRNG key)
    and the traced keys, keeping whether a nullable one is null (the program's choice)."""
    rest = {k: v for k, v in resolved.items() if k not in ("seed", "hydra", "tags")}
    ppo = dict(rest.get("ppo") or {})
    traced_names = traced_keys()
    switches = {f"{k} (on)": ppo.get(k) is not None for k in nullable_traced_keys()}
    rest["ppo"] = {k: v for k, v in ppo.items() if k not in traced_names} | switches
    return json.dumps(rest, sort_keys=True, default=str)


def config_hash(resolved: Mapping[str, Any], exclude: tuple[str, ...] = ("hydra",)) -> str:
    """The sha256 of a resolved config (plain dicts) less the top-level `exclude` keys, over its
    canonical JSON (keys sorted, no spaces): equal configs hash equal in any process, on any
    host (manifest.json; a multi-process run compares its processes' hashes)."""
    rest = {k: v for k, v in resolved.items() if k not in exclude}
    text = json.dumps(rest, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()




def _require(cond: bool, key: str, value, valid: str) -> None:
    if not cond:
        raise ConfigError(key, value, valid)


def _number(section: Mapping, prefix: str, name: str, kind=float):
    """Read `section[name]` as a number, with a ConfigError naming `prefix.name` if it is not."""
    key = _dotted(prefix, name)
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


def _dotted(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _flag(section: Mapping, prefix: str, name: str) -> bool:
    value = section.get(name)
    _require(isinstance(value, bool), _dotted(prefix, name), value, "true or false")
    return value


def _key_of(f: dataclasses.Field) -> str:
    """The name of field `f`'s key in its section (dotted for a key of a mapping in it)."""
    return f.metadata.get("key", f.name)


def _raw(s: Mapping, name: str, key: str):
    """The value at `name` (dotted: through mappings) in section `s`; a missing key is an error naming it."""
    *parents, leaf = name.split(".")
    body, path = s, key[: len(key) - len(name)]
    for part in parents:
        path += part
        _require(part not in body or isinstance(body[part], Mapping), path, body.get(part), "a mapping of its keys")
        body, path = body.get(part) or {}, path + "."
    _require(leaf in body, key, None, "a value (the key is missing)")
    return body[leaf]


def _typed(value, key: str, hint, check: Check | None, s: Mapping):
    """`value` as field type `hint` (a number, a flag, text, a list, a mapping; null where the type
    allows None), or a ConfigError saying what is valid (the check's text where there is one)."""
    kinds = [t for t in (typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,))
             if t is not type(None)]
    nullable = type(None) in typing.get_args(hint)
    if value is None and nullable:
        return None
    valid = check.says(s) if check is not None else None
    kind, origin = kinds[0] if len(kinds) == 1 else None, typing.get_origin(kinds[0]) if len(kinds) == 1 else None
    if kind is bool:
        _require(isinstance(value, bool), key, value, "true or false")
    elif kind in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            what = f"a number ({kind.__name__})"
            raise ConfigError(key, value, f"{what}: {valid}" if valid else f"null or {what}" if nullable else what)
        if kind is int:
            _require(float(value) == int(value), key, value, valid or "an integer")
            return int(value)
        _require(math.isfinite(value), key, float(value), "a finite number")
        return float(value)
    elif kind is str:
        _require(isinstance(value, str), key, value, valid or ("null or text" if nullable else "text"))
    elif origin is tuple:  # tuple[X, ...]: a list of X
        item = typing.get_args(kinds[0])[0]
        _require(_is_list(value) and all(
            isinstance(v, item if item is not float else (int, float)) and not isinstance(v, bool) for v in value),
            key, value, valid or f"a list of {item.__name__}")
        return tuple(item(v) for v in value)
    elif origin in (collections.abc.Mapping, dict) or kind in (collections.abc.Mapping, dict):
        _require(isinstance(value, Mapping), key, value, valid or "a mapping")
        return dict(value)
    elif check is None:  # several types (`int | str`): its check says which values
        raise TypeError(f"{key}: no reader for a field of type {hint} without a check")
    return value


def _value(s: Mapping, prefix: str, f: dataclasses.Field, hint):
    """Read field `f`'s key of section `s` by its type and check it with its `check` and
    `choices` marks (or by its `read` mark)."""
    name = _key_of(f)
    key = _dotted(prefix, name)
    value = _raw(s, name, key)
    if "read" in f.metadata:
        return f.metadata["read"](value, key)
    choices = f.metadata.get("choices")
    if choices is not None:
        _require(value in choices, key, value, f"one of {list(choices)}")
        return value
    check = f.metadata.get("check")
    typed = _typed(value, key, hint, check, s)
    if check is not None and not (typed is None and type(None) in typing.get_args(hint)):
        # named as given for a list; a number as read (0 -> 0.0 for a float)
        _require(check.holds(typed, s), key, value if _is_list(value) else typed, check.says(s))
    return typed


def _own_keys(s: Mapping, prefix: str, f: dataclasses.Field, named: set) -> tuple[tuple[str, Any], ...]:
    """A part's own keys: the section's keys that no other field names (`named`), checked by the
    field's `rest` mark where it knows them, as sorted (name, value) pairs (lists as tuples: hashable)."""
    own = {}
    for name, value in s.items():
        if name in named:
            continue
        check = f.metadata["rest"].get(name)
        if check is not None:
            _require(check.holds(value, s), _dotted(prefix, name), value, check.says(s))
        own[name] = tuple(value) if _is_list(value) else value
    return tuple(sorted(own.items()))


def _section(cls: type, s: Mapping, prefix: str):
    """A section's dataclass, each field read from its key of `s` and checked by its marks."""
    _require(isinstance(s, Mapping), prefix, s, "a mapping of its keys")
    hints, fields = typing.get_type_hints(cls), dataclasses.fields(cls)
    named = {_key_of(f).split(".")[0] for f in fields if "rest" not in f.metadata}
    return cls(**{f.name: _own_keys(s, prefix, f, named) if "rest" in f.metadata else _value(s, prefix, f, hints[f.name])
                  for f in fields})


def _ppo(s: Mapping) -> PPOConfig:
    """The `ppo` section: each key read and checked by its field, then the batch's arithmetic."""
    ppo = _section(PPOConfig, s, "ppo")
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


def validate_network(s: Mapping) -> NetworkConfig:
    """The `network` section: each key read and checked by its field, the torso's own keys by
    `TORSO_KEYS`; then what a recurrent cell cannot be combined with."""
    network = _section(NetworkConfig, s, "network")
    _require(not (network.recurrent and network.privileged_critic and network.shared_torso), "network.recurrent",
             network.recurrent, "null with a privileged critic on the actor's torso (network.shared_torso=true), "
             "or network.shared_torso=false")
    return network


# The keys of `network` that are the lab's, not the torso's own.
NETWORK_KEYS = tuple(_key_of(f) for f in dataclasses.fields(NetworkConfig) if "rest" not in f.metadata)


def _explored(key: str, s) -> ExploredKey:
    prefix = f"pbt.hypers.{key}"
    explorable = [k for k in traced_keys() if k not in nullable_traced_keys()]
    _require(key in explorable, prefix, s, f"an explorable key, one of {explorable} (traced: they "
             f"change no shape, so one compiled program trains every member)")
    _require(isinstance(s, Mapping) and set(s) == {"low", "high", "log"}, prefix, s, "{low: NUMBER, high: NUMBER, log: BOOL}")
    low, high = _number(s, prefix, "low"), _number(s, prefix, "high")
    log = _flag(s, prefix, "log")
    _require(low < high, f"{prefix}.low", low, f"a value below high ({high})")
    _require(not log or low > 0, f"{prefix}.low", low, "a value > 0 with log: true (a log-uniform range)")
    return ExploredKey(low, high, log)


def _bound(metric: str, s) -> Bound:
    """One `pbt.constraints` entry: a logged metric's `{min: X}` and/or `{max: Y}`."""
    key = f"pbt.constraints.{metric}"
    _require(isinstance(metric, str) and "/" in metric, "pbt.constraints", metric,
             "logged metrics as keys, e.g. {train/entropy: {min: 1.0}}")
    _require(isinstance(s, Mapping) and bool(s), key, s, "{min: NUMBER} and/or {max: NUMBER}")
    _known(s, key, BOUND_KEYS)
    low, high = (None if s.get(side) is None else _number(s, key, side) for side in BOUND_KEYS)
    _require(low is not None or high is not None, key, s, "{min: NUMBER} and/or {max: NUMBER} (not both null)")
    _require(low is None or high is None or low <= high, f"{key}.min", low, f"a value <= max ({high})")
    return Bound(low, high)



def _constraints(value, key: str) -> dict[str, Bound]:
    """`pbt.constraints`: null (no bounds) or logged metric -> its bound."""
    constraints = {} if value is None else value
    _require(isinstance(constraints, Mapping), key, constraints,
             "null or a mapping of logged metric -> {min: X} and/or {max: Y}")
    return {str(m): _bound(m, b) for m, b in constraints.items()}


def _explored_keys(value, key: str) -> dict[str, ExploredKey]:
    """`pbt.hypers`: each explored key (its `ppo.` prefix optional) and its range."""
    _require(isinstance(value, Mapping) and value, key, value, "at least one explored key: {KEY: {low, high, log}}")
    return {name: _explored(name, v) for name, v in ((str(k).removeprefix("ppo."), v) for k, v in value.items())}


def _pbt(s: Mapping, num_seeds: int) -> PBTConfig | None:
    """The `pbt` section (None: off, and nothing else of it is read). Members share one program,
    so only traced keys are explored; member m trains seed seed+m."""
    if _number(s, "pbt", "population", int) == 0:
        return None
    pbt = _section(PBTConfig, s, "pbt")
    _require(num_seeds == 1, "num_seeds", num_seeds, f"1 with pbt.population={pbt.population} (member m trains seed "
             f"seed+m; several populations: -m seed=0,{pbt.population},{2 * pbt.population},...)")
    return pbt


def _known(s: Mapping, section: str, keys) -> None:
    unknown = sorted(set(s) - set(keys))
    if unknown:
        raise ConfigError(f"{section}.{unknown[0]}", s[unknown[0]], f"one of the known keys {sorted(keys)}")


def validate_hardware(s: Mapping) -> HardwareConfig:
    """Check the `hardware` section alone (launchers apply it before XLA's backend starts): each
    key by its field, then that the processes of one run are named together or not at all."""
    if isinstance(s, HardwareConfig):
        return s
    _known(s, "hardware", [_key_of(f) for f in dataclasses.fields(HardwareConfig)])
    hw = _section(HardwareConfig, s, "hardware")
    given = [k for k in ("coordinator_address", "num_processes", "process_id") if getattr(hw, k) is not None]
    _require(not given or len(given) == 3 or hw.num_processes == 1, "hardware." + given[0] if given else "hardware",
             getattr(hw, given[0]) if given else None,
             "coordinator_address, num_processes and process_id set together (or all null: detected)")
    return hw


# `scores`: the task -> {random, reference} returns that normalise scores across tasks in
# `ppo-lab aggregate` (rliable.json); `metrics`: what the env's runs are judged by (`headline`,
# `beside`), the bounds of its metrics (`bounds`) and the dotted path of its own per-seed
# criteria (`criteria`: ppo_lab/analysis/criteria.py). Read by the analysis, never by the env or
# the trainer.
ENV_WIRING_KEYS = ("_target_", "check", "evaluations", "scores", "metrics")
ENV_METRICS_KEYS = ("headline", "beside", "bounds", "criteria")


def _env(s: Mapping, reward: RewardSection, saved: bool = False) -> tuple[EnvSection, str | None]:
    """The `env` section: its wiring checked here, its own keys by the check it names; and the
    reward mode's name that check gives, if any (`default` is the env's own: its real name).
    `saved`: a run dir's record, whose env is found by its parts' paths, not by an option file
    that may have moved since (a missing module then names the folders searched)."""
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
    _require(saved or name in env_options(), "env.name", name, f"one of {env_options()}")
    mode = parts.call("env.check", check, options, dict(reward.options)) if check is not None else None
    scores = s.get("scores") or {}
    _require(isinstance(scores, Mapping) and all(isinstance(v, Mapping) and {"random", "reference"} <= set(v) for v in scores.values()),
             "env.scores", scores, "a mapping of task id -> {random: RETURN, reference: RETURN}")
    metrics = dict(s.get("metrics") or {})
    _require(set(metrics) <= set(ENV_METRICS_KEYS), "env.metrics", metrics, f"a mapping with keys among {ENV_METRICS_KEYS}")
    _require(all(_is_list(v) and len(v) == 2 for v in (metrics.get("bounds") or {}).values()),
             "env.metrics.bounds", metrics.get("bounds"), "a mapping of metric -> [LOW, HIGH] (null for an open end)")
    if metrics.get("criteria") is not None:  # loaded now (it imports no jax): a wrong path fails before training
        parts.load("env.metrics.criteria", metrics["criteria"])
    env = EnvSection(name=name, target=target, check=check, evaluations=evaluations, options=options, scores=dict(scores),
                     metrics=metrics)
    return env, mode


def env_options() -> list[str]:
    """The env group's options: the files of `conf/env/` next to this package and of `env/`
    in the user's config folders on Hydra's search path (`config_keys.use_config_dirs`)."""
    return group_options("env") or []


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


def _required(cfg: Mapping, key: str):
    _require(key in cfg, key, None, "a value (the key is missing)")
    return cfg[key]


def validate(cfg: Mapping[str, Any], *, saved: bool = False) -> RunConfig:
    """Check a resolved config (plain nested dicts) and freeze it into a RunConfig. `saved`: a
    run directory's config.yaml, a record: a key a later lab no longer has must not make it
    unreadable, and one added since reads as its `before` mark says."""
    if saved:
        cfg = with_keys_added_since(cfg)
    else:
        check_sections(cfg)  # an unknown key (a typo, `+ppo.lrr=...`) first: it would otherwise be ignored
    hints = typing.get_type_hints(RunConfig)
    # The top-level keys that are no section: seed, num_seeds, experiment, resume, ..., tags.
    top = {f.name: _value(cfg, "", f, hints[f.name]) for f in dataclasses.fields(RunConfig)
           if f.name != "resolved" and _section_type(hints[f.name]) is None}
    reward_section = dict(_required(cfg, "reward") or {})
    _require(isinstance(reward_section.get("name"), str), "reward.name", reward_section.get("name"), "a reward mode name")
    reward = RewardSection(name=reward_section["name"], options=reward_section)
    env, mode = _env(cfg["env"], reward, saved)
    if isinstance(mode, str):  # the log, summary.json and replays name the mode, never `default`
        reward = dataclasses.replace(reward, name=mode)
    checkpoint = _section(CheckpointConfig, _required(cfg, "checkpoint"), "checkpoint")
    logger = _logger(_required(cfg, "logger"))
    # No pbt section: a config saved before populations, which trained none (its `before` mark).
    pbt = _pbt(_required(cfg, "pbt"), top["num_seeds"]) if not saved or "pbt" in cfg else None
    if pbt:  # a population's members are its seeds seed..seed+population-1 (one replica each)
        top["num_seeds"] = pbt.population
    return RunConfig(
        **top,
        env=env,
        reward=reward,
        ppo=_ppo(cfg["ppo"]),
        network=validate_network(cfg["network"]),
        train=_section(TrainConfig, cfg["train"], "train"),
        eval=_section(EvalConfig, cfg["eval"], "eval"),
        health=_section(HealthConfig, cfg["health"], "health"),
        checkpoint=checkpoint,
        hardware=validate_hardware(cfg["hardware"]),
        logger=logger,
        pbt=pbt,
        resolved=dict(cfg),
    )
