"""Live dashboard of a run or a whole sweep, read from what the runs write.

    ppo-lab watch outputs/runs/cartpole/2026-11-21/10-05-00-123456   # one run
    ppo-lab watch outputs/sweeps/foraging/2026-11-21                 # every run below
    ppo-lab watch DIR --once                                         # one snapshot (logs, tests)

It only reads each run's `metrics.csv` (new lines since the last refresh), `summary.json`
and `config.yaml`, so it works on a run training on this machine, on a SLURM node writing to
a shared file system, or on a finished sweep, and it never slows training down.

Per run: status, progress, steps/s, return, episode length, entropy, approx KL, clip fraction,
policy and value losses, the env's true-objective counters (`true/*`) and reward components
(`reward/*`) where it has them, the action distribution, a return sparkline, and health
warnings (entropy collapse, KL, clip fraction; thresholds from the run's `health` config).

Keys: up/down (or k/j) select a run, `s` then `y` writes the selected run's STOP file (it
stops cleanly after its current chunk, with a checkpoint and evaluation), `q` quits.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import math
import os
import select
import sys
import termios
import time
import tty
from dataclasses import dataclass, field
from pathlib import Path

from rich.columns import Columns
from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ppo_lab import rundir
from ppo_lab.analysis.action_columns import INVALID, continuous_dimensions, discrete_shares
from ppo_lab.config import HealthConfig
from ppo_lab.estimators import finite_mean
from ppo_lab.judging.headline import TRAIN_LENGTH, TRAIN_RETURN
from ppo_lab.judging.health import health_messages
from ppo_lab.judging.tables import formatted
from ppo_lab.rundir.run_summary import RunSummary

MAIN = [  # (column, metric, format)
    ("return", TRAIN_RETURN, ".1f"),
    ("ep len", TRAIN_LENGTH, ".0f"),
    ("entropy", "train/entropy", ".3f"),
    ("kl", "train/approx_kl", ".4f"),
    ("clip", "train/clip_frac", ".3f"),
    ("pg loss", "train/pg_loss", ".4f"),
    ("vf loss", "train/vf_loss", ".3g"),
]
SPARK = "▁▂▃▄▅▆▇█"
HISTORY = 400  # updates of the return curve kept
STOP_BY = "ppo_lab.analysis.watch"  # who wrote a STOP file, as the file says


@dataclass
class RunView:
    """What the dashboard knows about one run; `refresh()` reads only what is new."""
    path: Path
    latest: dict = field(default_factory=dict)  # seed -> last row
    finite: dict = field(default_factory=dict)  # seed -> {metric: last finite value}
    history: dict = field(default_factory=dict)  # update -> each seed's return, the last HISTORY updates
    summary: RunSummary | None = None  # None until the run writes summary.json
    config: dict = field(default_factory=dict)
    mtime: float | None = None
    tail: rundir.MetricsTail | None = None

    def __post_init__(self) -> None:
        rundir.check_format(self.path)  # a run dir of another format is refused, not misread
        self.tail = rundir.MetricsTail(self.path / rundir.METRICS)

    @property
    def columns(self) -> list[str] | None:
        return self.tail.columns

    def refresh(self) -> None:
        if not self.config and (self.path / rundir.CONFIG).exists():
            try:
                self.config = rundir.read_config(self.path, resolve=False)
            except Exception:  # noqa: BLE001 - unreadable now: try again next time
                self.config = {}
        try:
            self.summary = rundir.read_summary(self.path) or self.summary
        except (OSError, ValueError):
            pass
        self._read_metrics()

    def _read_metrics(self) -> None:
        try:
            self.mtime = (self.path / rundir.METRICS).stat().st_mtime
        except OSError:
            return
        rows, cut_back = self.tail.read_new()
        if cut_back:  # cut back on resume: what was read before no longer holds
            self.latest, self.finite, self.history = {}, {}, {}
        for row in rows:
            self.latest[row["seed"]] = row
            last = self.finite.setdefault(row["seed"], {})
            last.update({k: v for k, v in row.items() if not math.isnan(v)})
            self.history.setdefault(row["update"], []).append(row.get(TRAIN_RETURN, math.nan))
        for update in list(self.history)[:-HISTORY]:
            del self.history[update]

    # --- derived values -------------------------------------------------------------------
    def returns(self) -> list[float | None]:
        """The mean return over seeds of each update kept, in order (None: no episode ended)."""
        return [finite_mean(returns) for returns in self.history.values()]

    def metric(self, name: str) -> float | None:
        """Mean over seeds of each seed's last finite value (episode means are NaN in updates
        where no episode ended); None without one."""
        return finite_mean(values.get(name) for values in self.finite.values())

    def names(self, prefix: str) -> list[str]:
        return [c for c in (self.columns or []) if c.startswith(prefix)]

    @property
    def update(self) -> int:
        return max((r["update"] for r in self.latest.values()), default=self.summary.updates if self.summary else 0)

    @property
    def status(self) -> str:
        status = self.summary.status if self.summary else ("starting" if not self.latest else "running")
        if status == "running" and (self.path / rundir.STOP_FILE).exists():
            return "stopping"
        if status == "running" and self.mtime is not None and time.time() - self.mtime > 600:
            return "running?"  # no metrics for 10 minutes: killed, or a very long chunk
        return status

    def health(self) -> list[str]:
        """The warnings the run itself gives, with the thresholds of its own config.yaml
        (`health.*`; a run dir without them, or not yet written, is judged by none)."""
        limits = self.config.get("health") or {}
        names = [f.name for f in dataclasses.fields(HealthConfig)]
        if not all(isinstance(limits.get(k), (int, float)) for k in names):
            return []
        return list(health_messages(list(self.latest.values()), HealthConfig(**{k: float(limits[k]) for k in names})).values())

    def label(self, root: Path) -> str:
        try:
            rel = self.path.relative_to(root)
            return str(rel) if str(rel) != "." else self.path.name
        except ValueError:
            return str(self.path)


def sparkline(values, width: int = 30) -> str:
    xs = [v for v in values if v is not None][-width:]
    if not xs:
        return ""
    lo, hi = min(xs), max(xs)
    span = hi - lo or 1.0
    return "".join(SPARK[min(len(SPARK) - 1, int((x - lo) / span * (len(SPARK) - 1) + 0.5))] for x in xs)


# --- rendering ----------------------------------------------------------------------------
STATUS_STYLE = {"running": "green", "completed": "bold blue", "stopped": "yellow", "stopping": "yellow",
                "timed_out": "magenta", "failed": "bold red", "running?": "red", "starting": "dim"}


def render(root: Path, runs: list[RunView], selected: int, message: str = "", all_details: bool = False):
    table = Table(title=f"ppo_lab.analysis.watch {root}  ({len(runs)} run(s), {time.strftime('%H:%M:%S')})", expand=True, show_lines=False)
    table.add_column("", width=1)
    table.add_column("run", overflow="fold")
    table.add_column("env/reward")
    table.add_column("status")
    table.add_column("update", justify="right")
    table.add_column("sps", justify="right")
    for col, _, _ in MAIN:
        table.add_column(col, justify="right")
    table.add_column("return curve")
    table.add_column("warn", justify="right")
    for i, run in enumerate(runs):
        warnings = run.health()
        status = run.status
        summary = run.summary or RunSummary()
        total = summary.total_updates
        env = f"{summary.env or (run.config.get('env') or {}).get('name', '?')}/{summary.reward or (run.config.get('reward') or {}).get('name', '-')}"
        table.add_row(
            ">" if i == selected else "",
            run.label(root), env, Text(status, style=STATUS_STYLE.get(status, "")),
            f"{run.update}/{total}" if total else str(run.update),
            formatted(run.metric("perf/sps"), ",.0f"),
            *[formatted(run.metric(name), spec) for _, name, spec in MAIN],
            sparkline(run.returns(), 24),
            Text(str(len(warnings)), style="bold red") if warnings else "",
            style="reverse" if i == selected else None,
        )
    parts = [table]
    if all_details:
        parts.extend(detail(run, root) for run in runs)
    elif runs:
        parts.append(detail(runs[selected], root))
    keys = "keys: up/down select | s stop selected run (STOP file) | q quit"
    parts.append(Panel(Text(message or keys, style="bold yellow" if message else "dim"), expand=True))
    return Group(*parts)


def action_table(run: RunView) -> Table:
    """Discrete: each action's share of the rollout, with a bar; continuous: each dimension's
    mean and std of the actions the env got. Means over seeds, latest update."""
    dims = continuous_dimensions(run.columns or [])
    if dims:
        table = Table(title="actions per dimension (mean over seeds)", expand=False)
        for column in ("dim", "mean", "std"):
            table.add_column(column, justify="right")
        for i in dims:
            table.add_row(str(i), formatted(run.metric(f"actions/mean_{i}"), ".3f"), formatted(run.metric(f"actions/std_{i}"), ".3f"))
        return table
    table = Table(title="action distribution (mean over seeds)", expand=False)
    table.add_column("action")
    table.add_column("fraction", justify="right")
    table.add_column("")
    for name in discrete_shares(run.columns or []):
        frac = run.metric(name)
        bar = "█" * int(round((frac or 0) * 30))
        table.add_row(name.split("/", 1)[1], formatted(frac, ".3f"), bar)
    if INVALID in (run.columns or []):  # with a mask: how often a forbidden action was taken (a rate)
        table.add_row(INVALID.split("/", 1)[1], formatted(run.metric(INVALID), ".3f"), "")
    return table


def detail(run: RunView, root: Path):
    seeds = sorted(run.latest)
    per_seed = Table(title="latest update, per seed", expand=False)
    per_seed.add_column("metric")
    for seed in seeds:
        per_seed.add_column(f"seed {seed}", justify="right")
    # a population's members are its seeds: each one's explored values (`pbt/<key>`) too
    names = [n for _, n, _ in MAIN] + ["train/explained_variance"] + run.names("true/") + run.names("reward/") + run.names("pbt/")
    for name in names:
        if name in (run.columns or []):
            per_seed.add_row(name, *[formatted(run.finite.get(s, {}).get(name, math.nan), ".4g") for s in seeds])
    actions = action_table(run)
    lines = []
    summary = run.summary or RunSummary()
    if summary.eval:
        lines.append("eval: " + ", ".join(f"{k} {formatted(finite_mean(v), '.4g')}" for k, v in summary.eval.items()))
    if summary.pbt:
        pbt = summary.pbt
        lines.append(f"pbt: best member {pbt['best_member']} (seed {seeds[0] + pbt['best_member'] if seeds else '?'}) "
                     f"{pbt['best_hypers']}, {pbt['steps']} exploit step(s)")
    if summary.stop_reason:
        lines.append(f"stop reason: {summary.stop_reason}")
    if summary.error:
        lines.append(f"error: {summary.error}")
    warnings = run.health()
    body = [Columns([per_seed, actions])]
    if lines:
        body.append(Text("\n".join(lines)))
    if warnings:
        body.append(Text("\n".join(warnings), style="bold red"))
    else:
        body.append(Text("health: ok", style="green"))
    return Panel(Group(*body), title=f"{run.label(root)}  ({run.path})", expand=True)


# --- loop -----------------------------------------------------------------------------------
class Dashboard:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.runs: dict[Path, RunView] = {}
        self.selected = 0

    def refresh(self) -> list[RunView]:
        for path in rundir.find_run_dirs(self.root):
            self.runs.setdefault(path, RunView(path))
        for run in self.runs.values():
            run.refresh()
        views = [self.runs[p] for p in sorted(self.runs)]
        self.selected = min(self.selected, max(len(views) - 1, 0))
        return views


def snapshot(root: Path, width: int = 200) -> str:
    """The dashboard as plain text, once (`--once`)."""
    dash = Dashboard(root)
    views = dash.refresh()
    console = Console(file=io.StringIO(), width=width, force_terminal=False, color_system=None, record=True)
    many = len(views) > 8
    console.print(render(dash.root, views, 0, message="snapshot (--once)", all_details=not many))
    if many:  # a big sweep: the table, then every warning
        for run in views:
            for warning in run.health():
                console.print(f"{run.label(dash.root)}: {warning}")
    return console.export_text()


class _Keys:
    """Single key presses from a terminal (cbreak mode), without blocking."""

    def __enter__(self):
        self.fd = sys.stdin.fileno()
        self.old = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd)
        return self

    def __exit__(self, *exc):
        termios.tcsetattr(self.fd, termios.TCSADRAIN, self.old)

    def read(self, timeout: float) -> str | None:
        ready, _, _ = select.select([sys.stdin], [], [], timeout)
        if not ready:
            return None
        try:
            data = os.read(self.fd, 1)
        except OSError:  # EIO: the terminal went away
            data = b""
        if not data:
            # End of input (the terminal closed): quit, instead of a select loop that spins.
            return "eof"
        ch = data.decode(errors="ignore")
        if ch == "\x1b":  # arrow keys: ESC [ A/B
            more, _, _ = select.select([sys.stdin], [], [], 0.01)
            if more:
                seq = os.read(self.fd, 2).decode(errors="ignore")
                return {"[A": "up", "[B": "down"}.get(seq)
        return ch


def live(root: Path, interval: float) -> int:
    dash = Dashboard(root)
    console = Console()
    message, confirm = "", False
    with _Keys() as keys, Live(console=console, auto_refresh=False, screen=False, transient=False) as screen:
        next_refresh = 0.0
        views = []
        while True:
            now = time.monotonic()
            if now >= next_refresh:
                views = dash.refresh()
                next_refresh = now + interval
            screen.update(render(dash.root, views, dash.selected, message), refresh=True)
            key = keys.read(max(0.05, next_refresh - time.monotonic()))
            if key is None:
                continue
            if confirm:
                confirm = False
                if key in ("y", "Y") and views:
                    path = rundir.request_stop(views[dash.selected].path, by=STOP_BY)
                    message = f"wrote {path}: the run stops after its current chunk"
                else:
                    message = "stop cancelled"
            elif key in ("q", "Q", "eof"):
                return 0
            elif key in ("up", "k"):
                dash.selected, message = max(0, dash.selected - 1), ""
            elif key in ("down", "j"):
                dash.selected, message = min(len(views) - 1, dash.selected + 1), ""
            elif key in ("s", "S") and views:
                confirm = True
                message = f"stop {views[dash.selected].label(dash.root)}? press y to write its STOP file, any other key to cancel"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Live dashboard of a run or a sweep (reads metrics.csv/summary.json).")
    parser.add_argument("dir", type=Path, help="a run directory, or a folder of runs (a sweep, outputs/)")
    parser.add_argument("--once", action="store_true", help="print one snapshot and exit")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes")
    parser.add_argument("--width", type=int, default=200, help="text width of --once")
    parser.add_argument("--stop", metavar="RUN_DIR", type=Path, help="write RUN_DIR's STOP file and exit")
    args = parser.parse_args(argv)
    if args.stop is not None:
        print(f"wrote {rundir.request_stop(args.stop, by=STOP_BY)}")
        return 0
    if not args.dir.exists():
        print(f"error: {args.dir} does not exist", file=sys.stderr)
        return 2
    if args.once or not sys.stdin.isatty():
        print(snapshot(args.dir, args.width))
        return 0
    try:
        return live(args.dir, args.interval)
    except KeyboardInterrupt:
        return 0
