"""The one place where ppo_lab loads code named by a string: the `_target_` of a config part.

Envs, their config checks, network torsos, loggers, extra evaluations and an env's own
criteria for the analysis are chosen by a dotted path in their config group
(`conf/env/*.yaml`, `conf/network/*.yaml`, `conf/logger/*.yaml`) and loaded here through
Hydra (`hydra.utils.get_object`), so adding one is a module plus a YAML file, with no table to
edit.

Why by string at all, and why late: importing gymnax or Jumanji starts XLA's backend, and the
device flags of `hardware` (`ppo_lab.hardware.start_jax`) must be set before that. The env
adapters import them at their top, so they may be loaded only once the run has started jax;
a string in the config is what lets everything else import at its top.

A part that fails to load is a `PartError` (a ConfigError: exit 2, before anything compiles)
naming the part, its path, and what is missing: a name a module that loaded does not have (the
module, where it was found, its names that are close: `my_envs.keydoor.biuld`), or a package:
with the extra that brings it for the lab's own optional packages (`INSTALL_HINTS`), else with
the folders Python searched.

A user's own part lives outside the lab (docs/envs.md, docs/project.md): in a project folder
beside its conf/, which `use_project_folder` puts on the path (after the installed packages),
or in any folder on PYTHONPATH. `import_dirs` says which folder each of a run's parts was imported from (manifest.json
records it), and `use_import_dirs` puts those folders back on the path when a later command
(evaluate, reproduce, replay) loads the run, from any working folder, without that PYTHONPATH.

Also here, as the other way of loading a module by name: `lazy_module`, a module whose code
runs on first use, for a heavy import written in a dependency's own code that most processes
never use (gymnax's renderers' plotting stack, envs/gymnax_api.py). The lab's own late imports
are plain imports inside the function that needs them.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import logging
import os
import pkgutil
import sys
import types
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable

from hydra.utils import get_object

from ppo_lab.errors import ConfigError

# Packages some parts need that a plain `pip install -e .` may not bring, and how to get them.
INSTALL_HINTS = {  # the extras of pyproject.toml
    "jumanji": "pip install -e '.[jumanji]'",
    "brax": "pip install -e '.[brax]'",
    "envpool": "pip install -e '.[envpool]'",
    "gymnasium": "pip install -e '.[gymnasium]'",
    "mlflow": "pip install -e '.[mlflow]'",
    "wandb": "pip install wandb",
    "tensorboardX": "pip install -e '.[tensorboard]'",
    "tensorboard": "pip install -e '.[tensorboard]'",
    "optuna": "pip install -e '.[optuna]'",
}


LAB_PACKAGE = __name__.split(".")[0]


class PartError(ConfigError):
    """A configured part (`key` = its config key, e.g. `env._target_`) could not be loaded."""


def _missing_module(exc: BaseException) -> str | None:
    while exc is not None:
        if isinstance(exc, ModuleNotFoundError) and exc.name:
            return exc.name
        exc = exc.__cause__ or exc.__context__
    return None


@contextmanager
def _quiet(logger: logging.Logger):
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def load(key: str, path: Any) -> Callable:
    """The object at dotted `path` (a function or class), configured under `key`."""
    if not isinstance(path, str) or "." not in path:
        raise PartError(key, path, "a dotted path to a function or class, e.g. ppo_lab.envs.foraging.world.build")
    try:
        with _quiet(logging.getLogger("hydra.utils")):  # Hydra logs the failure; the PartError says it once
            return get_object(path)
    except Exception as exc:  # noqa: BLE001 - Hydra wraps the import error: unwrap it for the user
        missing = _missing_module(exc)
        absent = _absent_name(path, missing)
        if absent:
            raise PartError(key, path, absent) from exc
        if missing and missing.split(".")[0] == LAB_PACKAGE:
            raise PartError(key, path, f"a path inside {LAB_PACKAGE} that exists (no module {missing})") from exc
        if missing and missing.split(".")[0] in INSTALL_HINTS:
            top = missing.split(".")[0]
            raise PartError(key, path, f"an importable part: it needs the package '{top}', "
                                       f"which is not installed ({INSTALL_HINTS[top]})") from exc
        if missing:
            raise PartError(key, path, not_found(missing)) from exc
        raise PartError(key, path, f"an importable function or class ({type(exc).__name__}: {exc})") from exc


def _absent_name(path: str, missing: str | None) -> str | None:
    """What to expect when the part's module loaded but a name in it did not (Python reports the
    name as a module it could not find, `missing`, a prefix of `path`): the module, where it
    was found (a module of one's own named like an installed one is found there) and its close
    names (a package's submodules among them). None when `missing` is no name inside a loaded module."""
    parent, _, name = (missing or "").rpartition(".")
    module = sys.modules.get(parent) if parent else None
    if module is None or not f"{path}.".startswith(f"{missing}."):
        return None
    names = {n for n in dir(module) if not n.startswith("_")}
    if getattr(module, "__path__", None):  # a package: its submodules too
        names |= {m.name for m in pkgutil.iter_modules(module.__path__)}
    close = difflib.get_close_matches(name, sorted(names), n=3, cutoff=0.6)
    hint = (f"did you mean {' or '.join(f'{parent}.{c}' for c in close)}?" if close
            else f"it has {', '.join(sorted(names)[:20]) or 'no public names'}")
    where = getattr(module, "__file__", None) or ", ".join(getattr(module, "__path__", []))
    return f"a name that module {parent} has (it was found, {where}, but has no '{name}'); {hint}"


def not_found(module: str) -> str:
    """What a missing module that is no optional package of the lab's is said as: the module
    and the folders searched (a name is never guessed into a `pip install`: it could be
    another project's)."""
    top = module.split(".")[0]
    folders = [os.path.abspath(entry) for entry in sys.path if not entry.endswith(".zip")]
    searched = [folder if os.path.isdir(folder) else f"{folder} (no such folder)" for folder in folders]
    return (f"an importable part: no module named '{module}' was found; searched: {', '.join(searched)}. "
            f"Work from the project folder that holds '{top}' beside its conf/ (docs/project.md), put that folder "
            f"on PYTHONPATH, or install the package that provides it")


def import_dirs(paths: Iterable[str | None]) -> dict[str, str]:
    """For the dotted paths of loaded parts outside the lab: each top-level module -> the folder
    it was imported from (the entry of sys.path it was found in). Parts of the lab, and paths
    whose module is not loaded, are left out."""
    out = {}
    for path in paths:
        top = path.split(".")[0] if isinstance(path, str) else None
        module = sys.modules.get(top) if top and top != LAB_PACKAGE else None
        spec = getattr(module, "__spec__", None)
        if spec is None:
            continue
        if spec.submodule_search_locations:  # a package (a namespace package has no origin file)
            folder = Path(list(spec.submodule_search_locations)[0]).parent
        elif spec.origin and spec.has_location:  # a module of its own
            folder = Path(spec.origin).parent
        else:
            continue
        out[top] = str(folder.resolve())
    return out


def use_import_dirs(folders: Iterable[str]) -> None:
    """Put `folders` on Python's path where PYTHONPATH would (after the script's own folder),
    each once: the folders a run's own parts were imported from when it trained."""
    added = False
    for folder in folders:
        folder = str(folder)
        if folder not in sys.path:
            sys.path.insert(1 if sys.path else 0, folder)
            added = True
    if added:
        importlib.invalidate_caches()


def use_project_folder(folder) -> None:
    """A project's own folder (the one that holds its conf/) on Python's path after every
    installed package, once: its modules import without PYTHONPATH, and none of them can shadow
    an installed module or the lab (one named like an installed module is not found; the error
    says where that name was found instead)."""
    folder = str(folder)
    if folder not in sys.path:
        sys.path.append(folder)
        importlib.invalidate_caches()


def call(key: str, path: Any, *args, **kwargs):
    """Load the part at `path` and call it."""
    return load(key, path)(*args, **kwargs)


class _LazyModule(types.ModuleType):
    """A module whose code has not run yet. Only a name it lacks runs it (`__getattr__`, not
    `__getattribute__` as importlib's LazyLoader does: `import x` reads `x.__spec__` each time,
    which would load it at the next `import` anywhere)."""

    def __getattr__(self, name):
        self.__class__ = types.ModuleType  # from here on an ordinary module, loaded once
        self.__spec__.loader.exec_module(self)
        return getattr(self, name)


def loaded(name: str) -> bool:
    """Module `name` has been imported and run (a `lazy_module` not used yet has not)."""
    return name in sys.modules and not isinstance(sys.modules[name], _LazyModule)


def lazy_module(name: str):
    """Module `name`, in `sys.modules` now but run on first use (the first name read from it):
    for a dependency's heavy import that a process seldom uses. `import name` anywhere later
    gets it, still unloaded. Already imported: that module. Not installed: ModuleNotFoundError
    now, as `import` would."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)  # imports the parent package (cheap for those used here)
    if spec is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    module = importlib.util.module_from_spec(spec)
    module.__class__ = _LazyModule
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:  # what `import parent.child` binds, so `from parent import child` finds it
        setattr(sys.modules[parent], child, module)
    return module
