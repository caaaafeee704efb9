"""Weights & Biases logger: one W&B run per seed, offline unless the user turns it online.

    python launch.py logger=[csv,wandb]                          # offline, files in <run_dir>/wandb/
    python launch.py logger=[csv,wandb] logger.wandb.mode=online # needs `wandb login` beforehand
    wandb sync <run_dir>/wandb/offline-run-*                     # upload offline runs later

- One W&B run per seed (`reinit="create_new"`), grouped by `logger.wandb.group`, else by the
  Hydra sweep (multirun) the job belongs to, else by the experiment; `job_type` is the reward
  mode; the resolved config (with this run's seed) is the run config.
- Metrics keep the lab's metric names (`train/*`, `reward/*`, `actions/*`, `true/*`,
  `perf/sps`) and are logged with `step=update`, plus `timesteps` and `wall_s`.
- The final evaluation (`eval/*`), the `final/*` metrics, status and compile time go into the
  run summary.
- A population (docs/pbt.md): each member is a seed, so a W&B run; its config has `member`, its
  history the explored values as `pbt/<key>`, its summary `pbt/best_member` (true for the
  population's best member at the end).
- Never blocks: offline by default, silent, no git/code/system-stats collection, no login.
- Resume: the W&B run ids live in `<run_dir>/wandb/ppo_lab_runs.json`; a resumed run (same
  run dir) continues the same ids (`resume="allow"`). Each update is logged exactly once: the
  updates W&B already holds are read back from its own transaction logs in `<run_dir>/wandb/`
  and skipped; updates it lost (a SIGKILLed process never flushes its W&B buffer) but that
  metrics.csv kept are logged again from metrics.csv before the new ones.
"""

from __future__ import annotations

import json
import logging
import math
import os
import struct
import uuid
import zlib
from pathlib import Path

import wandb
from wandb.proto import wandb_internal_pb2 as pb

from ppo_lab.errors import ConfigError
from ppo_lab.run.recorders import ROW_KEYS, best_member, population_member, sweep_group
from ppo_lab.rundir import METRICS, read_json, read_seed_rows, write_json_atomic

log = logging.getLogger(__name__)

