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
- Resume (per_seed.py): a resumed run (same run dir) continues the same W&B run ids
  (`resume="allow"`), each update logged once. W&B buffers its offline file and a killed
  process loses that buffer, so what it holds is known only where a session finished (or,
  online, from W&B's server: `run.starting_step`). A session that did not finish (the process
  was killed) holds an unknown part of its updates: its folder is set aside under
  `wandb/unfinished/` (out of `wandb sync wandb/offline-run-*`) and the next session logs
  those updates again, from metrics.csv up to the checkpoint and then as it recomputes them.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from pathlib import Path

import wandb

from ppo_lab.errors import ConfigError
from ppo_lab.run.recorders.per_seed import (
    PerSeedLogger,
    is_best_member,
    population_member,
    row_metrics,
    seed_results,
    sweep_group,
)
from ppo_lab.rundir.run_summary import RunSummary

log = logging.getLogger(__name__)

# W&B folders the user set before any run of this process touched them.
_USER_ENV = {var: os.environ.get(var) for var in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR")}
DEFAULTS = {"project": "ppo_lab", "mode": "offline", "entity": None, "group": None, "tags": None}
UNFINISHED = "unfinished"


class WandbLogger(PerSeedLogger):
    name = "wandb"
    held_survives_a_kill = False  # its file is flushed every 15 s and at finish

    def __init__(self, run_dir: Path, cfg, options: dict):
        super().__init__(run_dir, cfg)
        opts = {**DEFAULTS, **{k: v for k, v in (options or {}).items() if v is not None or k in ("entity", "group")}}
        mode = opts["mode"]
        if mode not in ("offline", "online", "disabled"):
            raise ConfigError("logger.wandb.mode", mode, "offline, online or disabled")
        self.dir = self.run_dir / "wandb"
        self.dir.mkdir(parents=True, exist_ok=True)
        # Everything W&B writes (run files, debug logs, its own cache/config) stays in the run dir.
        os.environ.setdefault("WANDB_SILENT", "true")
        os.environ["WANDB_DIR"] = str(self.run_dir)
        if mode != "online":  # the user's own settings win; else this run's folder (per job in a multirun)
            for var, sub in (("WANDB_CONFIG_DIR", ".config"), ("WANDB_CACHE_DIR", ".cache"), ("WANDB_DATA_DIR", ".data")):
                if _USER_ENV.get(var) is None:
                    os.environ[var] = str(self.dir / sub)
        self._set_aside_unfinished()
        ids = self.state.setdefault("runs", {})
        group = opts["group"] or sweep_group() or cfg.experiment
        settings = wandb.Settings(
            silent=True, console="off", disable_git=True, save_code=False, x_disable_stats=True,
            x_disable_machine_info=True, init_timeout=120,
        )
        self.runs = {}
        for seed in self.seeds:
            ids.setdefault(str(seed), uuid.uuid4().hex[:8])
            config = dict(cfg.resolved, seed=seed, first_seed=cfg.seed, run_dir=str(self.run_dir))
            member = population_member(cfg, seed)
            if member is not None:
                config["member"] = member
            self.runs[seed] = wandb.init(
                project=opts["project"], entity=opts["entity"], group=group, job_type=str(cfg.reward.name),
                name=f"{cfg.experiment}-{self.run_dir.name}-seed{seed}", id=ids[str(seed)], resume="allow",
                config=config, tags=list(opts["tags"] or []) or None, dir=str(self.run_dir), mode=mode,
                reinit="create_new", settings=settings,
            )
        if mode != "disabled":  # each seed's folder of this session, until it finishes
            self.state["open"] = {str(seed): run.sync_dir for seed, run in self.runs.items()}
        self.track()

    def _set_aside_unfinished(self) -> None:
        for seed, folder in (self.state.pop("open", None) or {}).items():
            if Path(folder).exists():
                shutil.move(folder, self.dir / UNFINISHED / Path(folder).name)
                log.warning("W&B: seed %s's last session did not finish; its folder %s is set aside in %s and its "
                            "updates are logged again", seed, Path(folder).name, self.dir / UNFINISHED)

    def store_holds(self, seed: int) -> int | None:
        """Online, W&B's server says where a resumed run goes on (offline it says 0)."""
        start = self.runs[seed].starting_step
        return start - 1 if start else None

    def write(self, seed: int, rows: list[dict]) -> None:
        for row in rows:
            self.runs[seed].log({**row_metrics(row), "update": int(row["update"])}, step=int(row["update"]))

    def finish(self, summary: RunSummary) -> None:
        seeds = [int(s) for s in summary.seeds or self.runs]
        for seed, run in self.runs.items():
            values = {"status": summary.status, "stop_reason": summary.stop_reason, "compile_s": summary.compile_s,
                      "sps": summary.sps, "timesteps": summary.timesteps, "updates": summary.updates}
            if seed in seeds:
                values.update(seed_results(summary, seeds.index(seed)))
            values["pbt/best_member"] = is_best_member(self.cfg, summary, seed)
            run.summary.update({k: v for k, v in values.items() if v is not None})
            run.finish(exit_code=1 if summary.status == "failed" else 0)
        self.state.pop("open", None)  # finished: what each run holds is in its file
        self.save_state()


def make_logger(run_dir: Path, cfg, options: dict) -> WandbLogger:
    return WandbLogger(run_dir, cfg, options)
