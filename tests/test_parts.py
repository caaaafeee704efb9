"""Config parts (`_target_`) that cannot be loaded: an error naming the part and the missing
package, before anything compiles or is written; never a warning and a run without them."""

from __future__ import annotations

import os
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
    with pytest.raises(parts.PartError, match=r"no module ppo_lab\.envs\.nowhere"):
        parts.load("env._target_", "ppo_lab.envs.nowhere.build")
    with pytest.raises(parts.PartError, match="dotted path"):
        parts.load("network._target_", "MLPTorso")


def test_known_packages_get_their_install_hint():
    assert "pip install" in parts.INSTALL_HINTS["jumanji"]


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
