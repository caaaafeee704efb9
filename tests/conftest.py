"""Shared helpers: tiny configs; a run in-process (`train_run`, Hydra's compose API) or as a
user runs it (`launch`, a separate process: for signals, kills, exit codes, device layouts)."""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import os
import random
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

# The suite's runs are tiny, so XLA's compiles, not their steps, take most of its time: every
# process of the suite (the workers, and the launches they start, which inherit this) compiles
# with most of XLA's optimisations off, about a quarter less CPU time. What a test checks does
# not depend on them, except training compared with numbers recorded from an optimised build
# (the bit-for-bit recordings), which opts back in with the `optimised_xla` fixture.
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "true")

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from ppo_lab import cli
from ppo_lab.config import HardwareConfig, NetworkConfig, read, validate
from ppo_lab.hardware import apply_hardware
from ppo_lab.launching.command_line import refusal
from ppo_lab.run.entry import train
from ppo_lab.run.recorders import make_logger
from ppo_lab.rundir import RunSummary, run_format

ROOT = Path(__file__).resolve().parent.parent
# How long a test waits on a process that does real work (a suite, a peer's training) before
# calling it hung: a guard, not a bound on its time (a busy machine takes many times an idle one's).
HANG_S = 1800

# A CartPole run that compiles and trains in seconds on 2 cores.
TINY = [
    "env=cartpole",
    "ppo.num_envs=4",
    "ppo.num_steps=16",
    "ppo.total_timesteps=2048",
    "ppo.num_minibatches=2",
    "ppo.update_epochs=2",
    "train.chunk_updates=8",
    "eval.episodes=4",
    "eval.max_steps=64",
    "hardware.host_devices=1",
]

# XLA reads its flags once, at import: this test process's JAX runs what TINY asks for (one
# CPU device), so in-process runs (`train_run`) get the devices their config checks for.
# A test that needs another device layout runs launch.py in its own process.
def compose_config(overrides):
    """The config launch.py would run for these overrides (Hydra's compose API)."""
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


apply_hardware(read(HardwareConfig, OmegaConf.to_container(compose_config(["hardware.host_devices=1"]).hardware), "hardware"))


def resolved_config(overrides) -> dict:
    """The config launch.py would run for these overrides, resolved to plain values; a value Hydra
    refuses while composing (the schema types every node) is refused as launch.py says it."""
    try:
        return OmegaConf.to_container(compose_config(overrides), resolve=True)
    except Exception as exc:
        raise refusal(exc, overrides) or exc


def run_config(overrides):
    """The validated config a run of these overrides trains with."""
    return validate(resolved_config(overrides))


def metric_rows(updates, seeds=(0, 1)) -> list[dict]:
    """Rows as a run hands its recorders (one per update and seed); update 2 ended no episode
    (a NaN return, a blank cell in metrics.csv)."""
    return [
        {"update": u, "seed": s, "timesteps": 64 * u, "wall_s": 0.1 * u, "train/entropy": 0.7 - 0.01 * u + s,
         "train/mean_episode_return": float("nan") if u == 2 else 10.0 * u + s, "actions/left": 0.5, "perf/sps": 1000.0}
        for u in updates for s in seeds
    ]


def open_loggers(run_dir: Path, cfg) -> list:
    """The optional loggers `cfg.logger` names, started as a run starts them."""
    return [make_logger(spec, Path(run_dir), cfg) for spec in cfg.logger.values() if spec.target]


def train_run(overrides, run_dir: Path) -> RunSummary:
    """One run in this process, exactly as launch.py runs it; returns its summary."""
    return train(compose_config(overrides), run_dir)


def launch(args, run_dir: Path | None = None, timeout: float = 240, check: bool = True, **popen):
    """Run `python launch.py ARGS` in the repo root; returns the CompletedProcess."""
    cmd = [sys.executable, "launch.py", *args]
    if run_dir is not None:
        cmd.append(f"hydra.run.dir={run_dir}")
    env = {**popen.pop("env", os.environ), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env, **popen)
    if check and proc.returncode != 0:
        raise AssertionError(f"launch.py failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def run_cli(args, capsys) -> subprocess.CompletedProcess:
    """`ppo-lab ARGS` in this process, for the jax-free commands (watch, plots, compare,
    aggregate): the same `main` as the console script, without a process that imports the lab
    again (3 s of a loaded 2-core machine). The console script itself: tests/test_help.py."""
    capsys.readouterr()
    argv0 = sys.argv[0]
    try:
        code = cli.main([str(a) for a in args])
    except SystemExit as exc:  # argparse's errors and --help
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.argv[0] = argv0
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out, err)


