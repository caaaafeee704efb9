"""Faults a long run meets in its checkpoints: a damaged newest one, every one damaged, one of
another format (a lab before 1.0's, a newer lab's), and a full disk while training (a small
tmpfs, where this machine lets root mount one)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import fill_disk, launch, read_rows, read_summary, train_run

from ppo_lab import __version__
from ppo_lab.errors import ConfigError, RunDirFormatError
from ppo_lab.rundir.checkpoints import (
    DAMAGED,
    CheckpointFormatError,
    DamagedCheckpoint,
    NoValidCheckpoint,
    _canonical,
    set_aside,
    sha256,
    stamp,
    verify,
)
from ppo_lab.rundir import checkpoints as checkpoint_files
from ppo_lab.rundir.checkpoints import list_checkpoints, write_checkpoint
from ppo_lab.rundir.run_format import FORMAT
# Two checkpoints (updates 24 and 32 of 32): every chunk saves one.
SMALL = ["env=cartpole", "ppo.num_envs=4", "ppo.num_steps=16", "ppo.num_minibatches=2", "ppo.update_epochs=2",
         "train.chunk_updates=8", "eval.episodes=2", "eval.max_steps=32", "hardware.host_devices=1",
         "network.hidden_sizes=[8]", "checkpoint.every_min=1e-9"]


# --- the format: version and checksums ------------------------------------------------------

def _checkpoint(tmp_path: Path, payload: bytes = b"\x81\xa6params\x80", update: int = 5) -> Path:
    return write_checkpoint(tmp_path / "checkpoints", update, payload, {"update": update, "wall_s": 1.5})


def test_a_checkpoint_records_its_format_and_checksums(tmp_path):
    meta_path = _checkpoint(tmp_path)
    meta = json.loads(meta_path.read_text())
    assert meta["format_version"] == FORMAT == "1.0" and meta["lab_version"] == __version__
    assert meta["payload"]["file"] == "ckpt_5.msgpack"
    assert meta["payload"]["bytes"] == len(b"\x81\xa6params\x80") and len(meta["payload"]["sha256"]) == 64
    got, payload = verify(meta_path, meta_path.with_suffix(".msgpack"))
    assert got == meta and payload == b"\x81\xa6params\x80"


@pytest.mark.parametrize("damage, reason", [
    (lambda j, m: m.write_bytes(b"\x81\xa6params\x81"), "sha256 of ckpt_5.msgpack"),  # one byte flipped
    (lambda j, m: m.write_bytes(b"\x81\xa6par"), "has 5 bytes, the checkpoint recorded 9"),  # cut short
    (lambda j, m: j.write_text(""), "not valid JSON"),  # emptied
    (lambda j, m: j.write_text(j.read_text().replace('"wall_s": 1.5', '"wall_s": 2.5')), "meta_sha256"),  # edited
    (lambda j, m: j.write_bytes(os.urandom(200)), "not valid JSON"),
    (lambda j, m: m.unlink(), "cannot read ckpt_5.msgpack"),
])
def test_damage_is_recognised_and_named(tmp_path, damage, reason):
    meta_path = _checkpoint(tmp_path)
    damage(meta_path, meta_path.with_suffix(".msgpack"))
    with pytest.raises(DamagedCheckpoint, match=reason) as info:
        verify(meta_path, meta_path.with_suffix(".msgpack"))
    assert info.value.path == meta_path


def _restamped(meta_path: Path, **fields) -> None:
    """The checkpoint's meta with `fields` changed and its own checksum made to match: intact,
    as another lab would have written it."""
    meta = {**json.loads(meta_path.read_text()), **fields}
    meta = {k: v for k, v in meta.items() if v is not None and k != "meta_sha256"}
    meta_path.write_text(json.dumps({**meta, "meta_sha256": sha256(_canonical(meta))}))


@pytest.mark.parametrize("fields, named", [
    ({"format_version": 5, "lab_version": None}, "a format before 1.0 (checkpoint format 5), written by a ppo_lab before 1.0"),
    ({"format_version": "2.0", "lab_version": "2.1.0"}, "format 2.0, written by ppo_lab 2.1.0"),
])
def test_a_checkpoint_of_another_format_is_refused_in_one_line(tmp_path, fields, named):
    meta_path = _checkpoint(tmp_path)
    _restamped(meta_path, **fields)
    with pytest.raises(CheckpointFormatError) as info:  # intact: refused, not taken for damaged
        verify(meta_path, meta_path.with_suffix(".msgpack"))
    message = str(info.value)
    assert isinstance(info.value, RunDirFormatError) and "\n" not in message
    assert f"the checkpoint {meta_path} is of {named}" in message
    assert f"this ppo_lab {__version__} reads format 1.0 only" in message


def test_an_unversioned_checkpoint_is_refused_and_one_with_checksums_but_no_version_is_damaged(tmp_path):
    (tmp_path / "ckpt_3.json").write_text(json.dumps({"update": 3}))  # as labs before checksums wrote them
    (tmp_path / "ckpt_3.msgpack").write_bytes(b"anything")
    with pytest.raises(CheckpointFormatError, match="is of a format before 1.0 \\(unversioned\\)"):
        verify(tmp_path / "ckpt_3.json", tmp_path / "ckpt_3.msgpack")
    (tmp_path / "ckpt_3.json").write_text(json.dumps({"update": 3, "meta_sha256": "0" * 64}))
    with pytest.raises(DamagedCheckpoint, match="checksum fields but no format_version"):
        verify(tmp_path / "ckpt_3.json", tmp_path / "ckpt_3.msgpack")


def test_stamp_hashes_what_a_reader_parses():
    meta = stamp({"update": np.int64(4), "best": np.float32(0.1), "seeds": (0, 1)}, b"x", "ckpt_4.msgpack")
    assert json.loads(json.dumps(meta)) == meta and meta["seeds"] == [0, 1]


def test_set_aside_keeps_both_files_and_says_why(tmp_path):
    for attempt in range(2):  # the second damaged copy of ckpt_5 does not overwrite the first
        meta_path = _checkpoint(tmp_path)
        folder = set_aside(meta_path, meta_path.with_suffix(".msgpack"), f"reason {attempt}")
        assert not meta_path.exists() and not meta_path.with_suffix(".msgpack").exists()
    assert folder == tmp_path / "checkpoints" / DAMAGED
    assert len(list(folder.glob("ckpt_5.json*"))) == 2 and len(list(folder.glob("ckpt_5.msgpack*"))) == 2
    assert {p.read_text().split(": ", 1)[1].strip() for p in folder.glob("*.reason.txt")} == {"reason 0", "reason 1"}
    assert list_checkpoints(tmp_path / "checkpoints") == []  # damaged/ is never taken for a checkpoint


# --- resuming through damage, in-process and through launch.py -----------------------------

@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A finished small run with checkpoints at updates 24 and 32; tests damage copies of it."""
    run_dir = tmp_path_factory.mktemp("faults") / "base"
    summary = train_run([*SMALL, "ppo.total_timesteps=2048"], run_dir)
    assert summary.status == "completed" and [p.name for p in list_checkpoints(run_dir / "checkpoints")] == \
        ["ckpt_24.json", "ckpt_32.json"]
    return run_dir


