"""What the W&B, TensorBoard and MLflow loggers share: one run of their store per seed, each
update in it once across resumes, and only finite numbers.

A resumed run recomputes the updates after its last checkpoint, and a logger may have been
added on the relaunch. So for each seed the base keeps `held`, the last update the store
holds; on the first rows a session logs for a seed it first logs the rows metrics.csv kept
between `held` and them (the backfill), and from then on only rows past `held`. `held` and
each logger's run ids live in the run dir's loggers.json (rundir/logger_state.py), a section
per logger; where a store can say itself what it holds (`store_holds`), its answer wins.

A subclass opens its runs, calls `track()`, and writes a seed's new rows in `write`.
"""

from __future__ import annotations

from pathlib import Path

from hydra.core.hydra_config import HydraConfig

from ppo_lab import rundir
from ppo_lab.estimators import finite_number
from ppo_lab.run.resume import in_multirun
from ppo_lab.rundir.run_summary import RunSummary

# A row's keys that name it (its step, its seed, a population's member), not metrics: the
# loggers file them as the run's step and identity, never as a series.
ROW_KEYS = ("update", "seed", "member")


def row_metrics(row: dict) -> dict[str, float]:
    """A row's finite metrics (`timesteps` and `wall_s` included), without its step and identity:
    NaN (a blank cell, no episode ended) and infinities are nothing a store can plot."""
    return {k: float(v) for k, v in row.items() if k not in ROW_KEYS and finite_number(v)}


def seed_results(summary: RunSummary, index: int) -> dict[str, float]:
    """Seed number `index`'s finite `eval/<name>` and `final/<name>` values from summary.json."""
    out = {}
    for section, values in summary.per_seed().items():
        for name, per_seed in values.items():
            if name not in ROW_KEYS and index < len(per_seed) and finite_number(per_seed[index]):
                out[f"{section}/{name}"] = float(per_seed[index])
    return out


def population_member(cfg, seed: int) -> int | None:
    """Seed `seed`'s member in a population run (pbt.population: member m trains seed
    `seed + m`, docs/pbt.md), else None: the loggers tag each seed's run with it."""
    return seed - cfg.seed if cfg.pbt is not None else None


def is_best_member(cfg, summary: RunSummary, seed: int) -> bool | None:
    """Whether seed `seed` is the population's best member at the end (summary.json `pbt`);
    None outside a population."""
    member, best = population_member(cfg, seed), (summary.pbt or {}).get("best_member")
    return None if member is None or best is None else member == best


def sweep_group() -> str | None:
    """`<sweep dir parent>_<sweep dir name>` when this job is part of a Hydra multirun, else
    None: what the W&B and MLflow loggers group a sweep's runs by."""
    if not in_multirun():  # a single run, or outside Hydra (tests, notebooks): no sweep
        return None
    sweep_dir = Path(HydraConfig.get().sweep.dir)
    return f"{sweep_dir.parent.name}_{sweep_dir.name}" if sweep_dir.parent.name else sweep_dir.name


class PerSeedLogger:
    """The base of a logger with one store run per seed (module docstring)."""

    name = ""  # its key under `logger` and its section of loggers.json
    # Whether what `write` handed over is in the store once it returns (a synchronous client,
    # a flushed file). Where not (W&B buffers its file), `held` is saved only at the end.
    held_survives_a_kill = True

    def __init__(self, run_dir: Path, cfg):
        self.run_dir, self.cfg, self.seeds = Path(run_dir), cfg, [int(s) for s in cfg.seeds]
        self.state: dict = rundir.read_logger_state(self.run_dir, self.name)
        self.held: dict[int, int] = {}
        self._backfilled: set[int] = set()

    def store_holds(self, seed: int) -> int | None:
        """The last update the store itself says it holds for `seed`; None where it cannot say
        (then loggers.json's record is what it holds)."""
        return None

    def write(self, seed: int, rows: list[dict]) -> None:
        """Put `rows` (seed `seed`'s, by update, each past what the store holds) in its run."""
        raise NotImplementedError

    def track(self) -> None:
        """Once the runs are open: what each seed's run holds, and the state saved."""
        saved = self.state.get("held", {})
        for seed in self.seeds:
            told = self.store_holds(seed)
            self.held[seed] = told if told is not None else int(saved.get(str(seed), 0))
        self.save_state()

    def save_state(self) -> None:
        self.state["held"] = {str(seed): update for seed, update in self.held.items()}
        rundir.write_logger_state(self.run_dir, self.name, self.state)

    def log_rows(self, rows: list[dict]) -> None:
        by_seed: dict[int, list[dict]] = {}
        for row in rows:
            by_seed.setdefault(int(row["seed"]), []).append(row)
        for seed, seed_rows in by_seed.items():
            if seed not in self.held:
                continue
            if seed not in self._backfilled:
                self._backfilled.add(seed)
                seed_rows = self._missing(seed, int(seed_rows[0]["update"])) + seed_rows
            new = [row for row in seed_rows if int(row["update"]) > self.held[seed]]
            if new:
                self.write(seed, new)
                self.held[seed] = int(new[-1]["update"])
        if self.held_survives_a_kill:
            self.save_state()

    def _missing(self, seed: int, first_update: int) -> list[dict]:
        """metrics.csv's rows of `seed` that the store lacks, before this session's first update."""
        if first_update <= self.held[seed] + 1:
            return []
        return rundir.read_seed_rows(self.run_dir / rundir.METRICS, seed, after=self.held[seed], before=first_update)
