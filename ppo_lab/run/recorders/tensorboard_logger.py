"""TensorBoard logger: event files under `<run_dir>/tb/seed_<S>/`, one TensorBoard run per seed.

    python launch.py logger=[csv,tensorboard]
    tensorboard --logdir outputs/            # every run and seed, side by side

Written with tensorboardX's `SummaryWriter` (no TensorFlow/PyTorch needed). Scalars keep the
lab's metric names with `step=update` (plus `charts/timesteps`); the resolved config goes in as
text; the final evaluation and final metrics as `eval/*` and `final/*` scalars at the last update. A population's member
(docs/pbt.md) is a seed: its own TensorBoard run, its explored values as `pbt/<key>` scalars and
its member number in the config text.

Resume (per_seed.py): each update is written once; a seed's writer opened on a resume passes
the first update past what loggers.json says TensorBoard holds as `purge_step`, so TensorBoard
drops any events at or after it (written after the last record of what it held).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from omegaconf import OmegaConf
from tensorboardX import SummaryWriter

from ppo_lab.run.recorders.per_seed import PerSeedLogger, population_member, row_metrics, seed_results
from ppo_lab.rundir.run_summary import RunSummary


class TensorBoardLogger(PerSeedLogger):
    name = "tensorboard"

    def __init__(self, run_dir: Path, cfg, options: dict):
        super().__init__(run_dir, cfg)
        self.root = self.run_dir / str((options or {}).get("subdir") or "tb")
        self.flush_secs = int((options or {}).get("flush_secs") or 10)
        self.writers: dict[int, SummaryWriter] = {}
        self.track()

    def _writer(self, seed: int) -> SummaryWriter:
        writer = self.writers.get(seed)
        if writer is None:
            logdir = self.root / f"seed_{seed}"
            resumed = logdir.exists() and any(logdir.glob("events.out.tfevents.*"))
            # The event file is named by the second it was opened in: a resumed session that
            # starts in the same second as the killed one would overwrite its file (seen under
            # load: updates 1-4 gone). A suffix of the time in nanoseconds, fixed width, keeps
            # the files apart and in the order TensorBoard must read them (by name) for purge_step.
            writer = SummaryWriter(logdir=str(logdir), flush_secs=self.flush_secs,
                                   purge_step=self.held[seed] + 1 if resumed else None,
                                   filename_suffix=f".{time.time_ns():020d}")
            if not resumed:
                member = population_member(self.cfg, seed)
                extra = {"seed": seed, **({"member": member} if member is not None else {})}
                text = OmegaConf.to_yaml(OmegaConf.create(dict(self.cfg.resolved, **extra)))
                writer.add_text("config", "```\n" + text + "\n```", 0)
            self.writers[seed] = writer
        return writer

    def write(self, seed: int, rows: list[dict]) -> None:
        writer = self._writer(seed)
        for row in rows:
            for name, value in row_metrics(row).items():
                writer.add_scalar(name if "/" in name else "charts/" + name, value, int(row["update"]))
        writer.flush()  # in the file before loggers.json says so

    def finish(self, summary: RunSummary) -> None:
        seeds = [int(s) for s in summary.seeds or self.seeds]
        for index, seed in enumerate(seeds):
            if seed not in self.held or (seed not in self.writers and not summary.eval):
                continue
            step = int(summary.updates or self.held[seed])
            writer = self._writer(seed)
            for name, value in seed_results(summary, index).items():
                writer.add_scalar(name, value, step)
            brief = {"status": summary.status, "stop_reason": summary.stop_reason, "updates": summary.updates,
                     "timesteps": summary.timesteps, "compile_s": summary.compile_s, "sps": summary.sps}
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

