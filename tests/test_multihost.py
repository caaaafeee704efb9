"""One run across processes (docs/multihost.md), as users start it: two launch.py
processes on this machine meeting at 127.0.0.1 (gloo collectives on CPU), one run dir.

Every process a test starts is killed in a `finally`; every wait has a timeout."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from conftest import ROOT, TINY, compose_config, free_port, read_rows, read_summary
from ppo_lab import rundir
from ppo_lab.config import HardwareConfig, read
from ppo_lab.hardware import _slurm_first_host, cpu_share, distributed_settings

pytestmark = pytest.mark.slow


# The processes' own CPUs (hardware.split_host_cpus) pay on a host they have to themselves; here
# the other test worker shares the 2 cores, and a pinned process cannot move off the core it
# shares with it while its partner waits at a collective (test_multihost took 351 s pinned, 284
# unpinned, in two suite runs). So every test but the one that checks the split runs without it.
def start(args, run_dir: Path, port: int, process_id: int, num_processes: int = 2, timeout_s: int = 60,
          split_cpus: bool = False) -> subprocess.Popen:
    cmd = [sys.executable, "launch.py", *args, f"hardware.coordinator_address=127.0.0.1:{port}",
           f"hardware.num_processes={num_processes}", f"hardware.process_id={process_id}",
           f"hardware.init_timeout_s={timeout_s}", f"hardware.split_host_cpus={str(split_cpus).lower()}",
           f"hydra.run.dir={run_dir}"]
    log_path = Path(f"{run_dir}.p{process_id}.out")
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    proc.output = log_path.read_text
    return proc


def wait_all(procs, timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    codes = []
    for proc in procs:
        try:
            codes.append(proc.wait(timeout=max(1.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            raise AssertionError(f"a process hung:\n{proc.output()[-3000:]}") from None
    return codes


def kill_all(procs) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def run_two(args, run_dir: Path, timeout: float = 240, extra: tuple = ((), ()), split_cpus: bool = False) -> list[subprocess.Popen]:
    port = free_port()
    procs = [start([*args, *extra[i]], run_dir, port, i, split_cpus=split_cpus) for i in range(2)]
    try:
        codes = wait_all(procs, timeout)
    finally:
        kill_all(procs)
    for proc, code in zip(procs, codes):
        proc.code = code
    return procs


def assert_rows_once(run_dir: Path, seeds: list[int], updates: int) -> list[dict]:
    rows = read_rows(run_dir)
    counts = Counter((int(r["update"]), int(r["seed"])) for r in rows)
    assert set(counts) == {(u, s) for u in range(1, updates + 1) for s in seeds}
    assert set(counts.values()) == {1}, "duplicate rows"
    return rows


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    """A basic-launcher multirun of two jobs (seeds 0-1 and 2-3) over two processes, with
    hardware.split_host_cpus as users run it (the default). Job 0 is the run most tests read."""
    sweep = tmp_path_factory.mktemp("multihost") / "sweep"
    procs = run_two(["-m", *TINY, "num_seeds=2", "seed=0,2", f"hydra.sweep.dir={sweep}"], sweep.parent / "unused", split_cpus=True)
    return sweep, procs


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    """The two-process run's seeds in one process of two host devices. Returns (run dir, its output)."""
    run_dir = tmp_path_factory.mktemp("multihost") / "one"
    args = [*[a for a in TINY if not a.startswith("hardware.host_devices")], "hardware.host_devices=2", "num_seeds=2"]
    proc = subprocess.run([sys.executable, "launch.py", *args, f"hydra.run.dir={run_dir}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir, proc.stdout + proc.stderr


def test_several_seeds_across_two_host_devices_of_one_process_complete(one_process):
    """The batched-QR hang (docs/toolchain.md) must not come back: init is per seed."""
    run_dir, output = one_process
    assert "devices: 2 x cpu" in output
    s = read_summary(run_dir)
    assert s["status"] == "completed" and s["layout"]["mode"] == "seeds" and s["layout"]["num_devices"] == 2
    assert len(s["eval"]["episode_return"]) == 2


def test_two_processes_train_one_run_written_once(two_processes):
    sweep, procs = two_processes
    run_dir = sweep / "0"
    assert [p.code for p in procs] == [0, 0], procs[0].output()[-3000:] + procs[1].output()[-3000:]
    assert_rows_once(run_dir, [0, 1], 32)
    summary = read_summary(run_dir)
    assert summary["status"] == "completed" and len(summary["eval"]["episode_return"]) == 2
    assert summary["devices"] == ["cpu:0", "cpu:2048"]  # one device of each process
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["process_count"] == 2 and manifest["process_index"] == 0
    assert manifest["devices"]["global_count"] == 2 and manifest["devices"]["local_count"] == 1
    # the log names the process count and layout; process 1 writes no closing summary
    assert "processes: 2 (this is process 1)" in procs[1].output()
    assert "layout: seeds over 2 device(s)" in procs[1].output()
    assert "== completed" in procs[0].output() and "== completed" not in procs[1].output()
    # a multirun joins once and runs every job on the global mesh; process 0 aggregates
    for proc in procs:
        assert proc.output().count("joining 2 processes") == 1
    assert_rows_once(sweep / "1", [2, 3], 32)
    assert read_summary(sweep / "1")["devices"] == ["cpu:0", "cpu:2048"]
    assert "process 0 aggregates the sweep" in procs[1].output()
    assert "4 seed(s) (4 in the statistics)" in procs[0].output()
    # two processes on this host's CPUs: each keeps its own slice (hardware.split_host_cpus)
    if len(os.sched_getaffinity(0)) >= 2:
        kept = [re.search(r"this one keeps CPUs (\[[\d, ]+\])", p.output()) for p in procs]
        assert all(kept), procs[0].output()[-2000:]
        slices = [set(json.loads(k.group(1))) for k in kept]
        assert slices[0] and slices[1] and not slices[0] & slices[1]


def test_processes_sharing_a_hosts_cpus_split_them_and_others_keep_theirs():
    host = [{"host": "a", "cpus": [0, 1, 2, 3, 4]}] * 2
    assert cpu_share(0, host) == [0, 1] and cpu_share(1, host) == [2, 3, 4]  # the remainder to the last
    two_hosts = [{"host": "a", "cpus": [0, 1]}, {"host": "b", "cpus": [0, 1]}]
    assert cpu_share(0, two_hosts) is None  # alone on its host
    bound = [{"host": "a", "cpus": [0]}, {"host": "a", "cpus": [1]}]
    assert cpu_share(0, bound) is None  # already on their own CPUs (SLURM's binding, taskset)
    crowded = [{"host": "a", "cpus": [0]}] * 2
    assert cpu_share(1, crowded) is None  # more processes than CPUs: nothing to split
    with pytest.raises(Exception, match="hardware.split_host_cpus"):
        read(HardwareConfig, {**OmegaConf.to_container(compose_config([]).hardware, resolve=True), "split_host_cpus": "sometimes"}, "hardware")


def test_two_processes_equal_one_process_of_two_devices(two_processes, one_process):
    run_dir, one_run = two_processes[0] / "0", one_process[0]
    ours = {(r["update"], r["seed"]): r for r in read_rows(run_dir)}
    theirs = {(r["update"], r["seed"]): r for r in read_rows(one_run)}
    assert set(ours) == set(theirs)
    for seed in ("0", "1"):
        a, b = float(ours[("1", seed)]["train/vf_loss"]), float(theirs[("1", seed)]["train/vf_loss"])
        assert abs(a - b) <= 1e-4 * abs(b)
    assert read_summary(run_dir)["eval"] == read_summary(one_run)["eval"]


def test_a_coordinator_that_does_not_answer_is_named_exit_2(tmp_path):
    port = free_port()  # nobody listens there
    proc = start([*TINY], tmp_path / "run", port, 1, timeout_s=3)
    try:
        code = wait_all([proc], 60)[0]
    finally:
        kill_all([proc])
    assert code == 2, proc.output()[-3000:]
    assert f"127.0.0.1:{port}" in proc.output() and "did not answer" in proc.output()


def test_processes_with_different_configs_all_stop_naming_the_key(tmp_path):
    procs = run_two([*TINY, "num_seeds=2"], tmp_path / "run", timeout=120, extra=((), ("ppo.lr=0.001",)))
    for proc in procs:
        assert proc.code == 2, proc.output()[-3000:]
        assert "ppo.lr" in proc.output()
    assert not (tmp_path / "run" / "metrics.csv").exists()


LONG = [*[a for a in TINY if not a.startswith("ppo.total_timesteps")], "ppo.total_timesteps=8192",
        "num_seeds=2", "checkpoint.every_min=0.001"]  # 128 updates, a checkpoint about every chunk


def wait_for_checkpoint(run_dir: Path, procs, newer_than: str | None = None, timeout: float = 120) -> str:
    """The name of the run's newest checkpoint once there is one (newer than `newer_than`)."""
    deadline = time.monotonic() + timeout
    while True:
        names = [p.name for p in rundir.list_checkpoints(run_dir / rundir.CHECKPOINTS)]
        if names and names[-1] != newer_than:
            return names[-1]
        assert all(p.poll() is None for p in procs), procs[0].output()[-3000:]
        assert time.monotonic() < deadline, "no checkpoint"
        time.sleep(0.2)


def test_a_stopped_or_killed_process_stops_the_other_and_both_resume(tmp_path):
    """SIGTERM to one process: both stop at the same chunk. Relaunched, SIGKILL to one: the
    other exits 1 within 30 s. Relaunched again: the run resumes and finishes, every row once."""
    run_dir = tmp_path / "run"
    port = free_port()
    procs = [start(LONG, run_dir, port, i) for i in range(2)]
    try:
        wait_for_checkpoint(run_dir, procs)
        procs[1].send_signal(signal.SIGTERM)  # only one: the other stops with it
        codes = wait_all(procs, 120)
    finally:
        kill_all(procs)
    summary = read_summary(run_dir)
    assert summary["status"] == "stopped" and summary["updates"] < 128, codes
    assert "signal SIGTERM" in summary["stop_reason"] or "another process" in summary["stop_reason"]
    assert int(read_rows(run_dir)[-1]["update"]) == summary["updates"]
    stopped_at = rundir.list_checkpoints(run_dir / rundir.CHECKPOINTS)[-1].name  # the stop's own checkpoint

    port = free_port()
    procs = [start(LONG, run_dir, port, i, timeout_s=20) for i in range(2)]
    try:
        wait_for_checkpoint(run_dir, procs, newer_than=stopped_at)  # training again
        procs[1].send_signal(signal.SIGKILL)
        code = wait_all(procs[:1], 120)[0]  # not hardware.init_timeout_s (20) x JAX's shutdown retries
    finally:
        kill_all(procs)
    assert code == 1, code
    assert "was lost or failed" in procs[0].output(), procs[0].output()[-3000:]

    relaunched = run_two(LONG, run_dir)
    assert [p.code for p in relaunched] == [0, 0], relaunched[0].output()[-3000:] + relaunched[1].output()[-3000:]
    assert read_summary(run_dir)["resumed_from"] > 0
    assert_rows_once(run_dir, [0, 1], 128)


@pytest.mark.timeout(60)
def test_processes_are_detected_from_a_slurm_step_of_several_tasks():
    hw = read(HardwareConfig, OmegaConf.to_container(compose_config([]).hardware, resolve=True), "hardware")
    step = {"SLURM_STEP_NUM_TASKS": "4", "SLURM_PROCID": "3", "SLURM_STEP_NODELIST": "gpu[07-08],cpu1", "SLURM_JOB_ID": "123"}
    procs = distributed_settings(hw, step)
    assert (procs.coordinator_address, procs.num_processes, procs.process_id) == ("gpu07:12123", 4, 3)
    assert distributed_settings(hw, {**step, "SLURM_STEP_NUM_TASKS": "1"}) is None  # one task: one process
    assert distributed_settings(hw, {}) is None
    assert _slurm_first_host("node3") == "node3"


def test_one_seed_split_over_two_processes_equals_two_devices_of_one(tmp_path):
    """hardware.layout=envs: one seed's envs on both processes, the gradient all-reduced across
    them every minibatch (gloo), as the same split over two devices of one process (forced: so
    small a seed stays on one device under layout=auto, tests/test_layout.py)."""
    args = [*[a for a in TINY if not a.startswith("hardware.host_devices")], "num_seeds=1", "hardware.layout=envs"]
    procs = run_two([*args, "hardware.host_devices=1"], tmp_path / "two")
    assert [p.code for p in procs] == [0, 0], procs[0].output()[-3000:]
    one = subprocess.run([sys.executable, "launch.py", *args, "hardware.host_devices=2", f"hydra.run.dir={tmp_path / 'one'}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert one.returncode == 0, one.stderr[-3000:]
    ours, theirs = read_rows(tmp_path / "two"), read_rows(tmp_path / "one")
    split = {"mode": "envs", "num_devices": 2, "num_replicas": 2, "envs_per_replica": 2}
    assert read_summary(tmp_path / "two")["layout"] == read_summary(tmp_path / "one")["layout"] == split
    assert read_summary(tmp_path / "one")["status"] == "completed" and len(ours) == len(theirs) == 32
    for k in (0, 31):
        a, b = float(ours[k]["train/vf_loss"]), float(theirs[k]["train/vf_loss"])
        assert abs(a - b) <= 1e-4 * abs(b)


def test_process_0_alone_stops_after_the_timeout_naming_the_address(tmp_path):
    port = free_port()
    proc = start([*TINY], tmp_path / "run", port, 0, timeout_s=3)
    try:
        code = wait_all([proc], 60)[0]
    finally:
        kill_all([proc])
    assert code == 2, proc.output()[-3000:]
    assert f"127.0.0.1:{port}" in proc.output() and "did not all join" in proc.output()


def one_process_of_two_devices(args, out: Path) -> None:
    """launch.py with `args` in one process of two host devices (the reference of a 2-process run)."""
    args = [*[a for a in args if not a.startswith("hardware.host_devices")], "hardware.host_devices=2"]
    where = f"hydra.sweep.dir={out}" if "-m" in args else f"hydra.run.dir={out}"
    proc = subprocess.run([sys.executable, "launch.py", *args, where], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]


GRID = ["-m", "hydra/launcher=vmap", *TINY, "num_seeds=1", "ppo.lr=1e-3,3e-4",  # 2 cells x 1 seed
        "hydra.callbacks.sweep.aggregate=false"]  # not what is tested here (matplotlib: seconds)


def test_a_grid_across_two_processes_equals_one_process_of_two_devices(tmp_path):
    """hydra/launcher=vmap: the cells' replicas over both processes' devices, each cell's run dir
    written once by process 0, every cell training what it trains on two devices of one process."""
    sweep = tmp_path / "sweep"
    procs = run_two([*GRID, f"hydra.sweep.dir={sweep}"], tmp_path / "unused")
    for proc in procs:
        assert proc.code == 0, proc.output()[-3000:]
    assert "vmap group: 2 cells x 1 seeds = 2 replicas over 2 device(s)" in procs[1].output()
    one_process_of_two_devices(GRID, tmp_path / "one")
    for cell in ("0", "1"):
        ours = assert_rows_once(sweep / cell, [0], 32)
        theirs = read_rows(tmp_path / "one" / cell)
        a, b = float(ours[0]["train/vf_loss"]), float(theirs[0]["train/vf_loss"])
        assert abs(a - b) <= 1e-4 * abs(b) and ours[0]["train/learning_rate"] == theirs[0]["train/learning_rate"]
        assert read_summary(sweep / cell)["eval"] == read_summary(tmp_path / "one" / cell)["eval"]
    assert ours[0]["train/learning_rate"] != read_rows(sweep / "0")[0]["train/learning_rate"]


POPULATION = [*TINY, "pbt.population=2", "pbt.interval_updates=8"]  # a step after each chunk but the last


def test_a_population_across_two_processes_equals_one_process_of_two_devices(tmp_path):
    """pbt: the members over both processes' devices; every process ranks the same gathered
    fitness with the same PRNG, so the steps (pbt.jsonl, written by process 0) and the lineage
    are those of the population on two devices of one process."""
    procs = run_two(POPULATION, tmp_path / "two")
    assert [p.code for p in procs] == [0, 0], procs[0].output()[-3000:] + procs[1].output()[-3000:]
    one_process_of_two_devices(POPULATION, tmp_path / "one")
    ours, theirs = ((tmp_path / d / "pbt.jsonl").read_text() for d in ("two", "one"))
    assert ours == theirs and len(ours.splitlines()) == 3
    decided = [{k: v for k, v in read_summary(tmp_path / d)["pbt"].items() if k != "step_s"} for d in ("two", "one")]
    assert decided[0] == decided[1]  # all but step_s, the host time the steps took
    assert_rows_once(tmp_path / "two", [0, 1], 32)
    assert "pbt step at update 8" in procs[1].output()  # decided in process 1 too, written by process 0 alone
