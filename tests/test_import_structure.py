"""The package's import graph has no circle, its units import only downwards, the jax-free layers
stay jax-free, and code named by a string is loaded in one place."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ppo_lab"

def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the ppo_lab modules it imports, anywhere in the file (functions included).

    `from pkg import name` is an edge to `pkg.name` when that is a module, else to `pkg`.
    Importing a submodule is not counted as an edge to its parent package (Python runs the
    parent's __init__ first, but counting it would make every re-exporting package a circle)."""
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        is_package = path.name == "__init__.py"
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name in files}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in node.names:
                    target = f"{base}.{alias.name}"
                    if target in files:
                        edges.add(target)
                    elif base in files:
                        edges.add(base)
        edges.discard(name)
        graph[name] = edges
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_graph_sees_function_level_imports():
    graph = import_graph()
    assert "ppo_lab.analysis.sweep_plots" in graph["ppo_lab.analysis.aggregate"]
    assert "ppo_lab.rundir.metrics" in graph["ppo_lab.rundir"]
    # ast.walk sees an import wherever it is written: each command's module is imported in a function.
    assert "ppo_lab.analysis.watch" in graph["ppo_lab.cli"]


def test_find_cycles_finds_a_circle():
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    cycles = find_cycles(import_graph())
    assert not cycles, "import circles under ppo_lab/: " + "; ".join(" <-> ".join(c) for c in cycles)


# The package's units (each folder directly under ppo_lab/, each module at its top), in the
# order data flows: a unit imports only units after it in this list (docs/architecture.md).
LAYERS = [
    ["cli"],
    ["pages"],  # the docs pages' figures, rendered from committed records by every tool below
    ["bench"],
    ["launching"],
    ["experiments"],  # an experiment's protocols and reports: the core below imports none of them
    ["run"],
    ["envs", "networks", "ppo"],
    ["hardware"],
    ["jax_private"],  # the private JAX symbols the lab needs, in one module (it says why)
    ["analysis"],  # offline tools over run dirs: aggregate, compare, plots, watch, zoo table, rliable report
    ["judging"],  # what a run says about itself (closing lines, health, objective, headline), offline tools too
    ["estimators"],  # every statistic, once: below both
    ["rundir"],
    ["resolvers"],
    ["config"],
    ["config_keys"],
    ["parts"],
    ["host_cpu"],
    ["errors"],
    ["ppo_lab"],  # the package itself: its version
]
RANK = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}
# The one module that loads code named by a string (a config part's `_target_`), and why:
# importing gymnax or Jumanji starts XLA's backend before the hardware flags are set.
LATE_LOADER = PACKAGE / "parts.py"


def unit_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "ppo_lab"


def unit_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    units: dict[str, set[str]] = {}
    for module, targets in graph.items():
        units.setdefault(unit_of(module), set()).update(unit_of(t) for t in targets if unit_of(t) != unit_of(module))
    return units


def test_every_unit_has_a_layer():
    assert set(unit_graph(import_graph())) <= set(RANK), sorted(set(unit_graph(import_graph())) - set(RANK))


def test_units_form_no_cycle_and_import_only_downwards():
    units = unit_graph(import_graph())
    assert not find_cycles(units), find_cycles(units)
    upward = [f"{a} -> {b}" for a, targets in units.items() for b in targets if RANK[b] <= RANK[a]]
    assert not upward, "imports against the flow (docs/architecture.md): " + "; ".join(sorted(upward))


def test_layer_check_catches_an_upward_import():
    assert unit_graph({"ppo_lab.rundir.x": {"ppo_lab.run.y"}, "ppo_lab.run.y": set()}) == {"rundir": {"run"}, "run": set()}
    assert RANK["run"] < RANK["rundir"]
    # The generic core sits below the experiments: an import of one from run/, ppo/, networks,
    # analysis/ or rundir/ is against the flow.
    assert all(RANK["experiments"] < RANK[core] for core in ("run", "ppo", "networks", "envs", "analysis", "rundir"))
    # What runs use sits below the offline tools, and the estimators below both.
    assert RANK["analysis"] < RANK["judging"] < RANK["estimators"]


def test_modules_are_loaded_by_name_in_one_place_only():
    """Counted as text, comments included: `import_module` / `__import__` nowhere but the late
    loader, and the default precision's name spelled in one Python file."""
    by_name = [p for p in PACKAGE.rglob("*.py") if "import_module" in p.read_text() or "__import__" in p.read_text()]
    assert set(by_name) <= {LATE_LOADER}, by_name
    precision = [p for p in PACKAGE.rglob("*.py") if '"fp32"' in p.read_text()]
    assert len(precision) <= 1, precision


def test_every_part_yaml_names_its_target():
    import re

    for group in ("env", "network", "logger"):
        files = sorted((ROOT / "conf" / group).glob("*.yaml"))
        assert files
        missing = [f.name for f in files if not re.search(r"^\s*_target_:", f.read_text(), re.M)]
        assert not missing, f"conf/{group}: no _target_ line in {missing}"


def test_validating_every_env_starts_no_backend():
    """Validation runs every env's `check` before the hardware flags are applied: no check may
    load gymnax or Jumanji (importing either starts XLA's backend, and then hardware=... and
    host_devices are silently ignored)."""
    code = (
        "import sys\n"
        "from hydra import compose, initialize_config_dir\n"
        "from omegaconf import OmegaConf\n"
        "import ppo_lab.run.entry\n"
        "from ppo_lab.config import validate\n"
        "from ppo_lab.config_keys import group_options\n"
        "from jax._src import xla_bridge\n"
        f"with initialize_config_dir(config_dir={str(ROOT / 'conf')!r}, version_base='1.3'):\n"
        "    for env in group_options('env'):\n"
        "        reward = 'ground_truth' if env == 'foraging' else 'default'\n"
        "        validate(OmegaConf.to_container(compose('config', [f'env={env}', f'reward={reward}']), resolve=True))\n"
        "loaded = sorted(m for m in ('gymnax', 'jumanji', 'brax', 'envpool', 'gymnasium') if m in sys.modules)\n"
        "assert not loaded and not xla_bridge.backends_are_initialized(), loaded\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_rundir_judging_and_analysis_import_no_jax():
    code = "import ppo_lab.rundir, ppo_lab.analysis, ppo_lab.analysis.sweep, ppo_lab.analysis.aggregate, " \
           "ppo_lab.judging.closing, ppo_lab.judging.objective, ppo_lab.estimators, " \
           "ppo_lab.rundir.slurm_jobs, sys; assert 'jax' not in sys.modules, 'jax imported'"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_run_files_are_parsed_only_in_the_rundir_layer():
    """CSV (and JSON run files) have one reader and writer: ppo_lab/rundir/."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent.name == "rundir":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if "csv" in names:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} imports csv")
            if isinstance(node, ast.Attribute) and node.attr in ("read_csv", "DictReader", "replace") and \
                    isinstance(node.value, ast.Name) and node.value.id in ("pd", "pandas", "csv", "os"):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value.id}.{node.attr}")
    assert not offenders, "run files read or renamed outside ppo_lab/rundir/: " + "; ".join(offenders)
