"""PureJaxRL's PPO as an optional peer for the benchmark, loaded from a user's checkout.

Nothing of PureJaxRL is copied here: `load(checkout)` runs its unchanged `purejaxrl/ppo.py`
from the given directory (`runpy.run_path`) and adapts the surroundings it expects:
- gymnax 0.0.x's five-value `step`: gymnax 1.0 returns `terminated, truncated` separately, so
  the env PureJaxRL builds is wrapped to return `terminated | truncated` as its one `done`;
- its `wrappers.py` imports brax and navix at the top for wrappers `ppo.py` does not use:
  when they are not installed, empty placeholder modules stand in for them;
- `distrax` it needs only for `distrax.Categorical` (`ppo.py`'s policy): when distrax is not
  installed, `CategoricalStandIn` stands in for it (softmax over the logits: `sample`,
  `log_prob`, `entropy`, computed as distrax computes them), so the peer runs without
  TensorFlow Probability; `distrax_source()` says which one ran. `ppo_continuous_action.py`
  needs distrax's Gaussian: without distrax it is not importable and the benchmark says so.

Where: `ppo-lab benchmark --purejaxrl PATH` or `PPO_LAB_PUREJAXRL=PATH` (the repository root
or its `purejaxrl/` folder).

This module imports neither gymnax nor PureJaxRL at its top: their import starts XLA's backend,
which must wait for the `hardware` settings (`ppo_lab.hardware.start_jax`). PureJaxRL's own
`ppo.py` imports gymnax when `load` runs it; the adapter wraps that gymnax's `make`.
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys
import time
import types
from pathlib import Path

import jax
import jax.numpy as jnp

from ppo_lab.bench.purejaxrl_settings import CARTPOLE

ENV_VAR = "PPO_LAB_PUREJAXRL"

class PeerUnavailable(RuntimeError):
    """PureJaxRL cannot be imported from where we were told to look (the reason says why)."""


def find_checkout(path: str | os.PathLike | None) -> Path:
    """The folder holding PureJaxRL's `ppo.py`, from a path or $PPO_LAB_PUREJAXRL; PeerUnavailable
    when neither is given or it holds no PureJaxRL."""
    given = path or os.environ.get(ENV_VAR)
    if not given:
        raise PeerUnavailable(f"no PureJaxRL checkout given (--purejaxrl PATH or ${ENV_VAR})")
    root = Path(given).expanduser()
    for folder in (root / "purejaxrl", root):
        if (folder / "ppo.py").is_file() and (folder / "wrappers.py").is_file():
            return folder
    raise PeerUnavailable(f"no purejaxrl/ppo.py and wrappers.py under {root} (give the repository root or its purejaxrl/ folder)")


class _FiveValueEnv:
    """A gymnax 1.0 env seen through gymnax 0.0.x's `step` (one `done`). Given `params`, it uses
    them where a call gives None, as Brax's wrapper in PureJaxRL (which has no params) is called:
    `ppo_continuous_action.py`'s `make_train` passes `env_params=None`."""

    def __init__(self, env, params=None):
        self._env, self._params = env, params

    def __getattr__(self, name):
        return getattr(self._env, name)

    def _own(self, params):
        return self._params if params is None else params

    def reset(self, key, params=None):
        return self._env.reset(key, self._own(params))

    def step(self, key, state, action, params=None):
        obs, state, reward, terminated, truncated, info = self._env.step(key, state, action, self._own(params))
        return obs, state, reward, terminated | truncated, info

    def observation_space(self, params=None):
        return self._env.observation_space(self._own(params))

    def action_space(self, params=None):
        return self._env.action_space(self._own(params))


def _five_value_gymnax(gymnax) -> types.SimpleNamespace:
    """`gymnax` as PureJaxRL's ppo.py uses it (`gymnax.make` only), its envs seen through `_FiveValueEnv`."""

    def make(*args, **kwargs):
        env, params = gymnax.make(*args, **kwargs)
        return _FiveValueEnv(env), params

    return types.SimpleNamespace(make=make)


def installed(name: str) -> bool:
    """Whether the top-level package `name` can be imported here (found on this interpreter's
    finders, or already loaded), without importing it."""
    return name in sys.modules or importlib.util.find_spec(name) is not None


def _placeholder_modules() -> None:
    """brax and navix, only as far as wrappers.py's top-level imports need them."""
    names = [] if installed("brax") else ["brax", "brax.envs", "brax.envs.wrappers", "brax.envs.wrappers.training"]
    for name in names + ([] if installed("navix") else ["navix"]):
        module = sys.modules.setdefault(name, types.ModuleType(name))
        parent, _, child = name.rpartition(".")
        if parent:  # what `import parent.child` binds
            setattr(sys.modules[parent], child, module)
    if names:
        training = sys.modules["brax.envs.wrappers.training"]
        training.EpisodeWrapper = training.AutoResetWrapper = object


class CategoricalStandIn:
    """`distrax.Categorical(logits=...)` as PureJaxRL's `ppo.py` uses it: `sample(seed=key)`,
    `log_prob(value)`, `entropy()`, each as distrax computes it (jax.random.categorical on the
    logits; the normalised log-softmax; -sum p log p with 0 log 0 = 0)."""

    def __init__(self, logits):
        self.logits = jax.nn.log_softmax(logits, axis=-1)

    def sample(self, seed, sample_shape=()):
        return jax.random.categorical(seed, self.logits, axis=-1, shape=tuple(sample_shape) + self.logits.shape[:-1])

    def log_prob(self, value):
        return jnp.take_along_axis(self.logits, jnp.asarray(value, jnp.int32)[..., None], axis=-1)[..., 0]

    def entropy(self):
        probs = jnp.exp(self.logits)
        return -jnp.sum(jnp.where(probs == 0, 0.0, probs * self.logits), axis=-1)


