"""What a run shows on the console: live progress (a bar on a terminal, one plain line per
chunk otherwise: SLURM logs), and the closing summary it ends with."""

from __future__ import annotations

import logging
import math
import os
import shlex
import shutil
import sys
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from ppo_lab.config_keys import train_command
from ppo_lab.judging.closing import closing_lines
from ppo_lab.judging.tables import formatted
from ppo_lab.run.resume import in_multirun
from ppo_lab.rundir.run_summary import RunSummary

log = logging.getLogger("ppo_lab.progress")
# The bar shows training's own steps/s in its text; tqdm's rate would count compile time.
BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}{postfix}]"


class ProgressRecorder:
    """The progress display as a recorder: one update per chunk (a bar on a terminal, one plain
    line otherwise), closed once at the end."""

    def __init__(self):
        self.bar = None

    def start(self, ctx) -> None:
        self.ctx, self.total = ctx, ctx.num_updates * ctx.batch_size
        if sys.stderr.isatty():
            # A terminal that reports no size (a fresh pty, some CI runners) makes tqdm draw a
            # zero-width bar or none at all (it reads -1 rows): fall back to 120x24.
            size = shutil.get_terminal_size(fallback=(120, 24))
            self.bar = tqdm(total=self.total, initial=ctx.start_update * ctx.batch_size, unit="step", unit_scale=True,
                            ncols=size.columns or 120, nrows=size.lines or 24, bar_format=BAR_FORMAT)
            # Log lines go above the bar (tqdm.write) instead of breaking into it.
            self.redirect = logging_redirect_tqdm()
            self.redirect.__enter__()

    def log_rows(self, rows: list[dict]) -> None:
        update = max(r["update"] for r in rows)
        entropies = [r["train/entropy"] for r in rows
                     if r["update"] == update and not math.isnan(r.get("train/entropy", math.nan))]
        entropy = sum(entropies) / len(entropies) if entropies else math.nan
        text = (f"return {formatted(self.ctx.windowed_return(), '.1f', 'n/a')} | entropy {formatted(entropy, '.3f', 'n/a')} | "
                f"sps {formatted(rows[-1].get('perf/sps', math.nan), ',.0f', 'n/a')}")
        timesteps = update * self.ctx.batch_size
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=False)
            self.bar.update(timesteps - self.bar.n)
        else:
            pct = 100.0 * timesteps / max(self.total, 1)
            log.info("update %d/%d | timesteps %d/%d (%.0f%%) | %s", update, self.ctx.num_updates, timesteps, self.total,
                     pct, text)

    def finish(self, summary: RunSummary | None = None) -> None:
        """Called when training ends (run/loop.py) and again at the end: the bar ends once."""
        if self.bar is not None:
            self.bar.close()
            self.redirect.__exit__(None, None, None)
            self.bar = None


def resume_command(run_dir: Path | None = None) -> str | None:
    """The command that continues this run from any folder: `ppo-lab resume RUN_DIR`, which
    relaunches it as it was launched (launching/resume_command.py); for a sweep's job, the sweep
    (its completed jobs are skipped). A run trained in-process, with no Hydra record of its
    command: the same overrides into its run dir. None where neither is known."""
    if HydraConfig.initialized():
        hc = HydraConfig.get()
        target = Path(hc.runtime.cwd) / (hc.sweep.dir if in_multirun() else run_dir or hc.runtime.output_dir)
        return f"ppo-lab resume {shlex.quote(str(shown_path(target)))}"
    if run_dir is None:
        return None
    return f"{train_command()} <the same overrides> hydra.run.dir={shlex.quote(str(run_dir))}"


def shown_path(path: Path) -> Path:
    """A path as short as it can be said: relative to the working directory when under it."""
    path = Path(path)
    try:
        return path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return path


def print_closing_summary(summary: RunSummary, run_dir: Path, cfg) -> None:
    """The run's last lines on stdout (docs: README "What a run leaves behind")."""
    run_dir = shown_path(run_dir)
    lines = closing_lines(summary, run_dir, eval_mode="greedy" if cfg.eval.deterministic else "sampled",
                          resume_command=resume_command(run_dir),
                          results_file="benchmark.json" if cfg.benchmark else "summary.json",
                          env={"metrics": dict(cfg.env.metrics)})  # the env as validated: its declared metrics
    say("\n".join(lines))


# Whether stdout's reader has gone (`stdout_gone`) in this process.
_stdout = {"gone": False}


def say(text: str) -> None:
    """`text` on stdout; where stdout is gone, in the log instead (launch.log)."""
    if not _stdout["gone"]:
        try:
            print(text, flush=True)
            return
        except BrokenPipeError:
            stdout_gone()
    log.warning("stdout is closed (the pipe's reader has ended); what it was to show:\n%s", text)


def stdout_gone() -> None:
    """Point stdout at /dev/null once its reader has gone, so nothing later fails writing to it
    (the log's console handler, Python's own flush at exit).

    `python launch.py ... | tee log` stopped by Ctrl+C: the terminal's SIGINT reaches the whole
    pipeline, so `tee` ends at once while the run, stopping cleanly, still has its log lines and
    its closing summary to write. That is no failure of the run: they go to launch.log."""
    _stdout["gone"] = True
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


class ConsoleHandler(logging.StreamHandler):
    """The console's log handler (conf/config.yaml `hydra.job_logging`: Hydra's, on stdout) that
    outlives a closed stdout: the lines go on in launch.log (`stdout_gone`), no traceback per line."""

    def handleError(self, record: logging.LogRecord) -> None:
        if isinstance(sys.exc_info()[1], BrokenPipeError):
            stdout_gone()
            return
        super().handleError(record)