def _copy(run_dir: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "run"
    shutil.copytree(run_dir, dest)
    return dest


def _killed(run_dir: Path) -> Path:
    """The run as a SIGKILL leaves it: summary.json still says running (a relaunch of a
    completed run with the same config has nothing to train and would skip it)."""
    summary = json.loads((run_dir / "summary.json").read_text())
    (run_dir / "summary.json").write_text(json.dumps({**summary, "status": "running"}))
    return run_dir


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_damaged_newest_checkpoint_is_set_aside_and_the_previous_one_resumed(trained, tmp_path, caplog):
    run_dir = _copy(trained, tmp_path)
    for path in (run_dir / "checkpoints").glob("ckpt_32.*"):  # every file of the newest, random bytes
        path.write_bytes(os.urandom(path.stat().st_size))
    summary = train_run([*SMALL, "ppo.total_timesteps=3072", "allow_config_change=true"], run_dir)
    assert summary.status == "completed" and summary.resumed_from == 24 and summary.updates == 48
    assert summary.checkpoints_damaged and summary.checkpoints_damaged[0].startswith("ckpt_32.json: ")
    assert "ckpt_32.json is damaged" in caplog.text and "moved to" in caplog.text
    damaged = run_dir / "checkpoints" / DAMAGED
    assert {p.name for p in damaged.iterdir()} == {"ckpt_32.json", "ckpt_32.msgpack", "ckpt_32.reason.txt"}
    keys = [(r["update"], r["seed"]) for r in read_rows(run_dir)]
    assert len(keys) == len(set(keys)) == 48 and keys[-1] == ("48", "0")


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_flipped_byte_in_the_payload_alone_is_caught_by_the_checksum(trained, tmp_path, caplog):
    run_dir = _copy(trained, tmp_path)
    state = run_dir / "checkpoints" / "ckpt_32.msgpack"
    data = bytearray(state.read_bytes())
    data[len(data) // 2] ^= 0x01  # still parses as msgpack: only the checksum sees it
    state.write_bytes(bytes(data))
    summary = train_run([*SMALL, "ppo.total_timesteps=2560", "allow_config_change=true"], run_dir)
    assert summary.resumed_from == 24 and summary.updates == 40
    assert "sha256 of ckpt_32.msgpack" in caplog.text


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_every_checkpoint_damaged_exits_2_then_start_over_keeps_the_old_files(trained, tmp_path):
    run_dir = _killed(_copy(trained, tmp_path))
    rows_before = (run_dir / "metrics.csv").read_text()
    (run_dir / "checkpoints" / "ckpt_32.json").write_text("")
    (run_dir / "checkpoints" / "ckpt_24.msgpack").write_bytes(os.urandom(64))
    proc = launch([*SMALL, "ppo.total_timesteps=2048"], run_dir, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr[-3000:]
    err = proc.stderr
    assert "no checkpoint in" in err and "ckpt_32.json: not valid JSON" in err and "ckpt_24.json: ckpt_24.msgpack has 64 bytes" in err
    assert "checkpoint.if_all_damaged=start_over" in err and "a fresh run" in err and "Traceback" not in err
    assert list_checkpoints(run_dir / "checkpoints") == []
    # A relaunch does not mistake the emptied checkpoints/ for a fresh run: same error, rows kept.
    with pytest.raises(NoValidCheckpoint, match="ckpt_32.json: not valid JSON"):
        train_run([*SMALL, "ppo.total_timesteps=2048"], run_dir)
    assert (run_dir / "metrics.csv").read_text() == rows_before
    summary = train_run([*SMALL, "ppo.total_timesteps=1024", "allow_config_change=true", "checkpoint.if_all_damaged=start_over"],
                        run_dir)
    assert summary.status == "completed" and summary.resumed_from is None and summary.updates == 16
    damaged = run_dir / "checkpoints" / DAMAGED
    kept = [p for p in damaged.iterdir() if p.name.endswith("-metrics.csv")]
    assert len(kept) == 1 and kept[0].read_text() == rows_before
    assert {"ckpt_32.json", "ckpt_32.msgpack", "ckpt_24.json", "ckpt_24.msgpack"} <= {p.name for p in damaged.iterdir()}
    assert [r["update"] for r in read_rows(run_dir)] == [str(u) for u in range(1, 17)]


def test_a_bad_if_all_damaged_value_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="checkpoint.if_all_damaged='maybe'.*error or start_over"):
        train_run([*SMALL, "checkpoint.if_all_damaged=maybe"], tmp_path / "run")


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_newer_labs_checkpoint_is_refused_through_launch(trained, tmp_path):
    run_dir = _killed(_copy(trained, tmp_path))
    for update in (24, 32):  # a newer ppo_lab's checkpoints, intact (their own checksums hold)
        _restamped(run_dir / "checkpoints" / f"ckpt_{update}.json", format_version="2.0", lab_version="2.0.0")
    proc = launch([*SMALL, "ppo.total_timesteps=2048"], run_dir, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"error: the checkpoint {run_dir / 'checkpoints' / 'ckpt_32.json'} is of format 2.0, written by ppo_lab 2.0.0; " \
           f"this ppo_lab {__version__} reads format 1.0 only" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (run_dir / "checkpoints" / DAMAGED).exists()  # intact, so not set aside


def _as_a_lab_before_1_0_left_it(run_dir: Path) -> Path:
    """The run dir as ppo_lab 0.1.0 wrote it: its manifest.json names no format (the lab's
    version only among the packages), its checkpoints are of format 5."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest = {k: v for k, v in manifest.items() if k not in ("format_version", "lab_version")}
    manifest["packages"]["ppo_lab"] = "0.1.0"
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    for meta_path in list_checkpoints(run_dir / "checkpoints"):
        _restamped(meta_path, format_version=5, lab_version=None)
    return run_dir


def _run_files(run_dir: Path) -> dict:
    """Every file of the run with its content, Hydra's own (.hydra/, the log) aside."""
    return {p.relative_to(run_dir): p.read_bytes() for p in sorted(run_dir.rglob("*"))
            if p.is_file() and ".hydra" not in p.parts and p.suffix != ".log"}


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_run_dir_of_a_lab_before_1_0_is_refused_by_a_relaunch_and_by_resume(trained, tmp_path):
    old = _as_a_lab_before_1_0_left_it(_killed(_copy(trained, tmp_path)))
    commit = json.loads((old / "manifest.json").read_text())["lab"]["commit"]
    lab = f"ppo_lab 0.1.0 at commit {commit[:12]}" if commit else "ppo_lab 0.1.0"
    refusal = (f"the run directory {old} is of a format before 1.0 (checkpoint format 5), written by {lab}; this "
               f"ppo_lab {__version__} reads format 1.0 only: train again in a new run directory, or use {lab} to "
               f"resume or read it")
    files = _run_files(old)
    proc = launch([*SMALL, "ppo.total_timesteps=2048"], old, timeout=120, check=False)  # a relaunch into it
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [f"error: {refusal}"]
    assert _run_files(old) == files  # nothing written, nothing moved aside
    fresh = tmp_path / "fresh"
    proc = launch([*SMALL, "ppo.total_timesteps=4096", f"resume={old}"], fresh, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [f"error: {refusal}"]
    assert not fresh.exists() and _run_files(old) == files


# --- a full disk ---------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_full_disk_fails_the_run_and_keeps_the_last_good_checkpoint(small_disk, caplog, monkeypatch):
    run_dir = small_disk / "run"
    # Default network: a checkpoint is ~110 kB, a chunk's metrics rows ~2 kB.
    args = [*[a for a in SMALL if not a.startswith("network.")], "ppo.total_timesteps=65536", "train.chunk_updates=2"]
    write_real = checkpoint_files.write_checkpoint

    def fill_after_the_first(*args, **kwargs):
        """The disk fills right after the run's first checkpoint (in the run's own thread, so
        at the same point however busy the machine is): small writes still fit, the next
        checkpoint does not."""
        path = write_real(*args, **kwargs)
        if not (small_disk / "filler").exists():
            fill_disk(small_disk, 48 * 1024)
        return path

    monkeypatch.setattr(checkpoint_files, "write_checkpoint", fill_after_the_first)
    with pytest.raises(OSError, match="No space left"):
        train_run(args, run_dir)
    monkeypatch.setattr(checkpoint_files, "write_checkpoint", write_real)
    summary = read_summary(run_dir)
    assert summary["status"] == "failed" and summary["stop_reason"] == "OSError" and "No space left" in summary["error"]
    assert not (run_dir / "run.lock").exists(), "released on a full disk too"
    kept = list_checkpoints(run_dir / "checkpoints")
    assert kept, "the last good checkpoint was lost"
    meta, _ = verify(kept[-1], kept[-1].with_suffix(".msgpack"))  # intact: its checksums hold
    assert not list((run_dir / "checkpoints").glob(".*.tmp")), "a half-written checkpoint was left behind"
    assert meta["update"] < 16, "the disk filled later than planned"
    # Space freed, a relaunch (with a shorter budget, so it ends soon) resumes from it.
    (small_disk / "filler").unlink()
    resumed = train_run([*args, "ppo.total_timesteps=1024", "allow_config_change=true"], run_dir)
    assert resumed.status == "completed" and resumed.resumed_from == meta["update"] and resumed.updates == 16
    keys = [(r["update"], r["seed"]) for r in read_rows(run_dir)]
    assert len(keys) == len(set(keys))
