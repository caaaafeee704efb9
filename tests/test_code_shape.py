"""The shape of the code (issue #30's bar): short functions, no probing of envs and networks,
every module documented in docs/architecture.md."""

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
