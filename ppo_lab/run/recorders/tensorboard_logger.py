"""TensorBoard logger: event files under `<run_dir>/tb/seed_<S>/`, one TensorBoard run per seed.

    python launch.py logger=[csv,tensorboard]
    tensorboard --logdir outputs/            # every run and seed, side by side

Written with tensorboardX's `SummaryWriter` (no TensorFlow/PyTorch needed). Scalars keep their
The lab's metric names with `step=update` (plus `charts/timesteps`); the resolved config goes in
as text; the final evaluation as `eval/*` scalars at the last update. A population's member
(docs/pbt.md) is a seed: its own TensorBoard run, its explored values as `pbt/<key>` scalars and
its member number in the config text.

Resume: the first update this session logs is passed as `purge_step`, so TensorBoard drops
any events at or after it that an interrupted session wrote past its last checkpoint (no
update shows twice).
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path

from omegaconf import OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboardX import SummaryWriter

from ppo_lab.run.recorders import ROW_KEYS, population_member

log = logging.getLogger(__name__)

SKIP = ROW_KEYS


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class TensorBoardLogger:
    def __init__(self, run_dir: Path, cfg, options: dict):
        self.root = Path(run_dir) / str((options or {}).get("subdir") or "tb")
        self.flush_secs = int((options or {}).get("flush_secs") or 10)
        self.seeds = list(cfg.seeds)
        self.cfg = cfg
        self.resolved = cfg.resolved
        self.writers: dict = {}
        self.last_update = 0

    def _writer(self, seed: int, first_update: int):
        writer = self.writers.get(seed)
        if writer is None:

            logdir = self.root / f"seed_{seed}"
            resumed = logdir.exists() and any(logdir.glob("events.out.tfevents.*"))
            # The event file is named by the second it was opened in: a resumed session that
            # starts in the same second as the killed one would overwrite its file (seen under
            # load: updates 1-4 gone). A suffix of the time in nanoseconds, fixed width, keeps
            # the files apart and in the order TensorBoard must read them (by name) for purge_step.
            writer = SummaryWriter(logdir=str(logdir), flush_secs=self.flush_secs, purge_step=first_update if resumed else None,
                                   filename_suffix=f".{time.time_ns():020d}")
            if not resumed:

                member = population_member(self.cfg, seed)
                extra = {"seed": seed, **({"member": member} if member is not None else {})}
                text = OmegaConf.to_yaml(OmegaConf.create(dict(self.resolved, **extra)))
                writer.add_text("config", "```\n" + text + "\n```", 0)
            self.writers[seed] = writer
        return writer

    def log_rows(self, rows: list[dict]) -> None:
        for row in rows:
            seed, update = int(row["seed"]), int(row["update"])
            writer = self._writer(seed, update)
            for name, value in row.items():
                if name in SKIP or not _finite(value):
                    continue
                tag = "charts/" + name if "/" not in name else name
                writer.add_scalar(tag, float(value), update)
            self.last_update = max(self.last_update, update)
        for writer in self.writers.values():
            writer.flush()

    def finish(self, summary: dict) -> None:
        seeds = list(summary.get("seeds") or self.seeds)
        step = int(summary.get("updates") or self.last_update)
        for i, seed in enumerate(seeds):
            if seed not in self.writers and not summary.get("eval"):
                continue
            writer = self._writer(seed, step + 1)
            for name, per_seed in (summary.get("eval") or {}).items():
                if i < len(per_seed) and _finite(per_seed[i]):
                    writer.add_scalar(f"eval/{name}", float(per_seed[i]), step)
            brief = {k: summary.get(k) for k in ("status", "stop_reason", "updates", "timesteps", "compile_s", "sps")}
            writer.add_text("summary", "```\n" + json.dumps(brief, indent=1) + "\n```", step)
        for writer in self.writers.values():
            writer.close()
        self.writers = {}

    def abandon(self) -> None:
        """Let go of the writers after a failure (a full disk): close each, errors ignored.
        A close that fails leaves tensorboardX's writer open, and it retries (and fails, with a
        traceback) at interpreter exit: stop its worker thread and mark it closed instead."""
        for writer in self.writers.values():
            file_writers = list((getattr(writer, "all_writers", None) or {}).values())
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - the disk that failed the write fails the close too
                for file_writer in file_writers:
                    events = getattr(file_writer, "event_writer", None)
                    worker = getattr(events, "_worker", None)
                    try:
                        if worker is not None and worker.is_alive():
                            worker.stop()
                    except Exception:  # noqa: BLE001
                        pass
                    if events is not None and hasattr(events, "_closed"):
                        events._closed = True
        self.writers = {}


def make_logger(run_dir: Path, cfg, options: dict) -> TensorBoardLogger:
    return TensorBoardLogger(run_dir, cfg, options)


def read_scalars(logdir: Path) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value)] of one TensorBoard run directory (TensorBoard's own reader)."""
    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