STATE_FILE = "ppo_lab_runs.json"
# W&B folders the user set before any run of this process touched them.
_USER_ENV = {var: os.environ.get(var) for var in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR")}
DEFAULTS = {"project": "ppo_lab", "mode": "offline", "entity": None, "group": None, "tags": None}


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class WandbLogger:
    def __init__(self, run_dir: Path, cfg, options: dict):
        opts = {**DEFAULTS, **{k: v for k, v in (options or {}).items() if v is not None or k in ("entity", "group")}}
        mode = opts["mode"]
        if mode not in ("offline", "online", "disabled"):

            raise ConfigError("logger.wandb.mode", mode, "offline, online or disabled")
        self.run_dir = Path(run_dir)
        self.dir = self.run_dir / "wandb"
        self.dir.mkdir(parents=True, exist_ok=True)
        # Everything W&B writes (run files, debug logs, its own cache/config) stays in the run dir.
        os.environ.setdefault("WANDB_SILENT", "true")
        os.environ["WANDB_DIR"] = str(self.run_dir)
        if mode != "online":  # the user's own settings win; else this run's folder (per job in a multirun)
            for var, sub in (("WANDB_CONFIG_DIR", ".config"), ("WANDB_CACHE_DIR", ".cache"), ("WANDB_DATA_DIR", ".data")):
                if _USER_ENV.get(var) is None:
                    os.environ[var] = str(self.dir / sub)


        self.state_path = self.dir / STATE_FILE
        state = read_json(self.state_path, default={})
        self.ids: dict[str, str] = state.get("ids", {})
        # What W&B really holds (not what we sent): a killed process loses its unflushed tail.
        self.last_logged: dict[str, int] = {k: persisted_step(self.dir, v) for k, v in self.ids.items()}
        self.backfilled: set[int] = set()
        group = opts["group"] or sweep_group() or cfg.experiment
        job_type = str(cfg.reward.name)
        settings = wandb.Settings(
            silent=True, console="off", disable_git=True, save_code=False, x_disable_stats=True,
            x_disable_machine_info=True, init_timeout=120,
        )
        self.runs, self.members = {}, {}
        for seed in cfg.seeds:
            key = str(seed)
            run_id = self.ids.get(key) or uuid.uuid4().hex[:8]
            self.ids[key] = run_id
            config = dict(cfg.resolved, seed=seed, first_seed=cfg.seed, run_dir=str(self.run_dir))
            self.members[seed] = member = population_member(cfg, seed)
            if member is not None:
                config["member"] = member
            self.runs[seed] = wandb.init(
                project=opts["project"], entity=opts["entity"], group=group, job_type=job_type,
                name=f"{cfg.experiment}-{self.run_dir.name}-seed{seed}", id=run_id, resume="allow",
                config=config, tags=list(opts["tags"] or []) or None, dir=str(self.run_dir), mode=mode,
                reinit="create_new", settings=settings,
            )
        self._save_state()

    def _save_state(self) -> None:
        write_json_atomic(self.state_path, {"ids": self.ids, "last_logged": self.last_logged})

    def _backfill(self, seed: int, first_update: int) -> list[dict]:
        """metrics.csv rows of `seed` that W&B lost, before the first update of this session."""
        self.backfilled.add(seed)
        last = self.last_logged.get(str(seed), 0)
        if first_update <= last + 1:
            return []
        rows = read_seed_rows(self.run_dir / METRICS, seed, after=last, before=first_update)
        # A blank cell (NaN) was not logged the first time either.
        return [{k: v for k, v in r.items() if not (isinstance(v, float) and math.isnan(v))} for r in rows]

    def log_rows(self, rows: list[dict]) -> None:
        logged = False
        firsts: dict[int, int] = {}
        for row in rows:
            firsts.setdefault(int(row["seed"]), int(row["update"]))
        rows = [b for seed, first in firsts.items() if seed not in self.backfilled for b in self._backfill(seed, first)] + list(rows)
        for row in rows:
            seed, update = int(row["seed"]), int(row["update"])
            run = self.runs.get(seed)
            if run is None or update <= self.last_logged.get(str(seed), 0):
                continue  # already logged before a resume: W&B steps must only grow
            data = {k: v for k, v in row.items() if k not in ROW_KEYS and _finite(v)}
            data["update"] = update
            run.log(data, step=update)
            self.last_logged[str(seed)] = update
            logged = True
        if logged:
            self._save_state()

    def finish(self, summary: dict) -> None:
        seeds = list(summary.get("seeds") or self.runs)
        failed = summary.get("status") == "failed"
        for seed, run in self.runs.items():
            i = seeds.index(seed) if seed in seeds else None
            values = {"status": summary.get("status"), "stop_reason": summary.get("stop_reason"),
                      "compile_s": summary.get("compile_s"), "sps": summary.get("sps"),
                      "timesteps": summary.get("timesteps"), "updates": summary.get("updates")}
            for section in ("final", "eval"):
                for name, per_seed in (summary.get(section) or {}).items():
                    if i is not None and i < len(per_seed) and _finite(per_seed[i]) and name not in ROW_KEYS:
                        values[f"eval/{name}" if section == "eval" else f"final/{name}"] = per_seed[i]
            if self.members[seed] is not None and best_member(summary) is not None:
                values["pbt/best_member"] = self.members[seed] == best_member(summary)
            run.summary.update({k: v for k, v in values.items() if v is not None})
            run.finish(exit_code=1 if failed else 0)
        self._save_state()


def persisted_step(wandb_dir: Path, run_id: str) -> int:
    """The last history step W&B's transaction logs of run `run_id` hold (0 if none)."""
    last = 0
    for path in Path(wandb_dir).glob(f"*run-*-{run_id}/run-{run_id}.wandb"):
        try:
            for rec in read_records(path):
                if rec.WhichOneof("record_type") == "history":
                    last = max(last, max((int(json.loads(i.value_json)) for i in rec.history.item if i.key == "_step"), default=0))
        except (OSError, ValueError) as exc:
            log.warning("could not read %s: %s", path, exc)
    return last


def make_logger(run_dir: Path, cfg, options: dict) -> WandbLogger:
    return WandbLogger(run_dir, cfg, options)


# --- reading offline run files back (tests, debugging) ------------------------------------
_BLOCK = 32768
_HEADER = struct.Struct("<4sHB")  # ":W&B", magic 0xBEE1, version
_RECORD = struct.Struct("<IHB")  # crc32, length, type (1 full, 2 first, 3 middle, 4 last)


def read_records(path: Path):
    """The protobuf `Record`s of an offline `run-<id>.wandb` file (W&B's leveldb-style log)."""
    data = Path(path).read_bytes()
    ident, magic, _ = _HEADER.unpack_from(data, 0)
    if ident != b":W&B" or magic != 0xBEE1:
        raise ValueError(f"{path} is not a W&B transaction log")
    pos, pending = _HEADER.size, b""
    while pos + _RECORD.size <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _RECORD.size:  # block trailer padding
            pos += left
            continue
        crc, length, kind = _RECORD.unpack_from(data, pos)
        if length == 0 and kind == 0:
            pos += left
            continue
        body = data[pos + _RECORD.size: pos + _RECORD.size + length]
        if zlib.crc32(bytes([kind]) + body) & 0xFFFFFFFF != crc:
            break  # a torn tail (the writer was killed)
        pos += _RECORD.size + length
        pending += body
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(pending)
            pending = b""
            yield record


def read_offline_run(path: Path) -> dict:
    """{"run": {id, group, job_type, ...}, "config": {...}, "history": [{step, metrics}], "summary": {...}}."""
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
            items = {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in rec.history.item}
            out["history"].append(items)
        elif kind == "summary":
            for i in rec.summary.update:
                out["summary"][i.key or "/".join(i.nested_key)] = json.loads(i.value_json)
    return out
