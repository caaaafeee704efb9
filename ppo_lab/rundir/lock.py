"""The run-directory lock: one training process writes a run directory at a time.

The lock is a file, `<run_dir>/run.lock`, created with O_CREAT|O_EXCL (atomic on local file
systems and on NFSv3+, where `flock` may not reach the server: `nolock` mounts, some NFS
versions). It holds JSON {host, pid, started, heartbeat, slurm_job_id, token}; the holder
refreshes `heartbeat` from a background thread (during compiles and long chunks too) and
deletes the file when it exits, whatever the exit. As a second guard where the OS gives it,
the holder also keeps an `flock` on the file: on one host a held flock proves the holder lives.

A lock already there is the holder's while it lives. It is stale, and taken over with a
warning, when:
- its holder ran on this host and its pid is gone (or, pid reused, its flock is free);
- it was taken by this same SLURM job (a requeued job restarting in its own run dir: SLURM
  ends the earlier instance before it requeues it);
- its holder ran on another host and its heartbeat is older than `stale_after_s` (scaled
  from `checkpoint.every_min` by the caller): the only evidence one host has of another on
  a shared file system.

In a run of several processes, process 0 takes the lock for all (`process_index`); the
others hold a `NoLock`. No jax here.

The STOP file (`request_stop`) is the other way in to the holder: a request, from any shell,
that it stops cleanly after its chunk.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from ppo_lab.rundir.atomic import fsync_dir, write_text_atomic
from ppo_lab.rundir.paths import RUN_LOCK, STOP_FILE

try:  # not on every platform; the lock file alone is the contract
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

log = logging.getLogger(__name__)

# How often the holder refreshes its heartbeat, at most (a tenth of the stale time, below).
HEARTBEAT_S = 30.0
# Another host's lock is stale after this many heartbeat-less seconds at least.
MIN_STALE_S = 300.0


class RunDirLocked(RuntimeError):
    """Another live process holds the run dir's lock (a user error: launch.py exits 2, nothing written)."""


def stale_after_s(checkpoint_every_min: float) -> float:
    """Heartbeat-less seconds after which another host's lock counts as dead: three checkpoint
    intervals, at least MIN_STALE_S (a busy shared file system can delay a heartbeat)."""
    return max(MIN_STALE_S, 3 * 60.0 * checkpoint_every_min)


def _slurm_job_id() -> str | None:
    # SLURM_JOB_ID is unique per array task and kept across requeues.
    return os.environ.get("SLURM_JOB_ID") or None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    try:  # a zombie (a killed child not yet reaped) answers kill(0) but holds nothing
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def _stamp(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))


@dataclass
class Holder:
    """What a lock file says about its holder (fields missing in a torn or foreign file)."""
    host: str = "?"
    pid: int = -1
    started: float = 0.0
    heartbeat: float = 0.0
    slurm_job_id: str | None = None
    token: str = ""

    def describe(self) -> str:
        job = f", SLURM job {self.slurm_job_id}" if self.slurm_job_id else ""
        return (f"host {self.host}, pid {self.pid}{job}, since {_stamp(self.started)}, "
                f"last heartbeat {_stamp(self.heartbeat)}")


def read_holder(path: Path) -> Holder | None:
    """The lock file's holder; None when there is no file. A file that does not parse (torn
    mid-refresh, or foreign) counts as held, with its mtime as the heartbeat."""
    for _ in range(3):
        try:
            text = Path(path).read_text()
            mtime = Path(path).stat().st_mtime
        except FileNotFoundError:
            return None
        try:
            data = json.loads(text)
            return Holder(str(data["host"]), int(data["pid"]), float(data["started"]), float(data["heartbeat"]),
                          data.get("slurm_job_id"), str(data.get("token", "")))
        except (ValueError, KeyError, TypeError):
            time.sleep(0.05)  # a refresh in progress: read again
    return Holder(started=mtime, heartbeat=mtime)


def stale_reason(holder: Holder, path: Path, stale_s: float, now: float | None = None) -> str | None:
    """Why `holder`'s lock is dead (so it may be taken over), or None while it may be alive."""
    now = time.time() if now is None else now
    if holder.host == socket.gethostname():
        if not _pid_alive(holder.pid):
            return f"its process {holder.pid} on this host is gone"
        if _flock_free(path):
            return f"pid {holder.pid} now belongs to another process (the lock's flock is free)"
        return None
    job = _slurm_job_id()
    if job is not None and holder.slurm_job_id == job:
        return f"it was taken by this SLURM job ({job}) before it was requeued"
    if now - holder.heartbeat > stale_s:
        return f"no heartbeat from host {holder.host} for {now - holder.heartbeat:.0f} s (> {stale_s:.0f} s)"
    return None


def _flock_free(path: Path) -> bool:
    """Whether nobody holds an flock on `path` (False where flock is unavailable: no evidence)."""
    if fcntl is None:
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # releases the probe's flock, if it got one


