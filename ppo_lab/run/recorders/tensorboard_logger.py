"""TensorBoard logger: event files under `<run_dir>/tb/seed_<S>/`, one TensorBoard run per seed.

    python launch.py logger=[csv,tensorboard]
    tensorboard --logdir outputs/            # every run and seed, side by side

Written with tensorboardX's event-file writer and summaries (no TensorFlow/PyTorch needed), in
this thread: tensorboardX's `SummaryWriter` hands events to a thread through a queue and its
`flush()` does not wait for that queue, so a run killed after a flush could lose updates that
loggers.json says TensorBoard holds (seen: a killed session's last two updates gone). Scalars
keep the lab's metric names with `step=update` (plus `charts/timesteps`); the resolved config
goes in as text; the final evaluation and final metrics as `eval/*` and `final/*` scalars at the
last update. A population's member (docs/pbt.md) is a seed: its own TensorBoard run, its
explored values as `pbt/<key>` scalars and its member number in the config text.

Resume (per_seed.py): each update is written once; a seed's file opened on a resume starts
with a session start at the first update past what loggers.json says TensorBoard holds (its
`purge_step`), so TensorBoard drops any events at or after it in earlier files.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

from omegaconf import OmegaConf
from tensorboardX.event_file_writer import EventsWriter
from tensorboardX.proto.event_pb2 import Event, SessionLog
from tensorboardX.summary import scalar, text

from ppo_lab.run.recorders.per_seed import PerSeedLogger, population_member, row_metrics, seed_results
from ppo_lab.rundir.run_summary import RunSummary


class EventFile(EventsWriter):
    """One seed's event file of one session, each event written when it is added."""

    def __init__(self, logdir: Path, purge_step: int | None):
        logdir.mkdir(parents=True, exist_ok=True)
        # Named by the second it was opened in: a resumed session that starts in the same second
        # as the killed one would overwrite its file (seen under load: updates 1-4 gone). A suffix
        # of the time in nanoseconds, fixed width, keeps the files apart and in the order
        # TensorBoard reads them (by name), which purge_step relies on.
        super().__init__(str(logdir / "events"), f".{time.time_ns():020d}")
        if purge_step is not None:
            self.write_event(Event(step=purge_step, session_log=SessionLog(status=SessionLog.START)))

    def add(self, summary, step: int) -> None:
        self.write_event(Event(wall_time=time.time(), step=step, summary=summary))


class TensorBoardLogger(PerSeedLogger):
    name = "tensorboard"

    def __init__(self, run_dir: Path, cfg, options: dict):
        super().__init__(run_dir, cfg)
        self.root = self.run_dir / str((options or {}).get("subdir") or "tb")
        self.writers: dict[int, EventFile] = {}
        self.track()

    def _writer(self, seed: int) -> EventFile:
        writer = self.writers.get(seed)
        if writer is None:
            logdir = self.root / f"seed_{seed}"
            resumed = logdir.exists() and any(logdir.glob("events.out.tfevents.*"))
            writer = EventFile(logdir, self.held[seed] + 1 if resumed else None)
            if not resumed:
                member = population_member(self.cfg, seed)
                extra = {"seed": seed, **({"member": member} if member is not None else {})}
                config_text = OmegaConf.to_yaml(OmegaConf.create(dict(self.cfg.resolved, **extra)))
                writer.add(text("config", "```\n" + config_text + "\n```"), 0)
            self.writers[seed] = writer
        return writer

    def write(self, seed: int, rows: list[dict]) -> None:
        writer = self._writer(seed)
        for row in rows:
            for name, value in row_metrics(row).items():
                writer.add(scalar(name if "/" in name else "charts/" + name, value), int(row["update"]))
        writer.flush()  # in the file before loggers.json says so

    def finish(self, summary: RunSummary) -> None:
        seeds = [int(s) for s in summary.seeds or self.seeds]
        for index, seed in enumerate(seeds):
            if seed not in self.held or (seed not in self.writers and not summary.eval):
                continue
            step = int(summary.updates or self.held[seed])
            writer = self._writer(seed)
            for name, value in seed_results(summary, index).items():
                writer.add(scalar(name, value), step)
            brief = {"status": summary.status, "stop_reason": summary.stop_reason, "updates": summary.updates,
                     "timesteps": summary.timesteps, "compile_s": summary.compile_s, "sps": summary.sps}
            writer.add(text("summary", "```\n" + json.dumps(brief, indent=1) + "\n```"), step)
        for writer in self.writers.values():
            writer.close()
        self.writers = {}

    def abandon(self) -> None:
        """Let go of the files after a failure (a full disk): close each, errors ignored (the
        disk that failed the write fails the close too)."""
        for writer in self.writers.values():
            with contextlib.suppress(OSError):
                writer.close()
        self.writers = {}


def make_logger(run_dir: Path, cfg, options: dict) -> TensorBoardLogger:
    return TensorBoardLogger(run_dir, cfg, options)