@contextmanager
def log_messages(name: str, level: int = logging.NOTSET):
    """The messages that logger `name` (or a child) emits inside the block, as a list; for code
    that runs outside one test (a module fixture), where pytest's caplog does not reach."""
    messages: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    logger = logging.getLogger(name)
    before = logger.level
    logger.addHandler(handler)
    if level:
        logger.setLevel(level)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before)


def start_launch(args, run_dir: Path) -> subprocess.Popen:
    """Start launch.py in the background; its output goes to `<run_dir>.out` (a file, not a
    pipe: an unread pipe fills up and blocks a long run). `proc.output()` reads it."""
    cmd = [sys.executable, "launch.py", *args, f"hydra.run.dir={run_dir}"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log_path = Path(f"{run_dir}.out")
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True, env=env)
    proc.output = log_path.read_text
    return proc


def tee_into(log: Path, run: subprocess.Popen) -> subprocess.Popen:
    """`RUN | tee LOG` as a shell starts it: tee in the run's process group, reading the run's
    stdout (its reading end tee's alone), with Ctrl+C's default action: a suite started in the
    background inherits SIGINT ignored, which tee would keep."""
    tee = subprocess.Popen(["tee", str(log)], stdin=run.stdout, stdout=subprocess.DEVNULL, process_group=run.pid,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    run.stdout.close()
    return tee


def wait_for_rows(proc: subprocess.Popen, run_dir: Path, timeout: float = 120) -> None:
    """Until `start_launch`'s run has written its first chunk's rows (it must not end first)."""
    deadline = time.time() + timeout
    while not (Path(run_dir) / "metrics.csv").exists():
        assert time.time() < deadline and proc.poll() is None, proc.output()[-3000:]
        time.sleep(0.2)


def run_files(run_dir: Path) -> dict[str, bytes]:
    """A run dir's results (config.yaml, metrics.csv, summary.json, checkpoints/) as bytes: what
    a launch that trains nothing must leave as it was."""
    run_dir = Path(run_dir)
    paths = [run_dir / name for name in ("config.yaml", "metrics.csv", "summary.json")] + sorted((run_dir / "checkpoints").glob("*"))
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in paths if p.is_file()}


