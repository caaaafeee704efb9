"""When to stop: signals, the STOP file, a wall-time budget, and early stopping on the
windowed mean return (RecentReturns, which also gives summary.json's `final`)."""

from __future__ import annotations

import logging
import math
import _thread
import signal
import sys
import threading
import time
from collections import deque
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import numpy as np

from ppo_lab.rundir import KEY_COLUMNS, stop_requested

log = logging.getLogger(__name__)


class StopSignals:
    """Ctrl+C / SIGTERM ask for a clean stop at the end of the current chunk; a second
    Ctrl+C stops at once (the last complete chunk is still checkpointed)."""

    def __init__(self):
        self.received: str | None = None

    def _handle(self, signum, frame):
        name = signal.Signals(signum).name
        if self.received is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.received = name
        log.warning("%s received: stopping after the current chunk (Ctrl+C again to stop now)", name)

    @contextmanager
    def installed(self):
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)}
        previous_hook, sys.unraisablehook = sys.unraisablehook, partial(self._unraisable, sys.unraisablehook)
        try:
            yield self
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            sys.unraisablehook = previous_hook

    @staticmethod
    def _unraisable(previous_hook, unraisable):
        """A second Ctrl+C whose handler ran inside a garbage-collection callback or a finalizer
        (JAX has both) is dropped there by Python, with a traceback: signalled again instead,
        from another thread, a moment later, once this callback has returned (landing in
        another such place, it comes back here)."""
        if unraisable.exc_type is KeyboardInterrupt:
            again = threading.Timer(0.05, _thread.interrupt_main, args=(signal.SIGINT,))
            again.daemon = True
            again.start()
        else:
            previous_hook(unraisable)


class EarlyStopping:
    """Stop once the windowed mean return has reached `target` and then seen `patience`
    checks without a new best. `state()`/`restore()` carry it across a resume."""

    def __init__(self, target: float | None, patience: int):
        self.target, self.patience = target, patience
        self.best = -math.inf
        self.reached = False
        self.checks_since_best = 0

    def check(self, windowed_return: float) -> bool:
        if self.target is None or math.isnan(windowed_return):
            return False
        if windowed_return > self.best:
            self.best, self.checks_since_best = windowed_return, 0
        else:
            self.checks_since_best += 1
        self.reached = self.reached or windowed_return >= self.target
        return self.reached and self.checks_since_best >= self.patience

    def state(self) -> dict:
        return {"best": self.best if math.isfinite(self.best) else None, "reached": self.reached, "checks_since_best": self.checks_since_best}

    def restore(self, state: dict | None) -> None:
        if state:
            self.best = -math.inf if state.get("best") is None else state["best"]
            self.reached, self.checks_since_best = state["reached"], state["checks_since_best"]


class StopConditions:
    """All reasons to stop early, checked between chunks. Returns (status, reason) or None."""

    def __init__(self, run_dir: Path, duration_min: float | None, early: EarlyStopping, signals: StopSignals, elapsed_s: float = 0.0):
        self.run_dir, self.duration_s, self.early, self.signals = run_dir, (duration_min or 0) * 60, early, signals
        self.started = time.monotonic() - elapsed_s

    def check(self, windowed_return: float):
        if self.signals.received:
            return "stopped", f"signal {self.signals.received}"
        if stop_requested(self.run_dir):
            return "stopped", "STOP file"
        if self.duration_s and time.monotonic() - self.started >= self.duration_s:
            return "timed_out", f"train.duration_min={self.duration_s / 60:g} reached"
        if self.early.check(windowed_return):
            return "completed", f"train.target_return={self.early.target:g} reached (best {self.early.best:.2f})"
        return None


class RecentReturns:
    """Windowed mean of train/mean_episode_return over the last W updates (all seeds)."""

    def __init__(self, window: int):
        self.by_update: deque = deque(maxlen=window)
        self.last_rows: dict[int, deque] = {}
        self.window = window

    def add(self, rows: list[dict]) -> None:
        by_update: dict[int, list] = {}
        for row in rows:
            by_update.setdefault(row["update"], []).append(row)
            self.last_rows.setdefault(row["seed"], deque(maxlen=self.window)).append(row)
        for update in sorted(by_update):
            self.by_update.append([r.get("train/mean_episode_return", math.nan) for r in by_update[update]])

    def mean(self) -> float:
        values = [v for vs in self.by_update for v in vs if v is not None and not math.isnan(v)]
        return float(np.mean(values)) if values else math.nan

    def final(self, seeds: list[int]) -> dict[str, list[float]]:
        """Per metric, one value per seed: the nan-mean over the last W updates."""
        names = sorted({k for rows in self.last_rows.values() for r in rows for k in r} - set(KEY_COLUMNS))
        out = {}
        for name in names:
            values = []
            for seed in seeds:
                xs = [r.get(name) for r in self.last_rows.get(seed, [])]
                xs = [float(x) for x in xs if x not in (None, "") and not math.isnan(float(x))]
                values.append(float(np.mean(xs)) if xs else None)
            out[name] = values
        return out
