"""Faults a long run meets in its checkpoints: a damaged newest one, every one damaged, one of
an older format (format 1, a real run directory in tests/fixtures/), one of a newer format,
and a full disk while training (a small tmpfs, where this machine lets root mount one)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import flax.serialization
import numpy as np
import pytest

from conftest import ROOT, fill_disk, launch, read_rows, read_summary, train_run

from ppo_lab.errors import ConfigError
from ppo_lab.rundir.checkpoint_format import (
    DAMAGED,
    FORMAT_VERSION,
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
from ppo_lab.run.checkpoint_migrations import infer_version, migrate

FORMAT1_RUN = ROOT / "tests" / "fixtures" / "format1_run"
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
    assert meta["format_version"] == FORMAT_VERSION and meta["payload"]["file"] == "ckpt_5.msgpack"
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


def test_an_unversioned_checkpoint_verifies_by_its_json_only(tmp_path):
    (tmp_path / "ckpt_3.json").write_text(json.dumps({"update": 3}))
    (tmp_path / "ckpt_3.msgpack").write_bytes(b"anything")
    assert verify(tmp_path / "ckpt_3.json", tmp_path / "ckpt_3.msgpack") == ({"update": 3}, b"anything")


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


# --- format versions: migrate or refuse -----------------------------------------------------

def test_a_newer_or_unknown_format_is_refused_naming_both_versions():
    with pytest.raises(CheckpointFormatError, match=rf"format {FORMAT_VERSION + 1}.*newer.*formats 1 to {FORMAT_VERSION}"):
        migrate({}, FORMAT_VERSION + 1, {}, "ckpt_9.json")
    with pytest.raises(CheckpointFormatError, match=rf"format 0.*formats 1 to {FORMAT_VERSION}"):
        migrate({}, 0, {}, "ckpt_9.json")
    with pytest.raises(CheckpointFormatError, match="'3b' is not a version number"):
        migrate({}, "3b", {}, "ckpt_9.json")


def test_a_format1_payload_gains_the_schedule_count_and_value_norm():
    raw = flax.serialization.msgpack_restore((FORMAT1_RUN / "checkpoints" / "ckpt_16.msgpack").read_bytes())
    assert infer_version(raw) == 1
    template = {"value_norm": None, "opt_state": {"0": {}, "1": {"count": 0, "hyperparams": {}, "inner_state": {},
                                                               "hyperparams_states": {"learning_rate": {"count": 0}}}}}
    out = migrate(raw, 1, template, "ckpt_16.json")
    assert out["value_norm"] is None and infer_version(out) == 2
    assert out["opt_state"]["1"]["hyperparams_states"]["learning_rate"]["count"].tolist() == [64]  # 16 updates x 4 steps
    with pytest.raises(CheckpointFormatError, match="no PopArt statistics.*ppo.value_norm=null"):
        migrate(raw, 1, {**template, "value_norm": {"mean": 0.0}}, "ckpt_16.json")


def test_format_3_and_4_payloads_gain_no_memory_and_no_reward_statistics():
    raw = {"params": {"w": np.zeros(2)}, "value_norm": None}
    out = migrate(raw, 3, {"memory": None, "reward_norm": None}, "ckpt_8.json")
    assert out["memory"] is None and out["reward_norm"] is None and out["params"] is raw["params"]
    with pytest.raises(CheckpointFormatError, match="format 4, trained without reward normalisation.*normalize_reward=false"):
        migrate({**raw, "memory": None}, 4, {"memory": None, "reward_norm": {"var": 1.0}}, "ckpt_8.json")
    with pytest.raises(CheckpointFormatError, match="feed-forward policy.*network.recurrent=null"):
        migrate(raw, 3, {"memory": {"actor": 0.0}, "reward_norm": None}, "ckpt_8.json")


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
def test_a_newer_format_checkpoint_is_refused_through_launch(trained, tmp_path):
    run_dir = _killed(_copy(trained, tmp_path))
    for update in (24, 32):  # a newer ppo_lab's checkpoint, intact (its own checksums hold)
        meta_path = run_dir / "checkpoints" / f"ckpt_{update}.json"
        meta = json.loads(meta_path.read_text())
        meta["format_version"] = FORMAT_VERSION + 1
        payload = meta_path.with_suffix(".msgpack").read_bytes()
        new = stamp({k: v for k, v in meta.items() if k not in ("payload", "meta_sha256", "format_version")}, payload,
                    meta_path.with_suffix(".msgpack").name)
        new["format_version"] = FORMAT_VERSION + 1
        new["meta_sha256"] = sha256(_canonical(new))
        meta_path.write_text(json.dumps(new))
    proc = launch([*SMALL, "ppo.total_timesteps=2048"], run_dir, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"ckpt_32.json is checkpoint format {FORMAT_VERSION + 1}" in proc.stderr
    assert f"formats 1 to {FORMAT_VERSION}" in proc.stderr and "Traceback" not in proc.stderr
    assert not (run_dir / "checkpoints" / DAMAGED).exists()  # intact, so not set aside




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
