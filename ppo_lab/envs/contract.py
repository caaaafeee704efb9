"""An env against the lab's env contract (`envs.base`): every breach named, in one message.

`check_env(env, params)` runs what training will run, in the form it will run it (one key per
env, `vmap` over the envs, `jit` around them): `reset`, a sampled action of the action space,
`step` on it, the action mask where the env has one. It checks each output against what the
trainer needs: the observation an array shaped and typed as `observation_space` says, the state
`step` returns the same pytree as `reset`'s (the rollout carries it in `lax.scan`), the reward
one float per env, `terminated` and `truncated` one bool per env, `info["final_observation"]` an
observation, `info["metrics"]` one number per env each, the mask one bool per action; the params
a pytree (of numbers and arrays alone where `params_are_data`); the action space a `Discrete`
or a one-axis `Box`. Each breach is a line naming the member, what it gave and what was
expected; all of them are raised together as one `EnvContractError` (a ConfigError: exit 2).

Two depths:
- before every training compile (`run.build`), abstractly: `jax.eval_shape` traces the
  functions for their shapes and dtypes and runs nothing, so a reward of shape (2,) stops the run
  with its line instead of a traceback from deep inside the trainer;
- `ppo-lab check-env TARGET` (`concrete=True`): compiled and run, so it also sees the values
  (actions inside the space, finite rewards) and, for an env that draws frames
  (`Env.draws_frames`), a few random steps drawn by `render_episode`.

An env that steps whole batches outside JAX (`Env.batched`: EnvPool, Gymnasium) is stepped
through `reset_batch` / `step_batch` only when run concretely on one device (its pools answer
only there); before training its spaces and params are checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from ppo_lab.envs.base import Env, Episode
from ppo_lab.errors import ConfigError

NUM_ENVS = 2  # envs of the checked batch: vmap's axis, small
RENDER_STEPS = 4  # random steps a drawing env draws in `ppo-lab check-env`
CONTRACT = "ppo_lab/envs/base.py, docs/envs.md"


class EnvContractError(ConfigError):
    """An env that breaks the contract: one line per breach."""

    def __init__(self, env: str, problems: list[str]):
        self.env, self.problems = env, list(problems)
        ConfigError.__init__(self, "env", env, "")
        lines = "\n".join(f"  - {p}" for p in self.problems)
        self.args = (f"{env} breaks the env contract ({CONTRACT}):\n{lines}",)

    def __reduce__(self):
        return type(self), (self.env, self.problems)


@dataclass
class _Findings:
    problems: list[str] = field(default_factory=list)

    def add(self, member: str, got: str, expected: str) -> None:
        self.problems.append(f"{member}: {got}; expected {expected}")

    def shaped(self, member: str, x, shape: tuple, dtype_ok, dtype_says: str) -> bool:
        """`x` (one leaf per env batch) has `shape` and a dtype `dtype_ok` accepts; else noted."""
        if not hasattr(x, "shape") or not hasattr(x, "dtype"):
            self.add(member, f"a {type(x).__name__}", f"an array of shape {shape[1:]} per env")
            return False
        good = tuple(x.shape) == tuple(shape) and dtype_ok(np.dtype(x.dtype))
        if not good:
            self.add(member, f"shape {tuple(x.shape[1:])} {np.dtype(x.dtype).name} per env",
                     f"shape {tuple(shape[1:])} {dtype_says}")
        return good


def _is(kind):
    return lambda dtype: np.issubdtype(dtype, kind)


def _same(expected):
    return lambda dtype: dtype == np.dtype(expected)


def _traced(findings: _Findings, member: str, fn, concrete: bool, *args):
    """`fn(*args)` under jit (run) or `jax.eval_shape` (traced only); an error is a finding, None."""
    try:
        return jax.jit(fn)(*args) if concrete else jax.eval_shape(fn, *args)
    except Exception as exc:  # noqa: BLE001 - whatever the env's code raises is what to report
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        findings.add(member, f"raised {type(exc).__name__}: {first}"[:400], "it to run under jit and vmap")
        return None


def _check_params(findings: _Findings, env: Env, params) -> None:
    leaves = jax.tree.leaves(params)
    if len(leaves) == 1 and leaves[0] is params and not isinstance(params, (int, float, bool, np.ndarray, jax.Array)):
        findings.add("params", f"a {type(params).__name__} that JAX sees as one leaf, not a pytree",
                     "a pytree of the env's parameters (a flax.struct.dataclass, as gymnax's EnvParams)")
    elif env.params_are_data:
        odd = sorted({type(x).__name__ for x in leaves if not isinstance(x, (bool, int, float, np.ndarray, jax.Array,
                                                                              np.generic))})
        if odd:
            findings.add("params", f"leaves of type {', '.join(odd)}",
                         "bools, ints, floats or arrays alone (params_are_data: they are program arguments)")


def _spaces(findings: _Findings, env: Env, params):
    """(observation space, action space, number of actions or None), or None where unusable."""
    try:
        obs_space, act_space = env.observation_space(params), env.action_space(params)
    except Exception as exc:  # noqa: BLE001
        findings.add("observation_space / action_space", f"raised {type(exc).__name__}: {exc}", "the env's spaces")
        return None
    discrete = hasattr(act_space, "n")
    if not discrete and len(tuple(getattr(act_space, "shape", ()) or ())) != 1:
        findings.add("action_space", repr(act_space), "a Discrete(n) or a Box with one axis (continuous actions)")
    if not hasattr(obs_space, "shape") or not hasattr(obs_space, "dtype"):
        findings.add("observation_space", repr(obs_space), "a Box: one array of a shape and dtype")
        return None
    if env.has_action_mask and not discrete:
        findings.add("action_mask", "defined for a continuous action space", "a mask only with a Discrete action space")
    return obs_space, act_space, int(act_space.n) if discrete else None


def check_env(env, params, *, name: str = "", concrete: bool = False, render: bool = False) -> None:
    """Raise an EnvContractError listing every way `env` (built with `params`) breaks the
    contract; nothing when it keeps it (see the module docstring for what and how)."""
    name = name or type(env).__name__
    findings = _Findings()
    if not isinstance(env, Env):
        findings.add("the env's class", f"{type(env).__name__}, not derived from ppo_lab.envs.base.Env",
                     "a class deriving from Env (with gymnax's Environment for a JAX env)")
        raise EnvContractError(name, findings.problems)
    _check_params(findings, env, params)
    spaces = _spaces(findings, env, params)
    if spaces is not None and (not env.batched or concrete):
        _check_steps(findings, env, params, spaces, concrete)
    if render and env.draws_frames and not findings.problems:
        _check_render(findings, env, params)
    if findings.problems:
        raise EnvContractError(name, findings.problems)


def describe(env: Env, params) -> str:
    """What `check_env` checked, in a line (for an env that kept the contract)."""
    obs, act = env.observation_space(params), env.action_space(params)
    parts = [f"observation {tuple(obs.shape)} {np.dtype(obs.dtype).name}", f"actions {act!r}",
             "an action mask" if env.has_action_mask else "no action mask",
             f"params a pytree of {len(jax.tree.leaves(params))} leaves",
             "stepped as whole batches outside JAX" if env.batched else f"reset and step under jit and vmap ({NUM_ENVS} envs)"]
    if env.draws_frames:
        parts.append(f"{RENDER_STEPS} random steps drawn")
    return "; ".join(parts)


def _check_steps(findings: _Findings, env: Env, params, spaces, concrete: bool) -> None:
    obs_space, act_space, num_actions = spaces
    n = NUM_ENVS
    keys = jax.random.split(jax.random.PRNGKey(0), n) if concrete else jax.ShapeDtypeStruct((n, 2), jnp.uint32)
    if env.batched:
        reset = lambda k: env.reset_batch(k[0], params, n)  # noqa: E731
        step = lambda k, s, a: env.step_batch(k[0], s, a, params)  # noqa: E731
    else:
        reset = jax.vmap(lambda k: env.reset(k, params))
        step = jax.vmap(lambda k, s, a: env.step(k, s, a, params))
    out = _traced(findings, "reset(key, params)", reset, concrete, keys)
    if out is None:
        return
    if not (isinstance(out, tuple) and len(out) == 2):
        return findings.add("reset(key, params)", f"{type(out).__name__} of {len(out) if isinstance(out, tuple) else 1}",
                            "(obs, state)")
    obs, state = out
    _check_obs(findings, "reset's obs", obs, obs_space)
    actions = _traced(findings, "action_space(params).sample(key)", jax.vmap(act_space.sample), concrete, keys)
    if actions is None:
        return
    discrete = num_actions is not None
    shape = (n, *tuple(act_space.shape))
    _check_actions(findings, actions, shape, act_space, discrete, concrete)
    if env.has_action_mask and discrete:
        mask = _traced(findings, "action_mask(state, params)", jax.vmap(lambda s: env.action_mask(s, params)), concrete, state)
        if mask is not None:
            findings.shaped("action_mask(state, params)", mask, (n, num_actions), _same(bool), "bool: one per action")
    stepped = _traced(findings, "step(key, state, action, params)", step, concrete, keys, state, actions)
    if stepped is None:
        return
    if not (isinstance(stepped, tuple) and len(stepped) == 6):
        got = f"{len(stepped)} values" if isinstance(stepped, tuple) else type(stepped).__name__
        return findings.add("step(key, state, action, params)", got,
                            "6 values: obs, state, reward, terminated, truncated, info (gymnax 1.0)")
    _check_step(findings, stepped, state, obs_space, concrete)


def _check_obs(findings: _Findings, member: str, obs, space) -> bool:
    shape = (NUM_ENVS, *tuple(space.shape))
    return findings.shaped(member, obs, shape, _same(space.dtype), f"{np.dtype(space.dtype).name}, as observation_space says")


def _check_actions(findings: _Findings, actions, shape, space, discrete: bool, concrete: bool) -> None:
    member = "action_space(params).sample(key)"
    kind = (_is(np.integer), "integer, as a Discrete space's") if discrete else (_is(np.floating), "float, as a Box's")
    if not findings.shaped(member, actions, shape, kind[0], kind[1]) or not concrete:
        return
    values = np.asarray(actions)
    if discrete and not ((values >= 0) & (values < space.n)).all():
        findings.add(member, f"actions {values.tolist()}", f"actions in 0..{space.n - 1}")


def _check_step(findings: _Findings, stepped, state, obs_space, concrete: bool) -> None:
    """`step`'s six outputs against reset's and the trainer's needs."""
    n = NUM_ENVS
    next_obs, next_state, reward, terminated, truncated, info = stepped
    _check_obs(findings, "step's obs", next_obs, obs_space)
    before, after = jax.tree.structure(state), jax.tree.structure(next_state)
    if before != after:
        findings.add("step's state", "a pytree other than reset's", "the same pytree as reset's state (lax.scan carries it)")
    else:
        odd = [f"{jax.tree_util.keystr(path)} {tuple(a.shape[1:])} {np.dtype(a.dtype).name} after reset, "
               f"{tuple(b.shape[1:])} {np.dtype(b.dtype).name} after step"
               for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(state), jax.tree.leaves(next_state))
               if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype]
        if odd:
            findings.add("step's state", "; ".join(odd[:3]), "each leaf as reset gives it (lax.scan carries it)")
    if findings.shaped("step's reward", reward, (n,), _is(np.floating), "float: one reward per env") and concrete:
        if not np.isfinite(np.asarray(reward)).all():
            findings.add("step's reward", f"{np.asarray(reward).tolist()} after a random action", "finite rewards")
    findings.shaped("step's terminated", terminated, (n,), _same(bool), "bool: one per env")
    findings.shaped("step's truncated", truncated, (n,), _same(bool), "bool: one per env")
    _check_info(findings, info, obs_space)