def free_port() -> int:
    """A local port a server (a JAX coordinator, an MLflow server) can bind a second later.
    Below Linux's ephemeral range (32768 and up), as the lab's SLURM port is: an ephemeral port
    that is free now may be any process's outgoing connection by then (seen: "Failed to add
    port" once in a suite run). Checked on the wildcard address, which a coordinator binds."""
    for port in random.sample(range(20000, 32000), 200):
        with socket.socket(socket.AF_INET6 if socket.has_ipv6 else socket.AF_INET) as s:
            try:
                s.bind(("::" if socket.has_ipv6 else "0.0.0.0", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port in 20000-31999")


def read_rows(run_dir: Path) -> list[dict]:
    with (Path(run_dir) / "metrics.csv").open(newline="") as f:
        return list(csv.DictReader(f))


# docs/envs.md's worked example: each file shown under its path (`my_envs/corridor.py`:).
DOCS_ENV_FILES = ("my_envs/corridor_check.py", "my_envs/corridor.py", "conf/env/corridor.yaml")
# docs/project.md's own files, beside the env.
DOCS_PROJECT_FILES = ("conf/reward/hurry.yaml", "conf/experiment/corridor_small.yaml", "sweeps/corridor_rewards.yaml")


def write_page_files(page: str, names, folder: Path) -> Path:
    """The files a docs page shows, each under its path (`` `conf/env/corridor.yaml`: `` and a
    code block), written into `folder` from the page's own text, so the page cannot drift from
    what works."""
    text = (ROOT / "docs" / page).read_text()
    files = dict(re.findall(r"^`([\w/.]+)`:\n\n```(?:python|yaml)\n(.*?)```", text, re.S | re.M))
    assert set(names) <= set(files), f"docs/{page} shows {sorted(files)}, not {names}"
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(files[name])
    return folder


def write_docs_env(folder: Path) -> Path:
    """docs/envs.md's example env written into `folder` (a user's own folder), laid out as the page lays it out."""
    write_page_files("envs.md", DOCS_ENV_FILES, folder)
    (folder / "my_envs" / "__init__.py").write_text("")  # the page's tree: empty, makes my_envs a package
    return folder


def write_docs_project(folder: Path) -> Path:
    """docs/project.md's project: docs/envs.md's env and the page's own files, in `folder`."""
    return write_page_files("project.md", DOCS_PROJECT_FILES, write_docs_env(folder))


# `ppo-lab` as a user runs it: the lab's command, never the working folder first on Python's path
# (`-P`), as for an installed console script. PPO_LAB_COMMAND runs another one (an install in a
# fresh virtualenv: `PPO_LAB_COMMAND=/tmp/x/bin/ppo-lab`).
PPO_LAB = os.environ["PPO_LAB_COMMAND"].split() if os.environ.get("PPO_LAB_COMMAND") else [sys.executable, "-P", "-m", "ppo_lab.cli"]


def ppo_lab(args, cwd: Path, timeout: float = 600, **popen) -> subprocess.CompletedProcess:
    """`ppo-lab ARGS` run from `cwd`; with PPO_LAB_COMMAND, in an environment without PYTHONPATH
    (the install alone), else this process's."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if os.environ.get("PPO_LAB_COMMAND"):
        env.pop("PYTHONPATH", None)
    return subprocess.run([*PPO_LAB, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env, **popen)


def read_summary(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "summary.json").read_text())


def stamp_format(run_dir: Path) -> Path:
    """A hand-made run dir's manifest.json with the fields a run of this lab stamps first (its
    format and the lab's version: ppo_lab/rundir/run_format.py), so the commands read it."""
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    (Path(run_dir) / "manifest.json").write_text(json.dumps(run_format.stamp()))
    return Path(run_dir)


@pytest.fixture
def tiny():
    return list(TINY)


# --- a small disk to fill (faults tests) ---------------------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs (root and a kernel that allow it), unmounted at the end."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command: cannot make a small disk to fill")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root and CAP_SYS_ADMIN): {proc.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def fill_disk(disk: Path, leave_bytes: int) -> None:
    """Fill `disk` with a file named `filler` until `leave_bytes` are left."""
    free = shutil.disk_usage(disk).free
    with open(disk / "filler", "wb", buffering=0) as f:  # unbuffered: nothing left to flush later
        try:
            f.write(b"\0" * max(0, free - leave_bytes))
        except OSError:
            pass
        # A file written between the measure and the fill (by a run in another thread): give
        # back what that took, so `leave_bytes` are left all the same.
        short = leave_bytes - shutil.disk_usage(disk).free
        if short > 0:
            os.ftruncate(f.fileno(), max(0, os.fstat(f.fileno()).st_size - short))


def fill_when(path_glob, disk: Path, leave_bytes: int, stop: threading.Event) -> threading.Thread:
    """In the background: once a file matching `path_glob` exists on `disk`, fill the disk
    until `leave_bytes` are left (small writes still fit, a larger one no longer does)."""
    def run():
        while not stop.is_set() and not list(disk.glob(path_glob)):
            time.sleep(0.005)
        if not stop.is_set():
            fill_disk(disk, leave_bytes)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


# --- one compilation cache per suite run -------------------------------------------------

def pytest_configure(config):
    """Every process of one suite run (xdist workers, the launch.py runs they start) shares one
    persistent XLA compilation cache: a program an earlier test compiled loads in a fraction of
    the time. A fresh folder per run, made by the controller before workers start (they inherit
    the environment) and removed at the end, so a cold CI run starts empty and nothing leaks
    between runs. An outer PPO_LAB_COMPILATION_CACHE_DIR is left as it is."""
    if hasattr(config, "workerinput") or os.environ.get("PPO_LAB_COMPILATION_CACHE_DIR"):
        return
    import tempfile

    folder = tempfile.mkdtemp(prefix="ppo_lab_test_xla_cache_")
    os.environ["PPO_LAB_COMPILATION_CACHE_DIR"] = folder
    config._ppo_lab_cache_dir = folder


def pytest_unconfigure(config):
    folder = getattr(config, "_ppo_lab_cache_dir", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop("PPO_LAB_COMPILATION_CACHE_DIR", None)


# --- two workers (pytest-xdist, --dist loadgroup in tests/run.sh) ---------------------------

def group_for_workers(items) -> None:
    """What must run on one worker, as xdist_group marks: the SLURM cluster tests together (one
    cluster, its queue is the shared resource), and the tests of a module that share a module-
    or class-scoped fixture together (so the fixture's run trains once). Every other test goes
    to whichever worker is free."""
    for item in items:
        if any(m.name == "xdist_group" for m in item.iter_markers()):
            continue
        if "cluster" in item.keywords:
            item.add_marker(pytest.mark.xdist_group("slurm_cluster"))
            continue
        defs = getattr(item, "_fixtureinfo", None)
        scopes = {d.scope for name in (defs.names_closure if defs else ()) for d in defs.name2fixturedefs.get(name, ())}
        if scopes & {"module", "class", "package"}:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (and theirs, where they waited)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """PPO_LAB_TEST_TIMELINE=FILE: one JSON line per test (worker, start, end, and the CPU
    seconds it used: in the test process, and in the processes it started and waited for), to
    see where a suite run's time goes beyond `--durations` (which worker idles, what runs last,
    what costs the cores most): `python scripts/test_timeline.py FILE`."""
    path = os.environ.get("PPO_LAB_TEST_TIMELINE")
    start, cpu, children = time.time(), time.process_time(), _children_cpu()
    yield
    if path:
        line = {"test": item.nodeid, "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
                "start": start, "end": time.time(), "cpu": time.process_time() - cpu,
                "children_cpu": _children_cpu() - children}
        with open(path, "a") as f:
            f.write(json.dumps(line) + "\n")


def pytest_xdist_node_collection_finished(node, ids):
    """In the controller of `--dist loadgroup`: the cluster tests (always grouped, above) must
    come back from a worker with their group in the nodeid, which is how xdist's scheduler
    reads it. Where they do not (pytest 9.2 with pytest-xdist 3.8: pytest-xdist#1386) every
    group is silently ignored: a module's shared fixture trains on both workers and the cluster
    tests overlap. Say so instead."""
    if node.config.getvalue("dist") != "loadgroup":
        return
    lost = [i for i in ids if i.startswith("tests/cluster/test_") and "@" not in i]
    if lost:
        raise pytest.UsageError(
            f"pytest-xdist's loadgroup does not group under pytest {pytest.__version__} (e.g. {lost[0]} has no group): "
            "pytest-xdist#1386; install the test extra's pin: pip install 'pytest<9.2'")


# --- cluster tests: skipped with one reason where the cluster cannot run, never in CI --------

@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (its hook would run first)
def pytest_collection_modifyitems(config, items):
    group_for_workers(items)
    if os.environ.get("PPO_LAB_SKIP_CLUSTER") != "1":
        return
    reason = os.environ.get("PPO_LAB_SKIP_CLUSTER_REASON") or "PPO_LAB_SKIP_CLUSTER=1: the local SLURM cluster was not started"
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "cluster" in item.keywords:
            item.add_marker(skip)


_skipped_cluster_tests: list[str] = []


def pytest_runtest_logreport(report):
    if report.skipped and "cluster" in report.keywords:
        _skipped_cluster_tests.append(report.nodeid)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """A run that left slow or cluster tests out says how to run them."""
    if "not slow" in (config.option.markexpr or "") or "not cluster" in (config.option.markexpr or ""):
        terminalreporter.write_line(
            "left out: the slow end-to-end and SLURM cluster tests; `make test` runs everything "
            "(or `python -m pytest -m slow` / `bash tests/run.sh -m cluster` for one part)")


def pytest_sessionfinish(session, exitstatus):
    """Under CI=true a skipped cluster test is a failure: CI must prove the SLURM path."""
    if os.environ.get("CI", "").lower() == "true" and _skipped_cluster_tests and exitstatus == 0:
        print(f"\nCI=true: {len(_skipped_cluster_tests)} cluster test(s) skipped, which CI does not allow: "
              + ", ".join(_skipped_cluster_tests[:5]), file=sys.stderr)
        session.exitstatus = 1


def ppo_config(**fields):
    """A PPOConfig from `conf/ppo/default.yaml` (the one source of defaults) with `fields` set."""
    return dataclasses.replace(run_config(["env=cartpole"]).ppo, **fields)


def network_config(kind: str = "mlp", **keys):
    """A NetworkConfig from `conf/network/<kind>.yaml` with `keys` set; keys that YAML does not
    have (another kind's torso keys, which some tests pass for both kinds) are left out."""
    resolved = resolved_config(["env=cartpole", f"network={kind}"])
    resolved["network"].update({k: list(v) if isinstance(v, tuple) else v for k, v in keys.items()
                                if k in resolved["network"]})
    return read(NetworkConfig, resolved["network"], "network")


@pytest.fixture
def optimised_xla(monkeypatch):
    """XLA's optimisations on for this test's compiles (as a user's run compiles), in this
    process and any it starts: for training compared with numbers recorded from such a build."""
    import jax

    monkeypatch.setenv("JAX_DISABLE_MOST_OPTIMIZATIONS", "false")
    before = jax.config.read("jax_disable_most_optimizations")
    jax.config.update("jax_disable_most_optimizations", False)
    try:
        yield
    finally:
        jax.config.update("jax_disable_most_optimizations", before)
