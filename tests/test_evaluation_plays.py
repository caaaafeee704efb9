"""The final evaluation plays every env twice from the same starts, in one compiled program:
sampled from the policy (`<name>_sampled`, gymnax-blines' protocol) and greedy (`<name>_greedy`);
`episode_return` / `episode_length` are the play `eval.deterministic` names."""

from __future__ import annotations

import logging

import jax
import jax.numpy as jnp
import pytest

from conftest import TINY, run_config
from ppo_lab.run.build import build_env_and_network
from ppo_lab.run.evaluate import evaluate_seeds

pytestmark = pytest.mark.timeout(300)

EPISODES = 64
PLAYED = {"episode_return", "episode_length", "episode_return_sampled", "episode_length_sampled",
          "episode_return_greedy", "episode_length_greedy"}


def uniform_cartpole(deterministic: bool):
    """CartPole with a uniform policy: its policy head zeroed, so both logits are 0 in every
    state: sampled, a coin toss each step; greedy, the argmax's first action (push left) always."""
    cfg = run_config([*TINY, f"eval.episodes={EPISODES}", "eval.max_steps=500", f"eval.deterministic={deterministic}"])
    env, env_params, network, _ = build_env_and_network(cfg)
    obs, _ = env.reset(jax.random.PRNGKey(0), env_params)
    params = network.init_params(jax.random.PRNGKey(1), obs[None].astype(jnp.float32))
    params = jax.tree_util.tree_map_with_path(
        lambda path, x: jnp.zeros_like(x) if "policy_head" in jax.tree_util.keystr(path) else x, params)
    return cfg, env, env_params, network, params


@pytest.mark.parametrize("deterministic", [True, False])
def test_both_plays_are_reported_and_the_headline_is_the_named_one(deterministic):
    cfg, env, env_params, network, params = uniform_cartpole(deterministic)
    result = evaluate_seeds(cfg, env, env_params, network, [params])
    assert set(result) == PLAYED and all(len(v) == 1 for v in result.values())
    play = "greedy" if deterministic else "sampled"
    assert result["episode_return"] == result[f"episode_return_{play}"]
    assert result["episode_length"] == result[f"episode_length_{play}"]
    # By hand: pushed left every step, CartPole falls within 8 to 10 steps from any start (its
    # state starts within +-0.05); a coin toss each step is a random policy: 22.1 mean return
    # over 10,000 episodes (conf/env/gymnax.yaml), a standard error of about 1.5 over 64.
    assert 8 <= result["episode_return_greedy"][0] <= 10
    assert 17 < result["episode_return_sampled"][0] < 28
    assert result["episode_return_sampled"] == result["episode_length_sampled"]  # +1 per step


def test_the_two_plays_share_one_compiled_program(caplog):
    cfg, env, env_params, network, params = uniform_cartpole(True)
    caplog.set_level(logging.WARNING)
    with jax.log_compiles():
        evaluate_seeds(cfg, env, env_params, network, [params, params])
    # Traced once (a program compiled, or read from the compilation cache, once), for two seeds x two plays.
    traced = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Finished tracing episodes")]
    assert len(traced) == 1, traced
