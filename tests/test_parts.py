"""Config parts (`_target_`) that cannot be loaded: an error naming the part and the missing
package, before anything compiles or is written; never a warning and a run without them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ppo_lab import parts
from ppo_lab.errors import ConfigError

from conftest import TINY, launch

MISSING = "ppo_lab_test_absent_package"


@pytest.fixture
def part_needing_a_missing_package(tmp_path, monkeypatch):
    """A module `needs_absent` whose import fails on a package that is not installed."""
    (tmp_path / "needs_absent.py").write_text(f"import {MISSING}\n\ndef build(*a, **k):\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_missing_package_is_named_with_the_part(part_needing_a_missing_package):
    with pytest.raises(parts.PartError) as err:
        parts.load("env._target_", "needs_absent.build")
    assert isinstance(err.value, ConfigError) and err.value.key == "env._target_"
    assert f"'{MISSING}'" in str(err.value) and "env._target_='needs_absent.build'" in str(err.value)


def test_a_wrong_path_inside_the_package_says_so():
    with pytest.raises(parts.PartError, match=r"module ppo_lab\.envs has \(it was found, .*, but has no 'nowhere'\)"):
        parts.load("env._target_", "ppo_lab.envs.nowhere.build")
    with pytest.raises(parts.PartError, match="dotted path"):
        parts.load("network._target_", "MLPTorso")


def test_known_packages_get_their_install_hint():
    assert "pip install" in parts.INSTALL_HINTS["jumanji"]


def test_a_users_missing_module_names_the_folders_searched_not_a_package_to_install(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path / "gone"))
    with pytest.raises(parts.PartError) as err:
        parts.load("env._target_", "my_absent_envs.corridor.build")
    message = str(err.value)
    assert "no module named 'my_absent_envs'" in message and f"{tmp_path / 'gone'} (no such folder)" in message
    assert "pip install" not in message


def test_a_module_that_loads_without_the_name_says_so_with_its_close_names(tmp_path, monkeypatch):
    """`my_envs.keydoor.biuld`: the module was found, the name not; never "no module named"."""
    (tmp_path / "my_keydoor_envs").mkdir()
    (tmp_path / "my_keydoor_envs" / "__init__.py").write_text("")
    (tmp_path / "my_keydoor_envs" / "keydoor.py").write_text("def build(*a, **k):\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(parts.PartError) as err:
        parts.load("env._target_", "my_keydoor_envs.keydoor.biuld")
    message = str(err.value)
    assert f"module my_keydoor_envs.keydoor has (it was found, {tmp_path / 'my_keydoor_envs' / 'keydoor.py'}, " \
           "but has no 'biuld'); did you mean my_keydoor_envs.keydoor.build?" in message
    assert "no module named" not in message and "PYTHONPATH" not in message
    with pytest.raises(parts.PartError, match=r"has no 'keydor'\); did you mean my_keydoor_envs\.keydoor\?"):
        parts.load("env._target_", "my_keydoor_envs.keydor.build")  # a package's submodules are its names too


@pytest.mark.parametrize("override, key", [
    ("env._target_=needs_absent.build", "env._target_"),
    ("+env.evaluations={extra: needs_absent.build}", "env.evaluations.extra"),
    ("network._target_=needs_absent.build", "network._target_"),
])
def test_launch_exits_2_naming_the_part_before_compiling(part_needing_a_missing_package, tmp_path, override, key):
    run_dir = tmp_path / "run"
    env = {"PYTHONPATH": os.pathsep.join([str(part_needing_a_missing_package), os.environ.get("PYTHONPATH", "")])}
    proc = launch([*TINY, override], run_dir, check=False, timeout=180, env={**os.environ, **env})
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"error: invalid config: {key}=" in proc.stderr and MISSING in proc.stderr
    assert "compiled" not in proc.stdout + proc.stderr
    assert not (run_dir / "metrics.csv").exists() and not (run_dir / "config.yaml").exists()


@pytest.fixture
def counting_package(tmp_path, monkeypatch):
    """A package `lazy_probe` with a submodule `heavy` that counts how often its code runs."""
    pkg = tmp_path / "lazy_probe"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("runs = []\n")
    (pkg / "heavy.py").write_text("import lazy_probe\nlazy_probe.runs.append(1)\nVALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield pkg
    for name in ("lazy_probe.heavy", "lazy_probe"):
        sys.modules.pop(name, None)


def test_a_lazy_module_runs_on_its_first_name_and_only_once(counting_package):
    heavy = parts.lazy_module("lazy_probe.heavy")
    import lazy_probe
    import lazy_probe.heavy as again  # an import elsewhere: the same module, still not run
    from lazy_probe import heavy as bound

    assert again is heavy and bound is heavy and lazy_probe.runs == [] and not parts.loaded("lazy_probe.heavy")
    assert heavy.VALUE == 42 and lazy_probe.runs == [1]
    assert heavy.VALUE == 42 and type(heavy).__name__ == "module" and lazy_probe.runs == [1]
    assert parts.loaded("lazy_probe.heavy") and parts.loaded("lazy_probe") and not parts.loaded(MISSING)
    assert parts.lazy_module("lazy_probe.heavy") is heavy


def test_a_lazy_module_that_is_not_installed_fails_at_once():
    with pytest.raises(ModuleNotFoundError, match=MISSING):
        parts.lazy_module(MISSING)


def test_gymnax_loads_without_its_renderers_plotting_stack():
    """Every training process imports gymnax; seaborn, pyplot and scipy.stats (1.3 s of its
    2.5 s import) wait until something uses them, and then work (a gymnax renderer's palette)."""
    code = ("import sys\n"
            "from ppo_lab.envs.gymnax_api import gymnax\n"
            "import ppo_lab.run.entry\n"
            "heavy = ('pandas', 'scipy.stats', 'seaborn', 'matplotlib.pyplot')\n"
            "loaded = [m for m in heavy if type(sys.modules.get(m)).__name__ == 'module']\n"
            "assert not loaded, loaded\n"
            "import ppo_lab.analysis.figures as figures, matplotlib\n"
            "assert matplotlib.get_backend().lower() == 'agg', matplotlib.get_backend()\n"
            "import seaborn\n"
            "assert len(seaborn.color_palette('cubehelix', 3)) == 3 and 'pandas' in sys.modules\n")
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}  # the lab's own choice: Agg
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
