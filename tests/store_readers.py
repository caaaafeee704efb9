"""The loggers' stores read back as a user's tools would see them, for the tests: TensorBoard's
event files through TensorBoard's own reader, W&B's offline run files (W&B ships no reader of
its transaction log, the file `wandb sync` uploads: its framing is leveldb's log format)."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from wandb.proto import wandb_internal_pb2 as pb


def read_scalars(logdir: Path) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value)] of one TensorBoard run directory."""
    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


_BLOCK = 32768
_HEADER = struct.Struct("<4sHB")  # ":W&B", magic 0xBEE1, version
_RECORD = struct.Struct("<IHB")  # crc32, length, type (1 full, 2 first, 3 middle, 4 last)


def read_records(path: Path):
    """The protobuf `Record`s of an offline `run-<id>.wandb` file, up to a torn tail."""
    data = Path(path).read_bytes()
    ident, magic, _ = _HEADER.unpack_from(data, 0)
    assert ident == b":W&B" and magic == 0xBEE1, f"{path} is not a W&B transaction log"
    pos, pending = _HEADER.size, b""
    while pos + _RECORD.size <= len(data):
        left = _BLOCK - pos % _BLOCK
        crc, length, kind = _RECORD.unpack_from(data, pos) if left >= _RECORD.size else (0, 0, 0)
        if length == 0 and kind == 0:  # the block's trailing padding
            pos += left
            continue
        body = data[pos + _RECORD.size: pos + _RECORD.size + length]
        if zlib.crc32(bytes([kind]) + body) & 0xFFFFFFFF != crc:
            return  # a torn tail (the writer was killed)
        pos += _RECORD.size + length
        pending += body
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(pending)
            pending = b""
            yield record


def read_offline_run(path: Path) -> dict:
    """{"run": {id, group, job_type, project, name}, "config": {...}, "history": [{key: value}],
    "summary": {...}} of one offline session file."""
    out = {"run": {}, "config": {}, "history": [], "summary": {}}
    for rec in read_records(path):
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            r = rec.run
            out["run"] = {"id": r.run_id, "group": r.run_group, "job_type": r.job_type, "project": r.project, "name": r.display_name}
            out["config"].update({i.key: json.loads(i.value_json) for i in r.config.update})
        elif kind == "config":
            out["config"].update({i.key: json.loads(i.value_json) for i in rec.config.update})
        elif kind == "history":
            out["history"].append({(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in rec.history.item})
        elif kind == "summary":
            out["summary"].update({(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in rec.summary.update})
    return out


def wandb_runs(run_dir: Path) -> dict:
    """seed -> every kept offline session of that seed's W&B run, merged (sessions set aside
    under wandb/unfinished/ left out, as `wandb sync wandb/offline-run-*` leaves them)."""
    out = {}
    for path in sorted((Path(run_dir) / "wandb").glob("offline-run-*/run-*.wandb")):
        rec = read_offline_run(path)
        if not rec["run"]:
            continue  # a session killed before W&B flushed anything
        merged = out.setdefault(rec["config"]["seed"], {"ids": set(), "history": [], "summary": {}, "run": rec["run"],
                                                        "config": rec["config"]})
        merged["ids"].add(rec["run"]["id"])
        merged["history"] += rec["history"]
        merged["summary"].update(rec["summary"])
    return out
