"""The lab as a library: what a non-editable install holds and finds. A wheel built from the tree
ships every config group of conf/ inside the package (ppo_lab/conf, a link in the checkout that
the build resolves), never a machine's conf/local/ values, and the Hydra plugins; installed
alone, the lab finds its config groups there and `ppo-lab train` composes them from any folder.
(The whole walk on an install in a fresh virtualenv: tests/test_project.py with PPO_LAB_COMMAND.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT
from ppo_lab import config_keys

SOURCES = ("pyproject.toml", "README.md", "conf", "ppo_lab", "hydra_plugins")


def test_the_config_groups_are_found_through_the_package_in_a_checkout():
    assert (ROOT / "ppo_lab" / "conf").is_symlink() and os.readlink(ROOT / "ppo_lab" / "conf") == "../conf"
    assert config_keys.CONF_DIR == ROOT / "conf"  # the folder one edits, resolved through the link


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The lab's wheel, built from a copy of the tree (a conf/local/default.yaml of the machine's
    in it), installed without its dependencies into a folder of its own."""
    tmp = tmp_path_factory.mktemp("install")
    tree = tmp / "tree"
    tree.mkdir()
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tree / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy(source, tree / name)
    (tree / "conf" / "local" / "default.yaml").write_text("slurm: {account: a-secret-project}\n")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp / "wheel"), str(tree)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = (tmp / "wheel").glob("ppo_lab-*.whl")
    target = tmp / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    (target / "wheel.names").write_text("\n".join(zipfile.ZipFile(wheel).namelist()))
    return target


def test_the_wheel_ships_every_config_group_and_the_plugins_and_no_local_values(installed):
    names = set((installed / "wheel.names").read_text().splitlines())
    groups = {f"ppo_lab/conf/{p.relative_to(ROOT / 'conf').as_posix()}" for p in (ROOT / "conf").rglob("*.yaml")
              if p.parent.name != "local"}
    assert len(groups) > 60 and groups <= names, sorted(groups - names)[:10]
    assert not [n for n in names if n.startswith("ppo_lab/conf/local/")]
    assert {"hydra_plugins/ppo_lab_launchers/__init__.py", "hydra_plugins/ppo_lab_optuna/__init__.py"} <= names
    assert (installed / "ppo_lab" / "conf").is_dir() and not (installed / "ppo_lab" / "conf").is_symlink()


def test_the_installed_lab_composes_its_shipped_groups_from_any_folder(installed, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(installed)}  # the install first, the checkout nowhere
    where = subprocess.run(
        [sys.executable, "-P", "-c", "import hydra_plugins.ppo_lab_launchers as p; from ppo_lab import config_keys as k; "
                                     "print(k.CONF_DIR); print(p.__file__)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert where.returncode == 0, where.stderr[-3000:]
    conf_dir, plugin = where.stdout.split()
    assert conf_dir == str(installed / "ppo_lab" / "conf") and plugin.startswith(str(installed))
    composed = subprocess.run([sys.executable, "-P", "-m", "ppo_lab.cli", "train", "experiment=cartpole", "--cfg", "job"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert composed.returncode == 0, composed.stderr[-3000:]
    assert "gymnax_id: CartPole-v1" in composed.stdout and "total_timesteps: 500000" in composed.stdout
    assert not (tmp_path / "outputs").exists()  # --cfg trains nothing
