"""Load runs and sweeps from disk and aggregate them across seeds.

The unit is (run, seed): a run trained with ``num_seeds=4`` gives four units, exactly like four
runs of one seed each (docs/architecture.md, "Contracts"). Runs are grouped by their Hydra overrides other
than the seed (``.hydra/overrides.yaml``); the keys whose values differ between groups are the
"swept keys". Every unit that cannot contribute a value is kept and named, with its status and
the reason:

========== ================================================================================
status      meaning
========== ================================================================================
completed   summary.json says completed: used
timed_out   stopped by its own ``train.duration_min`` budget (a designed end): used
stopped     stopped by a signal or STOP file before the end: listed, used only with
            ``include_stopped``
running     summary.json says running (still training, or killed without a trace): listed
failed      summary.json says failed, or its job failed / was cancelled (``jobs.json``)
diverged    the seed's training went non-finite (summary.json ``diverged``): listed with its first
            non-finite update and metric, never averaged, also when the run's other seeds completed
missing     a job the sweep defines (``multirun.yaml``) has no run dir or no summary.json
========== ================================================================================
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

import ppo_lab.resolvers  # noqa: F401 - registers ${ppo_lab.scaled:...} for the configs read here
from ppo_lab import rundir
from ppo_lab.analysis.criteria import criteria_by_seed
from ppo_lab.estimators import SMALL_SAMPLE, SUMMARY_KEYS, mean_interval, mean_summary
from ppo_lab.judging.headline import declared_bounds
from ppo_lab.rundir.run_summary import RunSummary
from ppo_lab.rundir.slurm_jobs import failed_state, jobs_by_number

SUMMARY = rundir.SUMMARY
USED_STATUSES = ("completed", "timed_out")
# Overrides that say which seeds a run trained (or where it resumed from), not what it trained.
SEED_KEYS = ("seed", "num_seeds", "resume")
DEFAULT_VALUE = "(default)"
# ci_method: which interval ci_low/ci_high is (t, or anderson for a metric with known bounds:
# ppo_lab/estimators.py); small_sample: fewer than 5 seeds.
# logged_frac: the share of a metric's metrics.csv rows that hold a value (an episode mean is
# empty in updates where no episode ended; blank for metrics metrics.csv lacks, e.g. eval/*);
# below SPARSE it is called sparse in the table and the figures.
AGGREGATE_COLUMNS_TAIL = ["metric", *SUMMARY_KEYS, "ci_method", "small_sample", "logged_frac"]
SPARSE = 0.5


@dataclass
class Run:
    """One run directory (or one job of a sweep that never produced one)."""
    path: Path
    overrides: dict[str, str]
    seeds: list[int]
    status: str
    reason: str | None = None
    summary: RunSummary | None = None  # None: no summary.json
    job_num: int | None = None
    job_id: str | None = None
    experiment: str | None = None
    env: dict = field(default_factory=dict)  # config.yaml's env section: its declared `metrics:`
    reward: dict = field(default_factory=dict)  # config.yaml's reward section: the reward function it was paid by
    tags: dict = field(default_factory=dict)  # config.yaml's tags section: what the user said of the run

    @property
    def name(self) -> str:
        return str(self.path)


@dataclass
class Unit:
    """One seed of one run: the unit of every statistic."""
    run: Run
    seed: int
    group: str
    values: dict[str, float]
    used: bool
    diverged: dict | None = None  # summary.json's entry when this seed went non-finite
    logged: dict[str, float] = field(default_factory=dict)  # metric -> share of its metrics.csv rows with a value

    @property
    def status(self) -> str:
        return "diverged" if self.diverged is not None else self.run.status

    @property
    def reason(self) -> str | None:
        if self.diverged is not None:
            return f"non-finite {self.diverged.get('metric')} at update {self.diverged.get('update')}"
        return self.run.reason


@dataclass
class Collection:
    runs: list[Run]
    units: list[Unit]
    groups: list[str]                      # in order of first appearance
    swept_keys: list[str]
    group_keys: dict[str, dict[str, str]]  # group -> swept key -> value
    metrics: list[str]

    def problems(self) -> list[Unit]:
        return [u for u in self.units if not u.used]

    def logged_share(self, group: str, metric: str) -> float | None:
        """The share of metrics.csv rows holding `metric`, mean over the group's used seeds."""
        shares = [u.logged[metric] for u in self.units if u.group == group and u.used and metric in u.logged]
        return float(np.mean(shares)) if shares else None

    def bounds(self, group: str | None = None) -> dict:
        """The metric bounds the runs (of `group`; None: all) declare (their env's `metrics.bounds`)."""
        bounds = {}
        for run in {id(u.run): u.run for u in self.units if group in (None, u.group)}.values():
            bounds.update(declared_bounds(run.env))
        return bounds