def _check_info(findings: _Findings, info, obs_space) -> None:
    n = NUM_ENVS
    if not isinstance(info, dict):
        return findings.add("step's info", type(info).__name__, "a dict")
    if "final_observation" not in info:
        findings.add("step's info", f"keys {sorted(info)}", "'final_observation' among them: the observation the step "
                                                            "ended on, before an auto-reset (gymnax's Environment.step adds it)")
    else:
        _check_obs(findings, "step's info['final_observation']", info["final_observation"], obs_space)
    if Env.RESETTING in info:
        findings.shaped(f"step's info['{Env.RESETTING}']", info[Env.RESETTING], (n,), _same(bool), "bool: one per env")
    metrics = info.get("metrics", {})
    if not isinstance(metrics, dict):
        return findings.add("step's info['metrics']", type(metrics).__name__, "a dict: name -> one number per env")
    for metric, value in metrics.items():
        findings.shaped(f"step's info['metrics']['{metric}']", value, (n,),
                        lambda d: np.issubdtype(d, np.number) or d == np.dtype(bool), "number: one per env")


def _check_render(findings: _Findings, env: Env, params) -> None:
    """A few random steps (gymnax's `reset_env` / `step_env`) drawn by `render_episode`."""
    episode = _random_episode(env, params)
    try:
        frames, summary = env.render_episode(episode, {"cell_px": None, "whole": False, "mortal": False})
    except Exception as exc:  # noqa: BLE001
        return findings.add("render_episode(episode, options)", f"raised {type(exc).__name__}: {exc}"[:400],
                            "frames of a few random steps")
    frames = list(frames)
    bad = [i for i, f in enumerate(frames) if not (isinstance(f, np.ndarray) and f.dtype == np.uint8 and f.ndim == 3
                                                    and f.shape[-1] == 3)]
    sizes = {f.shape for f in frames if isinstance(f, np.ndarray)}
    if len(frames) != episode.num_steps + 1 or bad or len(sizes) > 1 or not isinstance(summary, str):
        got = (f"{len(frames)} frames ({'frame ' + str(bad[0]) + ' not uint8 [H, W, 3]' if bad else f'sizes {sorted(sizes)}'}),"
               f" a {type(summary).__name__} summary")
        findings.add("render_episode(episode, options)", got,
                     f"{episode.num_steps + 1} uint8 [H, W, 3] frames of one size (one per state) and a str")


