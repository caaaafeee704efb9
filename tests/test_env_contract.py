"""The env contract checked (ppo_lab/envs/contract.py): docs/envs.md's corridor keeps it, traced
and run; envs that break it are named member by member, every breach in one message."""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import pytest

from conftest import write_docs_env
from ppo_lab.envs.contract import EnvContractError, check_env


@pytest.fixture
def corridor(tmp_path, monkeypatch):
    """The page's corridor module, imported from a folder of its own (dropped after)."""
    monkeypatch.syspath_prepend(str(write_docs_env(tmp_path)))
    from my_envs import corridor
    yield corridor
    for name in ("my_envs", "my_envs.corridor", "my_envs.corridor_check"):
        sys.modules.pop(name, None)


def _breaches(env, params, **kw) -> list[str]:
    with pytest.raises(EnvContractError) as err:
        check_env(env, params, name="env=mine", **kw)
    assert str(err.value).startswith("env=mine breaks the env contract (ppo_lab/envs/base.py, docs/envs.md):\n  - ")
    return err.value.problems


def test_the_docs_corridor_keeps_the_contract_traced_and_run(corridor):
    env, params = corridor.build({"length": 4, "max_steps": 8}, {"step_cost": 0.1})
    check_env(env, params)  # traced: nothing compiles
    check_env(env, params, concrete=True, render=True)  # run, and 4 random steps drawn


def test_every_breach_is_named_with_what_was_expected(corridor):
    class Broken(corridor.Corridor):
        def step(self, key, state, action, params=None):
            obs, state, reward, terminated, truncated, info = super().step(key, state, action, params)
            state = state.replace(position=state.position.astype(jnp.float32))  # not reset's dtype
            info = {**info, "metrics": {"reward/arrived": jnp.ones(3)}}
            return obs.astype(jnp.int32), state, jnp.stack([reward, reward]), terminated.astype(jnp.float32), truncated, info

    env, params = Broken(4), corridor.EnvParams(max_steps_in_episode=8)
    problems = _breaches(env, params)
    expected = {
        "step's obs: shape (4,) int32 per env; expected shape (4,) float32, as observation_space says",
        "step's state: .position () int32 after reset, () float32 after step; expected each leaf as reset gives it "
        "(lax.scan carries it)",
        "step's reward: shape (2,) float32 per env; expected shape () float: one reward per env",
        "step's terminated: shape () float32 per env; expected shape () bool: one per env",
        "step's info['metrics']['reward/arrived']: shape (3,) float32 per env; expected shape () number: one per env",
    }
    assert set(problems) == expected, problems


def test_an_env_of_another_api_or_params_that_are_no_pytree(corridor):
    class FiveValues(corridor.Corridor):
        def step(self, key, state, action, params=None):
            return super().step(key, state, action, params)[:5]  # gymnax 0.0.x's step

    assert _breaches(FiveValues(4), corridor.EnvParams()) == [
        "step(key, state, action, params): 5 values; expected 6 values: obs, state, reward, terminated, truncated, "
        "info (gymnax 1.0)"]

    class Params:  # a plain object: JAX sees one leaf
        max_steps_in_episode = 8

    [problem, *_] = _breaches(corridor.Corridor(4), Params())
    assert problem.startswith("params: a Params that JAX sees as one leaf, not a pytree; expected a pytree")

    class NotAnEnv:
        pass

    assert _breaches(NotAnEnv(), None) == ["the env's class: NotAnEnv, not derived from ppo_lab.envs.base.Env; "
                                           "expected a class deriving from Env (with gymnax's Environment for a JAX env)"]


def test_an_env_whose_code_fails_under_jit_says_where(corridor):
    class Raises(corridor.Corridor):
        def reset_env(self, key, params):
            if jax.random.uniform(key) > 0.5:  # Python control flow on a traced value
                pass
            return super().reset_env(key, params)

    [problem] = _breaches(Raises(4), corridor.EnvParams())
    assert problem.startswith("reset(key, params): raised TracerBoolConversionError") and problem.endswith(
        "expected it to run under jit and vmap")
