"""Live progress: a bar on a terminal, one plain line per chunk otherwise (SLURM logs)."""

from __future__ import annotations

import logging
import math
import shutil
import sys

from tqdm import tqdm

log = logging.getLogger("ppo_lab.progress")


def _fmt(x: float, spec: str = ".1f") -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


class Progress:
    def __init__(self, total_timesteps: int, start_timesteps: int, use_bar: bool | None = None):
        self.total = total_timesteps
        self.use_bar = sys.stderr.isatty() if use_bar is None else use_bar
        self.bar = None
        if self.use_bar:


            # A terminal that reports no size (a fresh pty, some CI runners) makes tqdm draw a
            # zero-width bar or none at all (it reads -1 rows): fall back to 120x24.
            size = shutil.get_terminal_size(fallback=(120, 24))
            self.bar = tqdm(total=total_timesteps, initial=start_timesteps, unit="step", unit_scale=True,
                            ncols=size.columns or 120, nrows=size.lines or 24)

    def update(self, *, update: int, num_updates: int, timesteps: int, sps: float, mean_return: float, entropy: float) -> None:
        text = f"return {_fmt(mean_return)} | entropy {_fmt(entropy, '.3f')} | sps {_fmt(sps, ',.0f')}"
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=False)
            self.bar.update(timesteps - self.bar.n)
        else:
            pct = 100.0 * timesteps / max(self.total, 1)
            log.info("update %d/%d | timesteps %d/%d (%.0f%%) | %s", update, num_updates, timesteps, self.total, pct, text)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class ProgressRecorder:
    """The progress display as a recorder: one update per chunk, closed at the end."""

    def __init__(self, use_bar: bool | None = None):
        self.use_bar = use_bar
        self.progress: Progress | None = None

    def start(self, ctx) -> None:
        self.ctx = ctx
        self.update = ctx.start_update
        self.progress = Progress(ctx.num_updates * ctx.batch_size, ctx.start_update * ctx.batch_size, self.use_bar)

    def log_rows(self, rows: list[dict]) -> None:
        self.update = max(r["update"] for r in rows)
        last = [r for r in rows if r["update"] == self.update]
        entropies = [r["train/entropy"] for r in last if not math.isnan(r.get("train/entropy", math.nan))]
        self.progress.update(
            update=self.update, num_updates=self.ctx.num_updates, timesteps=self.update * self.ctx.batch_size,
            sps=rows[-1].get("perf/sps", math.nan), mean_return=self.ctx.windowed_return(),
            entropy=sum(entropies) / len(entropies) if entropies else math.nan,
        )

    def finish(self, summary: dict) -> None:
        if self.progress is not None:
            self.progress.close()
