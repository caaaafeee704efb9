"""The shape of the code: short functions, no probing of envs and networks."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ppo_lab"
MAX_FUNCTION_LINES = 80


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def long_functions(path: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """Functions of `path` longer than `limit` lines, counting the functions nested in them
    (a function's lines run from its `def` (decorators included) to its last line)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            length = node.end_lineno - first + 1
            if length > limit:
                out.append(f"{path.name}:{node.lineno} {node.name} ({length} lines)")
    return out


def test_no_function_in_the_package_is_longer_than_80_lines():
    found = [f for path in modules() for f in long_functions(path)]
    assert not found, "functions over 80 lines (nested ones counted): " + "; ".join(found)


def test_the_length_rule_counts_nested_functions(tmp_path):
    inner = "\n".join(f"        x{i} = {i}" for i in range(80))
    source = tmp_path / "m.py"
    source.write_text(f"def outer():\n    def inner():\n{inner}\n    return inner\n")
    assert [f.split()[1] for f in long_functions(source)] == ["outer", "inner"]
    assert [f.split()[1] for f in long_functions(source, limit=82)] == ["outer"]


# getattr/hasattr in ppo_lab/ppo and ppo_lab/run: envs and networks are probed nowhere (their
# optional members have defaults in envs/base.py `Env`, the network is always `ActorCritic`).
# The rule: a probe there is allowed only on one of these objects, none an env or a network.
NOT_ENV_OR_NETWORK = {
    "space": "a gymnax action space (ppo/policies.py: Discrete has `n`, Box does not)",
    "self.logger": "a user's logger object (run/recorders: `abandon` is optional)",
    "exc": "an exception (run/recorders/reachability.py: urllib's `reason`)",
    "model_input": "an MLflow pyfunc input (a DataFrame or an array)",
    "jax.config": "jax's own options, read by name for the reproducibility record (run/manifest.py)",
}


def probes(path: Path) -> list[tuple[int, str]]:
    """(line, first argument) of each getattr(/hasattr( call in `path`."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            out.append((node.lineno, ast.unparse(node.args[0]) if node.args else ""))
    return out


def test_no_env_or_network_is_probed_in_ppo_and_run():
    found = [f"{path.relative_to(ROOT)}:{line} {arg}" for unit in ("ppo", "run") for path in sorted((PACKAGE / unit).rglob("*.py"))
             for line, arg in probes(path) if arg not in NOT_ENV_OR_NETWORK]
    assert not found, "getattr/hasattr on an object not known to be neither env nor network: " + "; ".join(found)


def test_every_env_derives_from_the_contract():
    from ppo_lab.envs.base import Env
    from ppo_lab.envs.foraging.world import Foraging
    from ppo_lab.envs.gymnax_envs import GymnaxEnv
    from ppo_lab.envs.host_batched_env import HostBatchedEnv
    from ppo_lab.envs.rare_actions.game import RareActions

    for cls in (Foraging, GymnaxEnv, HostBatchedEnv, RareActions):
        assert issubclass(cls, Env), cls
    assert RareActions(5, 3).has_action_mask and not Foraging().has_action_mask
    assert HostBatchedEnv.batched and HostBatchedEnv.lives_outside_jax and not Foraging().batched


def test_the_worked_env_example_in_docs_builds_and_steps(tmp_path, monkeypatch):
    """The page's env, written out of the page into a folder of its own, builds and steps
    through the trainer's rollout helpers; its check imports no jax (nor gymnax, flax)."""
    import sys

    import jax

    from conftest import write_docs_env
    from ppo_lab.envs.base import Env
    from ppo_lab.ppo.rollout import batched_mask, batched_reset, batched_step

    folder = write_docs_env(tmp_path)
    tree = ast.parse((folder / "my_envs" / "corridor_check.py").read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not {m.split(".")[0] for m in imported} & {"jax", "gymnax", "flax", "optax", "jumanji", "brax"}, imported
    monkeypatch.syspath_prepend(str(folder))
    from my_envs.corridor import build
    try:
        env, params = build({"length": 4, "max_steps": 8}, {})
        assert isinstance(env, Env) and not env.has_action_mask and env.episode_limit(params) == 8
        assert env.draws_frames  # its render_episode: replay draws it (tests/test_own_env.py)
        assert batched_mask(env, params) is None
        obs, state = batched_reset(env, params, jax.random.PRNGKey(0), 3)
        step = batched_step(env, params, 3)
        for _ in range(3):
            obs, state, reward, terminated, truncated, info = step(jax.random.PRNGKey(1), state, jax.numpy.ones(3, int))
        assert obs.shape == (3, 4) and float(reward.sum()) == 3.0 and bool(terminated.all())
    finally:
        for name in ("my_envs", "my_envs.corridor", "my_envs.corridor_check"):  # this folder's alone
            sys.modules.pop(name, None)
