"""The run-directory lock (rundir/lock.py): live holders refuse, dead ones are taken over.

The module's cases here, in one process (no jax); the same through launch.py (a second launch
into a running run's dir, a SIGKILLed run relaunched) in test_end_to_end.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from ppo_lab.rundir import lock
from ppo_lab.rundir.paths import RUN_LOCK


def plant(run_dir, **fields):
    """A lock file as another process would have left it."""
    now = time.time()
    holder = {"host": socket.gethostname(), "pid": os.getpid(), "started": now, "heartbeat": now,
              "slurm_job_id": None, "token": "planted", **fields}
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / RUN_LOCK).write_text(json.dumps(holder))
    return holder


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_second_acquire_is_refused_naming_the_holder_and_release_frees_it(tmp_path):
    held = lock.acquire(tmp_path, stale_s=600)
    data = json.loads((tmp_path / RUN_LOCK).read_text())
    assert data["pid"] == os.getpid() and data["host"] == socket.gethostname()
    # Same host, pid alive, flock held (flock conflicts across open files, even in one process).
    with pytest.raises(lock.RunDirLocked, match=rf"host {socket.gethostname()}, pid {os.getpid()}.*since"):
        lock.acquire(tmp_path, stale_s=600)
    held.release()
    assert not (tmp_path / RUN_LOCK).exists()
    held.release()  # twice is harmless
    lock.acquire(tmp_path, stale_s=600).release()


def test_heartbeat_refreshes_the_file_in_place(tmp_path):
    held = lock.acquire(tmp_path, stale_s=600, heartbeat_s=0.05)
    first = json.loads((tmp_path / RUN_LOCK).read_text())["heartbeat"]
    deadline = time.time() + 10
    while (lock.read_holder(tmp_path / RUN_LOCK).heartbeat == first) and time.time() < deadline:
        time.sleep(0.05)
    assert lock.read_holder(tmp_path / RUN_LOCK).heartbeat > first
    assert held.owned()
    held.release()


def test_dead_pid_on_this_host_is_taken_over_with_a_warning(tmp_path, caplog):
    plant(tmp_path, pid=dead_pid())
    with lock.acquire(tmp_path, stale_s=600):
        assert json.loads((tmp_path / RUN_LOCK).read_text())["pid"] == os.getpid()
    assert "taking over the lock" in caplog.text and "is gone" in caplog.text
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # the stale file is not left behind


def test_reused_pid_without_flock_is_taken_over(tmp_path, caplog):
    plant(tmp_path, pid=os.getpid())  # alive, but nobody holds the file's flock: a reused pid
    lock.acquire(tmp_path, stale_s=600).release()
    assert "flock is free" in caplog.text


def test_other_host_live_heartbeat_refuses_and_old_heartbeat_is_taken_over(tmp_path, caplog):
    # The shared-file-system case, where the pid means nothing here: only the heartbeat counts.
    plant(tmp_path, host="node-b", pid=1, heartbeat=time.time() - 10)
    with pytest.raises(lock.RunDirLocked, match="host node-b, pid 1"):
        lock.acquire(tmp_path, stale_s=600)
    plant(tmp_path, host="node-b", pid=1, heartbeat=time.time() - 700)
    lock.acquire(tmp_path, stale_s=600).release()
    assert "no heartbeat from host node-b" in caplog.text


def test_same_slurm_job_takes_over_its_own_lock_from_another_host(tmp_path, monkeypatch, caplog):
    # A requeued job restarts on another node in its own run dir: SLURM ended the first instance.
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    plant(tmp_path, host="node-b", pid=1, slurm_job_id="4242")
    lock.acquire(tmp_path, stale_s=600).release()
    assert "this SLURM job (4242)" in caplog.text
    plant(tmp_path, host="node-b", pid=1, slurm_job_id="999")
    with pytest.raises(lock.RunDirLocked, match="SLURM job 999"):
        lock.acquire(tmp_path, stale_s=600)


def test_torn_lock_file_counts_as_held_until_its_mtime_is_stale(tmp_path):
    (tmp_path / RUN_LOCK).write_text('{"host": "no')
    with pytest.raises(lock.RunDirLocked):
        lock.acquire(tmp_path, stale_s=600)
    old = time.time() - 700
    os.utime(tmp_path / RUN_LOCK, (old, old))
    lock.acquire(tmp_path, stale_s=600).release()


def test_only_process_zero_holds_the_lock(tmp_path):
    with lock.acquire(tmp_path, stale_s=600, process_index=1):
        assert not (tmp_path / RUN_LOCK).exists()


def test_stale_time_scales_with_the_checkpoint_interval():
    assert lock.stale_after_s(60.0) == 3 * 3600
    assert lock.stale_after_s(0.001) == lock.MIN_STALE_S


def test_a_run_dir_made_for_the_lock_alone_is_removed_with_it(tmp_path):
    lock.acquire(tmp_path / "new", stale_s=600).release()
    assert not (tmp_path / "new").exists()  # a run refused before writing leaves no dir behind
    held = lock.acquire(tmp_path / "used", stale_s=600)
    (tmp_path / "used" / "metrics.csv").write_text("update\n")
    held.release()
    assert (tmp_path / "used" / "metrics.csv").exists()