class RunDirLock(contextlib.AbstractContextManager):
    """The held lock of one run dir: refreshed every `heartbeat_s` by a thread, released by `release`."""

    def __init__(self, run_dir: Path, fd: int, holder: Holder, made_dir: bool, heartbeat_s: float):
        self.run_dir, self.path, self.fd, self.holder = Path(run_dir), Path(run_dir) / RUN_LOCK, fd, holder
        self.made_dir = made_dir  # the run dir did not exist: a run refused before writing leaves none
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, args=(heartbeat_s,), name=f"lock {self.run_dir}", daemon=True)
        self._thread.start()

    def _beat(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            try:
                self.refresh()
            except OSError as exc:  # a flaky shared file system: keep training, try again later
                log.warning("could not refresh the lock %s: %s", self.path, exc)

    def refresh(self) -> None:
        """Write a new heartbeat into the held file (in place: the flock stays on this inode)."""
        self.holder.heartbeat = time.time()
        data = _encode(self.holder)
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)
        os.fsync(self.fd)

    def owned(self) -> bool:
        """Whether the file at `path` is still this lock (not taken over, not removed)."""
        try:
            return os.stat(self.path).st_ino == os.fstat(self.fd).st_ino
        except OSError:
            return False

    def release(self) -> None:
        """Stop the heartbeat and remove the lock file (if still ours); safe to call twice."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        if self.fd < 0:
            return
        try:
            if self.owned():
                os.unlink(self.path)
            else:
                log.error("the lock %s was taken over by another process while this run held it", self.path)
        finally:
            os.close(self.fd)  # also releases the flock
            self.fd = -1
        if self.made_dir:
            with contextlib.suppress(OSError):  # not empty: the run wrote its files there
                self.run_dir.rmdir()

    def __exit__(self, *exc):
        self.release()


class NoLock(contextlib.nullcontext):
    """What a process other than process 0 of a multi-process run holds: nothing."""

    def release(self) -> None:
        pass


def _encode(holder: Holder) -> bytes:
    return json.dumps(holder.__dict__).encode() + b"\n"


def _create(path: Path, holder: Holder) -> int | None:
    """Create the lock file exclusively and write `holder` into it; None if it exists."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
    except FileExistsError:
        return None
    try:
        if fcntl is not None:
            with contextlib.suppress(OSError):  # no flock on this file system: the file alone
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, _encode(holder))
        os.fsync(fd)
        fsync_dir(path.parent)
    except BaseException:
        os.close(fd)
        os.unlink(path)
        raise
    return fd


def _set_aside(path: Path, stale: Holder) -> None:
    """Move the stale lock out of the way, atomically. When two processes take over at once,
    one rename wins; the loser finds the file gone (or a fresh lock in its place: put back)."""
    aside = path.with_name(f"{path.name}.stale.{os.getpid()}.{uuid.uuid4().hex[:8]}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return  # another process moved it first: race it to create the new one
    moved = read_holder(aside)
    if moved is not None and moved.token != stale.token:  # a fresh lock replaced the stale one meanwhile
        with contextlib.suppress(OSError):
            os.link(aside, path)  # fails if yet another lock exists: then that one holds
    with contextlib.suppress(OSError):
        os.unlink(aside)


def acquire(run_dir: Path, stale_s: float, process_index: int = 0, heartbeat_s: float | None = None) -> RunDirLock | NoLock:
    """Take `run_dir`'s lock, or raise RunDirLocked naming its live holder and what to do.
    Writes nothing else; makes the run dir if missing (the lock lives in it; `release` removes
    it again if the run left it empty)."""
    if process_index != 0:
        return NoLock()  # process 0 holds the lock for the whole multi-process run
    run_dir = Path(run_dir)
    made_dir = not run_dir.exists()
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / RUN_LOCK
    now = time.time()
    me = Holder(socket.gethostname(), os.getpid(), now, now, _slurm_job_id(), uuid.uuid4().hex)
    for _ in range(5):  # a lock that vanishes between our looks: try again
        fd = _create(path, me)
        if fd is not None:
            return RunDirLock(run_dir, fd, me, made_dir, heartbeat_s if heartbeat_s is not None else min(HEARTBEAT_S, stale_s / 10))
        holder = read_holder(path)
        if holder is None:
            continue
        reason = stale_reason(holder, path, stale_s)
        if reason is None:
            raise RunDirLocked(
                f"the run directory {run_dir} is in use by another run ({holder.describe()}); a second launch "
                f"would write the same rows. Wait for it to end (or stop it: touch {run_dir / 'STOP'}), or launch into "
                f"another hydra.run.dir. If that process is dead on a host this one cannot see, remove {path}.")
        log.warning("taking over the lock of %s: %s (held by %s)", run_dir, reason, holder.describe())
        _set_aside(path, holder)
    raise RunDirLocked(f"could not take the lock {path}: it keeps changing (several launches racing for {run_dir})")


def stop_requested(run_dir: Path) -> bool:
    return (Path(run_dir) / STOP_FILE).exists()


def request_stop(run_dir: Path, by: str) -> Path:
    path = Path(run_dir) / STOP_FILE
    write_text_atomic(path, f"stop requested by {by} at {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
    return path