# ----------------------------------------------------------------------------- reading
def parse_overrides(lines: Iterable[str]) -> dict[str, str]:
    out = {}
    for line in lines:
        line = str(line)
        if "=" not in line:
            continue
        key, value = line.split("=", 1)
        out[key.lstrip("+~")] = value
    return out


def _seeds_from(overrides: dict[str, str], default_seed: int = 0, default_num: int = 1) -> list[int]:
    try:
        seed = int(overrides.get("seed", default_seed))
        num = int(overrides.get("num_seeds", default_num))
    except ValueError:
        return []
    return list(range(seed, seed + num))


def load_run(path: Path, job: dict | None = None, defaults: tuple = (0, 1, None)) -> Run:
    path = Path(path)
    rundir.check_format(path)  # a run dir of another format is refused, not misread
    overrides = parse_overrides(rundir.read_overrides(path))
    try:
        summary = rundir.read_summary(path)
    except ValueError as exc:
        summary = RunSummary(status="failed", error=f"unreadable summary.json: {exc}")
    experiment = summary.experiment if summary is not None else None
    if experiment is None:
        experiment = rundir.read_experiment(path)
    experiment = experiment if experiment is not None else defaults[2]
    seeds = [int(s) for s in summary.seeds] if summary is not None and summary.seeds else _seeds_from(overrides, *defaults[:2])
    if summary is not None:
        status, reason = summary.status, summary.error or summary.stop_reason
    else:
        status, reason = "missing", "no summary.json (the job never started training, or crashed before it)"
        if (error := rundir.read_error(path)) is not None:
            status, reason = "failed", error
    if status == "completed":
        reason = None
    if job:
        state, outcome = job.get("state") or "", job.get("outcome")
        job_failed = outcome == "failed" or failed_state(state)
        if job_failed and status != "completed":
            status = "failed"
            reason = f"job {job.get('job_id')} {state or 'failed'}" + (f": {job['error']}" if job.get("error") else "") + (f" (run dir: {summary.status})" if summary else "")
    env, reward, tags = _config_sections(path)
    return Run(path=path, overrides=overrides, seeds=seeds, status=status, reason=reason, summary=summary,
               job_num=int(path.name) if path.name.isdigit() else None, job_id=(job or {}).get("job_id"),
               experiment=experiment, env=env, reward=reward, tags=tags)


def _config_sections(path: Path) -> tuple[dict, dict, dict]:
    """The env, reward and tags sections of a run's config.yaml ({} without one, or one that
    does not parse), the run's own parts found as it found them."""
    try:
        rundir.use_recorded_parts(path)
        config = rundir.read_config(path)
    except Exception:  # noqa: BLE001 - a run without a readable config only loses its declarations
        return {}, {}, {}
    return tuple(dict(config.get(section) or {}) for section in ("env", "reward", "tags"))


def expected_jobs_from_config(cfg) -> list[list[str]]:
    """The jobs (override lists, by job number) that a full config (hydra node included, as in
    multirun.yaml or `launch.py ... --cfg all`) sweeps: hydra.sweeper.params + the task overrides."""
    sweeper = OmegaConf.select(cfg, "hydra.sweeper._target_", default=None)
    if sweeper and not str(sweeper).endswith("BasicSweeper"):
        return []  # a sampling sweeper (hydra/sweeper=optuna) defines no grid of jobs up front
    try:
        params = OmegaConf.select(cfg, "hydra.sweeper.params") or {}
        args = [f"{k}={v}" for k, v in params.items()]
        args += [str(x) for x in OmegaConf.select(cfg, "hydra.overrides.task") or []]
        parsed = OverridesParser.create().parse_overrides(args)
        return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]
    except Exception:  # noqa: BLE001 - a sweeper we cannot replay: report only what exists
        return []


def _multirun_defaults(cfg) -> tuple[int, int, str | None]:
    """(seed, num_seeds, experiment) of a sweep's base config (its multirun.yaml, or None), for
    runs that did not say."""
    if cfg is None:
        return 0, 1, None
    try:
        experiment = OmegaConf.select(cfg, "experiment", default=None)
    except Exception:  # noqa: BLE001 - an interpolation we cannot resolve here
        experiment = None
    try:
        return int(cfg.get("seed", 0)), int(cfg.get("num_seeds", 1)), experiment
    except (TypeError, ValueError):
        return 0, 1, experiment