def distrax_source() -> str:
    """Which `distrax` PureJaxRL's `ppo.py` runs with here: "distrax <version>", or the stand-in."""
    module = sys.modules.get("distrax")
    if module is not None and getattr(module, "Categorical", None) is CategoricalStandIn:
        return "stand-in (ppo_lab.bench.purejaxrl_peer.CategoricalStandIn)"
    if module is None and not installed("distrax"):
        return "not loaded"
    import distrax  # noqa: PLC0415 - only to name its version
    return f"distrax {getattr(distrax, '__version__', '?')}"


def _run_checkout_file(path, filename: str) -> dict:
    """The names PureJaxRL's `filename` defines, run unchanged from the checkout (its
    `__main__` block not run); PeerUnavailable with the reason when it cannot be."""
    folder = find_checkout(path)
    if filename == "ppo.py" and not installed("distrax"):  # it needs no more of distrax than its Categorical
        sys.modules["distrax"] = types.ModuleType("distrax")
        sys.modules["distrax"].Categorical = CategoricalStandIn
    for needed in ("distrax", "chex", "gymnax"):
        if not installed(needed):
            raise PeerUnavailable(f"PureJaxRL needs {needed!r}, which is not installed here (pip install {needed})")
    if not (folder / filename).is_file():
        raise PeerUnavailable(f"no {filename} in {folder}")
    _placeholder_modules()
    sys.path.insert(0, str(folder))
    try:
        # run_name other than "__main__": its `if __name__ == "__main__"` training does not run.
        return runpy.run_path(str(folder / filename), run_name=f"purejaxrl_{Path(filename).stem}")
    except Exception as exc:  # noqa: BLE001 - any import failure means: not comparable here
        raise PeerUnavailable(f"importing {folder / filename} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.remove(str(folder))


def load(path: str | os.PathLike | None = None) -> types.SimpleNamespace:
    """PureJaxRL's `ppo.py` (the names it defines), ready to `make_train(config)`; PeerUnavailable
    with the reason when it is not given or cannot be imported here."""
    names = _run_checkout_file(path, "ppo.py")
    if not callable(names.get("make_train")) or not hasattr(names.get("gymnax"), "make"):
        raise PeerUnavailable(f"{find_checkout(path) / 'ppo.py'} defines no make_train or does not import gymnax")
    # run_path returns a copy of the names: patch the globals make_train really reads.
    names["make_train"].__globals__["gymnax"] = _five_value_gymnax(names["gymnax"])
    return types.SimpleNamespace(**names)


def load_continuous(path: str | os.PathLike | None, gymnax_id: str) -> types.SimpleNamespace:
    """PureJaxRL's `ppo_continuous_action.py`, its training code unchanged, on the gymnax env
    `gymnax_id` instead of a Brax one. Two names its `make_train` reads are given the gymnax env:
    - `BraxGymnaxWrapper(name)` builds the gymnax env (seen through `_FiveValueEnv`, with its
      default params): the same reset/step/spaces interface, and gymnax resets itself where an
      episode ends, as Brax's AutoResetWrapper does;
    - `ClipAction` clips to the env's own bounds (PureJaxRL's default is [-1, 1], Brax's range;
      Pendulum's torque is [-2, 2]: its own TODO line in `ClipAction.step` says the same).
    Its observation and reward normalisation (`NORMALIZE_ENV`), network, losses and schedule
    are its own."""
    names = _run_checkout_file(path, "ppo_continuous_action.py")
    if not callable(names.get("make_train")) or "ClipAction" not in names:
        raise PeerUnavailable("ppo_continuous_action.py defines no make_train or imports no ClipAction")
    gymnax = sys.modules["gymnax"]  # imported by its wrappers.py, so installed and loaded
    env, env_params = gymnax.make(gymnax_id)
    space = env.action_space(env_params)
    low, high = float(jax.numpy.min(space.low)), float(jax.numpy.max(space.high))
    clip = names["ClipAction"]
    train_globals = names["make_train"].__globals__
    train_globals["BraxGymnaxWrapper"] = lambda env_name, backend=None: _FiveValueEnv(*gymnax.make(env_name))
    train_globals["ClipAction"] = lambda inner: clip(inner, low=low, high=high)
    return types.SimpleNamespace(**names)


class PeerTraining:
    """PureJaxRL's CartPole `train(rng)` at `num_envs`, jitted whole (with seeds, the jit-of-vmap
    its README shows: `jax.jit(jax.vmap(make_train(config)))(keys)`) and lowered once, timed as
    the side by side times it: `first_call_s` compiles it afresh (from the persistent cache after
    the first) and times that executable's first call, as each lab run compiles its chunk and its
    `sps` includes that executable's first calls."""

    def __init__(self, module, num_envs: int, num_seeds: int, total_timesteps: int):
        self.train = module.make_train({**CARTPOLE, "NUM_ENVS": num_envs, "TOTAL_TIMESTEPS": total_timesteps})
        self.updates = total_timesteps // (num_envs * CARTPOLE["NUM_STEPS"])
        self.steps = num_seeds * self.updates * num_envs * CARTPOLE["NUM_STEPS"]
        self.key = jax.random.split(jax.random.PRNGKey(0), num_seeds) if num_seeds > 1 else jax.random.PRNGKey(0)
        self.lowered = jax.jit(jax.vmap(self.train) if num_seeds > 1 else self.train).lower(self.key)
        t0 = time.perf_counter()
        self.program = self.lowered.compile()
        self.compile_s = time.perf_counter() - t0

    def first_call_s(self) -> float:
        compiled = self.lowered.compile()
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(self.key))
        return time.perf_counter() - t0
