"""`hydra/sweeper=optuna`: a Hydra sweeper on current Optuna that tunes what evaluation measures.

    python launch.py -cd sweeps -cn optuna_cartpole hydra.sweeper.n_trials=4
    python launch.py -m hydra/sweeper=optuna experiment=cartpole hydra.sweep.dir=outputs/sweeps/my_study \\
        'ppo.lr=tag(log, interval(1e-4, 1e-2))' 'network.hidden_sizes=choice([64,64],[128,128])'

Why not hydra-optuna-sweeper: its latest release (1.3.0) requires optuna<3, which this lab's
Python and Optuna 5 rule out. This is the small part of it the lab needs (docs/sweeps.md).

- Search space: `hydra.sweeper.params` (and sweep overrides on the command line, which win)
  in Hydra's override syntax: `interval(a,b)` (float), `int(interval(a,b))` (int),
  `tag(log, interval(a,b))` (log scale), `choice(a,b,...)` / `a,b,...` (categorical; lists
  allowed), `range(a,b[,step])` (stepped, b excluded). Plain `key=value` overrides hold for
  every trial.
- Objective: `optimize.metric` of each job's summary.json, reduced across its vmapped seeds by
  `optimize.reduce` (mean|iqm), `optimize.direction` (`ppo_lab.judging.objective`). It is
  read from the job's run dir, so every launcher works: basic (in this process), `local`,
  `slurm` (not with `hydra.launcher.wait=false`: the study needs each result).
- Study: SQLite `optuna.db` in the sweep dir (`hydra.sweeper.storage` overrides), named
  `hydra.sweeper.study_name`. A relaunch with the same fixed `hydra.sweep.dir` continues it:
  `n_trials` more trials, numbered after the earlier ones; trial N runs in `<sweep_dir>/N`,
  so run dirs never collide; trials a killed sweep left running are marked failed.
- Batches: `hydra.sweeper.batch_size=N` asks N trials at once and launches them together;
  trials of a batch that differ only in traced hyperparameters (`config.traced_keys()`)
  train as one compiled program, one replica per trial and seed (`hydra/launcher=vmap`,
  which a batch uses in place of the basic launcher; `local` and `slurm` keep their own).
- A job that fails (raises, is cancelled, has no usable summary, or cannot even be composed)
  is a FAILED trial; the sweep goes on. At the end `<sweep_dir>/optimization_results.yaml`
  holds `best_params` and `best_value` (as hydra-optuna-sweeper writes it), the best trial's
  number and run dir, and how many trials completed and failed.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import optuna
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, Override, RangeSweep
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from hydra._internal.core_plugins.basic_launcher import BasicLauncher
from hydra.plugins.sweeper import Sweeper
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from ppo_lab.judging.objective import Objective, ObjectiveError, parse_objective, read_objective
from ppo_lab.errors import ConfigError
from ppo_lab.launching.command_line import override_text
from ppo_lab.launching.vmap_groups import VmapLauncher
from ppo_lab.rundir import MULTIRUN, write_text_atomic

log = logging.getLogger(__name__)

RESULTS_FILE = "optimization_results.yaml"
STUDY_FILE = "optuna.db"
_PRIMITIVE = (type(None), bool, int, float, str)


# --- search space -----------------------------------------------------------------------------
def distribution(override: Override):
    """The Optuna distribution of one sweep override (see the module docstring)."""
    value = override.value()
    key = override.get_key_element()
    if isinstance(value, ChoiceSweep):
        # Optuna stores only primitives: a list choice travels as its override text.
        return CategoricalDistribution([v if isinstance(v, _PRIMITIVE) else override_text(v) for v in value.list])
    if isinstance(value, RangeSweep):
        values = list(override.sweep_iterator())  # Hydra's own expansion: b excluded
        if not values:
            raise ValueError(f"{key}={override.input_line}: the range is empty")
        low, high, step = min(values), max(values), abs(value.step)
        if all(isinstance(x, int) for x in values):
            return IntDistribution(low, high, step=step)
        return FloatDistribution(float(low), float(high), step=float(step))
    if isinstance(value, IntervalSweep):
        log_scale = "log" in value.tags
        if isinstance(value.start, int) and isinstance(value.end, int):
            return IntDistribution(value.start, value.end, log=log_scale)
        return FloatDistribution(float(value.start), float(value.end), log=log_scale)
    raise ValueError(f"{key}={override.input_line}: not a search space; use interval(a,b), int(interval(a,b)), "
                     "tag(log, interval(a,b)), choice(a,b,...) or range(a,b,step)")


@dataclass
class SearchSpace:
    distributions: dict  # key -> Optuna distribution
    fixed: list[str]  # overrides every trial gets
    texts: dict  # key -> choices that are override text already (lists, dicts)

    def overrides(self, params: dict) -> list[str]:
        """The job's overrides for one trial's parameters."""
        return self.fixed + [f"{k}={v if v in self.texts.get(k, ()) else override_text(v)}" for k, v in params.items()]


def search_space(params: dict | None, arguments: Sequence[str]) -> SearchSpace:
    """The search space and fixed overrides from the config's params and the command line
    (a key given twice: the later wins, so the command line overrides the file)."""
    lines = [f"{k}={v}" for k, v in (params or {}).items()] + list(arguments)
    space, fixed, texts = {}, {}, {}
    for override in OverridesParser.create().parse_overrides(lines):
        key = override.get_key_element()
        for d in (space, fixed, texts):
            d.pop(key, None)
        if override.is_sweep_override():
            space[key] = distribution(override)
            if isinstance(override.value(), ChoiceSweep):
                texts[key] = {override_text(v) for v in override.value().list if not isinstance(v, _PRIMITIVE)}
        else:
            fixed[key] = override.input_line
    if not space:
        raise ValueError("hydra/sweeper=optuna needs a search space: hydra.sweeper.params or a sweep override, "
                         "e.g. 'ppo.lr=tag(log, interval(1e-4, 1e-2))'")
    return SearchSpace(space, list(fixed.values()), texts)


# --- the study --------------------------------------------------------------------------------
def open_study(storage: str, name: str, direction: str, sampler_cfg: Any):
    """Create or continue the study; the sampler's seed moves on with the trials already run,
    so a relaunch does not propose the first launch's points again."""
    study = optuna.create_study(storage=storage, study_name=name, direction=direction, load_if_exists=True)
    if study.direction.name.lower() != direction:
        raise ValueError(f"study {name!r} in {storage} was created to {study.direction.name.lower()}; "
                         f"optimize.direction={direction} cannot continue it (use another hydra.sweep.dir or study_name)")
    sampler_cfg = dict(OmegaConf.to_container(sampler_cfg, resolve=True) if isinstance(sampler_cfg, DictConfig) else sampler_cfg or {})
    if sampler_cfg:
        if sampler_cfg.get("seed") is not None:
            sampler_cfg["seed"] = int(sampler_cfg["seed"]) + len(study.trials)
        study.sampler = instantiate(sampler_cfg)
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.WAITING)):
        log.warning("trial %d was left unfinished by an earlier sweep: marking it failed", trial.number)
        study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
    return study