def load_runs(dirs: Sequence[Path]) -> list[Run]:
    """Every run under `dirs`, plus one "missing" Run per job a sweep defines but never wrote."""
    runs: list[Run] = []
    seen: set[Path] = set()
    for d in dirs:
        d = Path(d)
        if not d.exists():
            raise FileNotFoundError(f"{d} does not exist")
        sweep_roots = rundir.find_sweep_roots(d)
        for root in sweep_roots:
            jobs = jobs_by_number(root)
            multirun = rundir.read_multirun(root)  # the jobs it defines, by number
            defaults = _multirun_defaults(multirun)
            expected = [] if multirun is None else expected_jobs_from_config(multirun)
            nums = set(range(len(expected))) | set(jobs)
            for num in sorted(nums):
                path = (root / str(num)).resolve()
                overrides = parse_overrides(expected[num]) if num < len(expected) else parse_overrides(jobs[num].get("overrides", []))
                if (path / SUMMARY).exists() or (path / ".hydra").exists():
                    run = load_run(path, jobs.get(num), defaults)
                    if not run.overrides:
                        run.overrides = overrides
                else:
                    job = jobs.get(num) or {}
                    reason = f"job {job['job_id']} {job.get('state')}" + (f": {job['error']}" if job.get("error") else "") if job else "no run dir"
                    status = "failed" if job.get("outcome") == "failed" else "missing"
                    run = Run(path=path, overrides=overrides, seeds=_seeds_from(overrides, *defaults[:2]), status=status,
                              reason=reason, job_num=num, job_id=job.get("job_id"), experiment=defaults[2])
                runs.append(run)
                seen.add(path)
        for path in rundir.find_run_dirs(d):
            path = path.resolve()
            if path in seen:
                continue
            runs.append(load_run(path))
            seen.add(path)
    return runs


# ----------------------------------------------------------------------------- grouping
def _fmt(v) -> str:
    return DEFAULT_VALUE if v is None else str(v)


def collect(dirs: Sequence[Path], include_stopped: bool = False, ignore: Sequence[str] = ()) -> Collection:
    runs = load_runs(dirs)
    ignored = set(SEED_KEYS) | set(ignore)
    keyed = []
    for run in runs:
        keys = {k: v for k, v in run.overrides.items() if k not in ignored and not k.startswith("hydra.")}
        if "experiment" not in keys and run.experiment is not None:
            keys["experiment"] = str(run.experiment)
        keyed.append(keys)
    all_keys = sorted({k for keys in keyed for k in keys})
    swept = [k for k in all_keys if len({_fmt(keys.get(k)) for keys in keyed}) > 1]
    # Keep the order in which the overrides were written (the sweep's own order) where possible.
    first_order = [k for keys in keyed for k in keys]
    swept.sort(key=lambda k: first_order.index(k))
    groups: list[str] = []
    group_keys: dict[str, dict[str, str]] = {}
    units: list[Unit] = []
    used_statuses = set(USED_STATUSES) | ({"stopped"} if include_stopped else set())
    for run, keys in zip(runs, keyed):
        if swept:
            label = ",".join(f"{k}={_fmt(keys.get(k))}" for k in swept)
        else:
            label = keys.get("experiment") or "all"
        if label not in group_keys:
            groups.append(label)
            group_keys[label] = {k: _fmt(keys.get(k)) for k in swept}
        used = run.status in used_statuses
        summary = run.summary or RunSummary()
        # The criteria need each seed's whole history, not just its final values: a record keeps
        # them from the whole metrics.csv, of which it keeps only some rows.
        history = rundir.columns_by_seed(run.path / rundir.METRICS) if used else {}
        recorded = rundir.recorded_criteria(run.path) if used else None
        criteria = (recorded if recorded is not None else criteria_by_seed(history, run.env)) if used else {}
        diverged = {e.get("seed"): e for e in summary.diverged}
        for i, seed in enumerate(run.seeds or [None]):
            if seed in diverged:
                units.append(Unit(run=run, seed=seed, group=label, values={}, used=False, diverged=diverged[seed]))
                continue
            # The seed's evaluation (`eval/<name>`), its final training metrics and its criteria.
            values = {**{f"eval/{name}": _at(v, i) for name, v in summary.eval.items()},
                      **{name: _at(v, i) for name, v in summary.final.items()}, **criteria.get(seed, {})} if used else {}
            units.append(Unit(run=run, seed=seed, group=label, values=values, used=used,
                              logged=_logged_shares(history.get(seed, {}))))
    metrics = sorted({m for u in units for m in u.values}, key=_metric_order)
    return Collection(runs=runs, units=units, groups=groups, swept_keys=swept, group_keys=group_keys, metrics=metrics)


def collect_groups(groups: Mapping[str, Sequence[Path]], include_stopped: bool = False) -> Collection:
    """The runs under each label's dirs as one group of that label, whatever their overrides (the
    arms of a comparison kept in folders of their own, e.g. a page's records)."""
    parts = {label: collect(dirs, include_stopped) for label, dirs in groups.items()}
    for label, col in parts.items():
        for unit in col.units:
            unit.group = label
    units = [u for col in parts.values() for u in col.units]
    return Collection(runs=[r for col in parts.values() for r in col.runs], units=units, groups=list(groups),
                      swept_keys=[], group_keys={label: {} for label in groups},
                      metrics=sorted({m for u in units for m in u.values}, key=_metric_order))