def _random_episode(env: Env, params) -> Episode:
    space = env.action_space(params)

    @jax.jit
    def play(key):
        obs, state = env.reset_env(key, params)

        def body(state, k):
            action = space.sample(k)
            _, next_state, reward, done, info = env.step_env(k, state, action, params)
            return next_state, (next_state, action, reward, done, info)

        _, steps = jax.lax.scan(body, state, jax.random.split(key, RENDER_STEPS))
        return state, steps

    first, (states, actions, rewards, dones, infos) = jax.device_get(play(jax.random.PRNGKey(0)))
    ended = np.flatnonzero(np.asarray(dones))
    n = int(ended[0]) + 1 if ended.size else RENDER_STEPS  # no step past the end: step_env does not reset
    cut = lambda tree: jax.tree.map(lambda x: np.asarray(x)[:n], tree)  # noqa: E731
    stacked = jax.tree.map(lambda a, b: np.concatenate([np.asarray(a)[None], np.asarray(b)[:n]]), first, states)
    probs = None if not hasattr(space, "n") else np.full((n + 1, space.n), 1.0 / space.n)
    return Episode(states=stacked, actions=cut(actions), rewards=cut(rewards), infos=cut(infos), action_probs=probs,
                   ending="ended" if ended.size else "stopped", step_cap=RENDER_STEPS, params=params, run_params=params,
                   labels={"reward": "random", "policy": "sampled", "seed": 0, "update": 0})