def write_results(sweep_dir: Path, study, objective: Objective) -> dict:
    states = [t.state for t in study.trials]
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    best = study.best_trial if complete else None
    results = {
        "name": "optuna",
        "best_params": dict(best.params) if best else None,
        "best_value": float(best.value) if best else None,
        "best_trial": best.number if best else None,
        "best_run_dir": best.user_attrs.get("run_dir") if best else None,
        "study_name": study.study_name,
        "direction": objective.direction, "metric": objective.metric, "reduce": objective.reduce,
        "trials": {"total": len(states), "complete": len(complete),
                   "failed": sum(s == optuna.trial.TrialState.FAIL for s in states)},
    }
    write_text_atomic(Path(sweep_dir) / RESULTS_FILE, OmegaConf.to_yaml(OmegaConf.create(results)))
    return results


class OptunaSweeper(Sweeper):
    def __init__(self, n_trials: int = 20, n_jobs: int = 1, sampler: Any = None, storage: str | None = None,
                 study_name: str | None = None, params: Any = None, batch_size: int | None = None) -> None:
        if int(n_trials) < 1 or int(n_jobs) < 1:
            raise ValueError(f"hydra.sweeper.n_trials={n_trials} and n_jobs={n_jobs} must be >= 1")
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1):
            raise ConfigError("hydra.sweeper.batch_size", batch_size,
                              "null or an integer >= 1: trials asked at once and trained as one program")
        self.n_trials, self.n_jobs = int(n_trials), int(n_jobs)
        self.batch_size = batch_size
        self.sampler_cfg, self.storage, self.study_name = sampler, storage, study_name
        self.params = OmegaConf.to_container(params, resolve=True) if isinstance(params, DictConfig) else dict(params or {})
        self.config = self.launcher = self.hydra_context = None
        self.exhausted = False  # the sampler has no new point left (grid / brute force)

    def setup(self, *, hydra_context, task_function, config: DictConfig) -> None:
        self.hydra_context, self.config = hydra_context, config
        self.launcher = Plugins.instance().instantiate_launcher(hydra_context=hydra_context, task_function=task_function, config=config)
        if self.batch_size is not None and isinstance(self.launcher, BasicLauncher):
            # A batch's trials that can share a program train as one (the vmap launcher groups them).
            self.launcher = VmapLauncher()
            self.launcher.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def sweep(self, arguments: list[str]) -> list[Sequence[JobReturn]]:
        assert self.config is not None and self.launcher is not None
        if OmegaConf.select(self.config, "hydra.launcher.wait", default=True) is False:
            raise ValueError("hydra/sweeper=optuna needs each job's result: drop hydra.launcher.wait=false")
        objective = parse_objective(OmegaConf.to_container(self.config.optimize, resolve=True) if "optimize" in self.config else None)
        space = search_space(self.params, arguments)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        write_text_atomic(sweep_dir / MULTIRUN, OmegaConf.to_yaml(self.config))  # as Hydra's BasicSweeper saves it
        storage = self.storage or f"sqlite:///{(sweep_dir / STUDY_FILE).resolve()}"
        name = self.study_name or sweep_dir.name
        study = open_study(storage, name, objective.direction, self.sampler_cfg)
        log.info("Optuna study %r (%s): %d earlier trial(s); %d more, %d at a time; %s %s of %s",
                 name, storage, len(study.trials), self.n_trials, self.batch_size or self.n_jobs, objective.direction, objective.reduce, objective.metric)
        returns, done = [], 0
        self.exhausted = False
        while done < self.n_trials and not self.exhausted:
            per_batch = self.batch_size or self.n_jobs
            trials = [study.ask(space.distributions) for _ in range(min(per_batch, self.n_trials - done))]
            returns.append(self._run_batch(study, trials, space, objective, sweep_dir))
            done += len(trials)
        if self.exhausted:
            log.info("the sampler has tried every point of the search space: stopping after %d trial(s)", done)
        results = write_results(sweep_dir, study, objective)
        log.info("best value %s (trial %s, %s) -> %s", results["best_value"], results["best_trial"], results["best_params"], sweep_dir / RESULTS_FILE)
        if results["best_value"] is None:
            raise RuntimeError(f"no trial of study {name!r} completed ({results['trials']['failed']} failed); see the run dirs in {sweep_dir}")
        return returns

    def _run_batch(self, study, trials, space: SearchSpace, objective: Objective, sweep_dir: Path) -> list[JobReturn]:
        """Launch the composable trials of a batch as jobs numbered by trial; tell the study each result."""
        jobs = []
        for trial in trials:
            overrides = space.overrides(trial.params)
            trial.set_user_attr("overrides", overrides)
            try:
                self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
            except Exception as exc:  # noqa: BLE001 - an uncomposable point is a failed trial
                self._fail(study, trial, f"cannot compose the job: {type(exc).__name__}: {exc}")
                continue
            jobs.append((trial, overrides))
        results: list[JobReturn] = []
        # Jobs are numbered by trial, so run dirs follow trial numbers across relaunches: one
        # launch per run of consecutive trial numbers (a launcher numbers one call's jobs in a row).
        for _, run in itertools.groupby(enumerate(jobs), lambda job: job[1][0].number - job[0]):
            group = [job for _, job in run]
            results += self.launcher.launch([o for _, o in group], initial_job_idx=group[0][0].number)
        for (trial, overrides), ret in zip(jobs, results):  # the launches keep the order of `jobs`
            run_dir = _job_dir(ret, sweep_dir, trial.number)
            trial.set_user_attr("run_dir", str(run_dir))
            if ret.status != JobStatus.COMPLETED:
                self._fail(study, trial, f"the job failed: {type(ret._return_value).__name__}: {ret._return_value}")
                continue
            try:
                value, per_seed = read_objective(run_dir, objective)
            except (ObjectiveError, OSError, ValueError) as exc:
                self._fail(study, trial, str(exc))
                continue
            trial.set_user_attr("per_seed", per_seed)
            self._tell(study, trial, value)
            log.info("trial %d: %s %s = %.4g (per seed %s) %s", trial.number, objective.reduce, objective.metric, value,
                     ", ".join(f"{v:.4g}" for v in per_seed), " ".join(overrides))
        return results

    def _tell(self, study, trial, value: float | None = None, state=None) -> None:
        try:
            study.tell(trial, value, state=state)
        except RuntimeError as exc:
            # Grid and brute-force samplers call study.stop() once the space is exhausted, which
            # Optuna allows only inside study.optimize(); the trial is stored either way.
            if "Study.stop" not in str(exc):
                raise
            self.exhausted = True

    def _fail(self, study, trial, reason: str) -> None:
        log.warning("trial %d failed: %s", trial.number, reason.strip().splitlines()[0] if reason.strip() else reason)
        trial.set_user_attr("error", reason[:2000])
        self._tell(study, trial, state=optuna.trial.TrialState.FAIL)


def _job_dir(ret: JobReturn, sweep_dir: Path, number: int) -> Path:
    """The job's run dir: what Hydra says it used, else `<sweep_dir>/<job number>` (a job
    that never started, e.g. a cancelled SLURM job, has no Hydra config to ask)."""
    output_dir = OmegaConf.select(ret.hydra_cfg, "hydra.runtime.output_dir", default=None) if ret.hydra_cfg is not None else None
    return Path(str(output_dir)) if output_dir else Path(sweep_dir) / str(number)
