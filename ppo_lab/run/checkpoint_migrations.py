"""Carrying a checkpoint's payload from an older format version to this one.

A payload is the learner state as a flax state dict (nested dicts of numpy arrays, keys as
strings; `ppo_lab.run.checkpoint`). The versions are listed in
`ppo_lab.rundir.checkpoint_format`; each known change of the layout has one function here,
applied in order. A version with no way forward is refused, naming both versions.

Works on plain dicts and numpy arrays only: no jax, so it is testable on its own.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ppo_lab.rundir.checkpoint_format import FIRST_VERSIONED, FORMAT_VERSION, CheckpointFormatError

OLDEST = 1  # the oldest format a migration exists from


def infer_version(raw: dict) -> int:
    """The layout of an unversioned payload (written before versions were recorded).
    Format 2 added `value_norm` to the learner state; format 1 has none."""
    return 2 if "value_norm" in raw else 1


def _leaves(tree) -> int:
    if isinstance(tree, dict):
        return sum(_leaves(v) for v in tree.values())
    return 0 if tree is None else 1


def _add_schedule_counts(raw_node, template_node) -> int:
    """Format 2 moved the learning-rate schedule inside optax.inject_hyperparams: its state
    gained `hyperparams_states["learning_rate"] = {"count": steps taken}`. Format 1 set the
    rate from the host and kept no such count; the optimiser's own step count is that count
    (both advance once per optimiser step). Returns how many states were filled in."""
    if not isinstance(raw_node, dict) or not isinstance(template_node, dict):
        return 0
    wanted = (template_node.get("hyperparams_states") or {}).get("learning_rate")
    if isinstance(wanted, dict) and "count" in wanted and "count" in raw_node and "inner_state" in raw_node:
        states = raw_node.get("hyperparams_states") or {}
        if "learning_rate" not in states:
            raw_node["hyperparams_states"] = {**states, "learning_rate": {"count": np.array(raw_node["count"], copy=True)}}
            return 1
        return 0
    return sum(_add_schedule_counts(raw_node[k], template_node[k]) for k in template_node if k in raw_node)


def _from_1(raw: dict, template: dict, where: str) -> dict:
    """Format 1 -> format 2."""
    if template.get("value_norm") is not None:
        raise CheckpointFormatError(
            f"{where} is checkpoint format 1, which has no PopArt statistics; this config trains with "
            f"ppo.value_norm=popart (format {FORMAT_VERSION}). Resume with ppo.value_norm=null, or start a new run directory.")
    raw = dict(raw, value_norm=None)
    opt, opt_template = raw.get("opt_state"), template.get("opt_state")
    if not isinstance(opt, dict) or not isinstance(opt_template, dict):
        raise CheckpointFormatError(f"{where} (format 1) has no optimiser state this version knows how to carry over")
    opt = dict(opt)
    if not _add_schedule_counts(opt, opt_template):
        raise CheckpointFormatError(
            f"{where} is checkpoint format 1, but its optimiser state is not the one format 1 wrote "
            f"(no inject_hyperparams state to carry over to format {FORMAT_VERSION})")
    # Gradient clipping (the chain's first state) holds no arrays in either format's layout
    # (clip_by_global_norm, or format 2's policy/value clipping apart): take this config's.
    if "0" in opt and "0" in opt_template and _leaves(opt["0"]) == 0 and _leaves(opt_template["0"]) == 0:
        opt["0"] = opt_template["0"]
    raw["opt_state"] = opt
    return raw


def _from_3(raw: dict, template: dict, where: str) -> dict:
    """Format 3 -> 4: the learner state gained `memory`, a recurrent policy's state (None for a
    feed-forward one, the only kind format 3 could hold)."""
    if template.get("memory") is not None:
        raise CheckpointFormatError(
            f"{where} is checkpoint format {3 if 'memory' not in raw else 4} of a feed-forward policy; this config "
            f"trains a recurrent one (network.recurrent, format {FORMAT_VERSION}). Resume with network.recurrent=null, "
            f"or start a new run directory.")
    return dict(raw, memory=None)


def _from_4(raw: dict, template: dict, where: str) -> dict:
    """Format 4 -> 5: the learner state gained `reward_norm`, the running statistics of
    `ppo.normalize_reward` (None without it, the only setting format 4 could train with)."""
    if template.get("reward_norm") is not None:
        raise CheckpointFormatError(
            f"{where} is checkpoint format 4, trained without reward normalisation; this config trains with "
            f"ppo.normalize_reward=true (format {FORMAT_VERSION}). Resume with ppo.normalize_reward=false, "
            f"or start a new run directory.")
    return dict(raw, reward_norm=None)


# version -> the function that carries a payload of that version to the next one
_STEPS = {1: _from_1, 2: lambda raw, template, where: raw, 3: _from_3, 4: _from_4}  # 2 -> 3: the payload is unchanged


def migrate(raw: dict, version: int, template: dict, where: Path | str) -> dict:
    """`raw` (a payload of format `version`) in this version's layout. `template` is this
    run's learner state as a state dict (its structure is what the payload must become)."""
    where = Path(where).name if isinstance(where, Path) else where
    if not isinstance(version, int) or isinstance(version, bool):
        raise CheckpointFormatError(f"{where}: format_version {version!r} is not a version number "
                                    f"(this ppo_lab writes format {FORMAT_VERSION})")
    if version > FORMAT_VERSION:
        raise CheckpointFormatError(
            f"{where} is checkpoint format {version}, written by a newer ppo_lab; this ppo_lab reads formats "
            f"{OLDEST} to {FORMAT_VERSION}. Resume it with the ppo_lab that wrote it, or start a new run directory.")
    if version < OLDEST:
        raise CheckpointFormatError(f"{where} is checkpoint format {version}; this ppo_lab reads formats {OLDEST} to "
                                    f"{FORMAT_VERSION}. Start a new run directory.")
    for step in range(version, FORMAT_VERSION):
        raw = _STEPS[step](raw, template, where)
    return raw


def describe(version: int, versioned: bool) -> str:
    return f"format {version}" if versioned or version >= FIRST_VERSIONED else f"format {version} (unversioned, inferred)"