def _logged_shares(columns: dict) -> dict[str, float]:
    """metric -> the share of a seed's metrics.csv rows where it holds a value."""
    return {name: float(np.mean(~np.isnan(col))) for name, col in columns.items() if len(col)}


def _at(values, i) -> float:
    """values[i] as a float; NaN where it is missing, None or not a number."""
    try:
        return float(values[i])
    except (IndexError, KeyError, TypeError, ValueError):
        return math.nan


def _metric_order(name: str):
    prefix = name.split("/", 1)[0]
    rank = {"eval": 0, "criteria": 1, "train": 2, "reward": 3, "actions": 4, "perf": 5}.get(prefix, 6)
    return rank, name


# ----------------------------------------------------------------------------- tables
def aggregate_rows(col: Collection, confidence: float = 0.95) -> list[dict]:
    """aggregate.csv: per group and metric, `mean_summary` over the group's used units."""
    rows = []
    for group in col.groups:
        units = [u for u in col.units if u.group == group and u.used]
        bounds = col.bounds(group)
        for metric in col.metrics:
            values = [u.values.get(metric, math.nan) for u in units]
            stats = mean_summary(values, metric, confidence=confidence, bounds=bounds)
            logged = col.logged_share(group, metric)
            rows.append({"group": group, **col.group_keys[group], "metric": metric, **stats,
                         "small_sample": 0 < stats["n_seeds"] < SMALL_SAMPLE,
                         "logged_frac": "" if logged is None else round(logged, 4)})
    return rows


def aggregate_columns(col: Collection) -> list[str]:
    return ["group", *col.swept_keys, *AGGREGATE_COLUMNS_TAIL]


def unit_rows(col: Collection) -> list[dict]:
    """runs.csv: one row per (run, seed), used or not, with status and reason."""
    return [{"group": u.group, **col.group_keys[u.group], "seed": u.seed, "status": u.status, "used": u.used,
             "reason": u.reason or "", "job": u.run.job_num if u.run.job_num is not None else "", "job_id": u.run.job_id or "",
             "updates": u.run.summary.updates if u.run.summary is not None else "", "run_dir": u.run.name,
             **{m: u.values.get(m, math.nan) for m in col.metrics}} for u in col.units]


def problem_lines(col: Collection) -> list[str]:
    """Every unit that is not in the statistics, by name."""
    return [f"{u.status.upper():9s} {u.group} seed={u.seed} ("
            + (f"job {u.run.job_num}: " if u.run.job_num is not None else "") + f"{u.run.name})"
            + (f": {u.reason}" if u.reason else "") for u in col.problems()]


# ----------------------------------------------------------------------------- curves
def read_metric_curves(col: Collection, metric: str, key: Callable[[Unit], object] | None = None) -> dict[object, list]:
    """Per group (or per `key(unit)`, a unit whose key is None left out), the (timesteps, values)
    series of `metric`, one per used unit, with the updates where it holds no value left out (a
    sparse metric, an episode mean logged only where an episode ended, keeps its points instead
    of a line broken at every gap)."""
    out: dict[object, list] = {g: [] for g in col.groups} if key is None else {}
    cache: dict[Path, dict] = {}
    for u in col.units:
        name = u.group if key is None else key(u)
        if not u.used or name is None:
            continue
        path = u.run.path / rundir.METRICS
        if path not in cache:
            cache[path] = rundir.columns_by_seed(path)
        series = cache[path].get(u.seed, {})
        if metric in series:
            kept = ~np.isnan(series[metric])
            if kept.any():
                out.setdefault(name, []).append((series["timesteps"][kept], series[metric][kept]))
    return out


def mean_curve(series: list[tuple[np.ndarray, np.ndarray]], confidence: float = 0.95,
               low: float | None = None, high: float | None = None):
    """Mean over units at each timestep that any unit logged, with the interval of the mean the
    tables give (`estimators.mean_interval`: Anderson's for a metric in a known [low, high],
    else Student t) over the units that logged that step: returns (x, mean, ci_low, ci_high, n)."""
    if not series:
        return (np.array([]),) * 5
    xs = np.unique(np.concatenate([x for x, _ in series]))
    grid = np.full((len(series), len(xs)), np.nan)
    for i, (x, y) in enumerate(series):
        grid[i, np.searchsorted(xs, x)] = y
    n = np.sum(~np.isnan(grid), axis=0)
    ci_low, ci_high = mean_interval(grid.T, low, high, confidence)
    with np.errstate(all="ignore"):
        mean = np.nansum(grid, axis=0) / n
    return xs, mean, ci_low, ci_high, n
