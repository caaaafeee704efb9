"""The one way a sweep's jobs are vmapped: grouped into shared programs (`group_jobs`), each
group run as one launch (`run_group`), by every launcher that groups.

Jobs whose resolved configs differ only in traced hyperparameters (`config.traced_keys()`)
and `seed` share one compiled program (`run.shared_program`): each group trains as one
launch of several cells, `ppo_lab.run.entry.train_cells`, replicas = cells x seeds. Where the
groups run is the launcher's: `hydra/launcher=vmap` (`VmapLauncher`) one after another in its
own process, as the basic launcher runs its jobs, each job in its run dir
(`<sweep_dir>/<job num>`); `hydra/launcher=slurm` or `local` with `vectorize=true` one submitit
job per group (without it, every job is a group of its own). `hydra.launcher.max_replicas` caps
a group; a larger one is split into as few programs as the cap allows, cells spread evenly over
them. Jobs that share no program with another run alone (said once).

    python launch.py -cd sweeps -cn lr experiment=cartpole hydra/launcher=vmap
    python launch.py -cd sweeps -cn SWEEP hydra/launcher=vmap hydra.launcher.max_replicas=12

Running a group: every job is set up by Hydra's own `run_job` (its run dir, `.hydra/` files,
HydraConfig, the job callbacks), with a task that only notes the job's config and run dir;
then the group trains; then each job gets its JobReturn: the summary (or a tuning sweep's
objective, `judging.objective.job_result`), or the error that failed it, which the job
callbacks see as they see a failed job of any launcher (`SweepCallback` writes its error.txt).
A group of one runs the ordinary task (`launch.py`'s main), as the basic launcher would.

Import-light on purpose (no jax): Hydra imports every launcher at each start-up, also for
commands that never train; the trainer is imported when a group runs (`run_group`).
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, run_job, setup_globals
from hydra.plugins.launcher import Launcher
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from ppo_lab.config import traced_keys
from ppo_lab.run.shared_program import shared_program_key
from ppo_lab.judging.objective import job_result
from ppo_lab.errors import ConfigError, SweepStopped
from ppo_lab.launching.command_line import fail

log = logging.getLogger(__name__)


def check_max_replicas(value: Any) -> int | None:
    """`hydra.launcher.max_replicas`: null (no cap) or an integer >= 1, before anything runs."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError("hydra.launcher.max_replicas", value,
                          "null (no cap) or an integer >= 1: the most replicas (cells x seeds) one process trains")
    return value


def max_replicas_at_start(value: Any) -> int | None:
    """`check_max_replicas` when Hydra builds the launcher, before the sweep dir exists or any
    job is composed: a bad value ends the command as launch.py ends on a config error
    (`error: ...`, exit 2), leaving nothing behind."""
    try:
        return check_max_replicas(value)
    except ConfigError as exc:
        fail(exc)


def task_config(sweep_config: DictConfig) -> dict:
    """A job's config resolved as its run will see it: without `hydra`, as Hydra's `run_job`
    hands it to the task, and a value left missing (`???`, an optional section) as `???`."""
    HydraConfig.instance().set_config(sweep_config)  # ${hydra:...} interpolations resolve per job
    task = copy.deepcopy(sweep_config)
    with read_write(task), open_dict(task):
        del task["hydra"]
    return OmegaConf.to_container(task, resolve=True)


def plan_groups(keys: Sequence[str], seeds: Sequence[int], max_replicas: int | None) -> list[list[int]]:
    """Job indices per program: jobs with equal keys together (in order of first appearance),
    each group of C cells of S seeds split into ceil(C x S / max_replicas) programs of
    nearly equal size (a job of more seeds than the cap runs alone)."""
    by_key: dict[str, list[int]] = {}
    for index, key in enumerate(keys):
        by_key.setdefault(key, []).append(index)
    groups = []
    for members in by_key.values():
        per_cell = max(seeds[i] for i in members)
        cap = len(members) if max_replicas is None else max(1, max_replicas // per_cell)
        groups += [part.tolist() for part in np.array_split(members, -(-len(members) // cap))]
    return groups


def group_jobs(hydra_context, config: DictConfig, job_overrides: Sequence[Sequence[str]], initial_job_idx: int,
               max_replicas: int | None) -> tuple[list[DictConfig], list[list[int]]]:
    """Each job's sweep config (hydra.job.num and id = its number), and the jobs grouped into
    shared programs (lists of positions in `job_overrides`), said once in the log."""
    configs, keys, seeds = [], [], []
    saved = HydraConfig.instance().cfg
    try:
        for i, overrides in enumerate(job_overrides):
            idx = initial_job_idx + i
            log.info("\t#%d : %s", idx, " ".join(filter_overrides(overrides)))
            sweep_config = hydra_context.config_loader.load_sweep_config(config, list(overrides))
            with open_dict(sweep_config):
                sweep_config.hydra.job.id = idx
                sweep_config.hydra.job.num = idx
            task = task_config(sweep_config)
            configs.append(sweep_config)
            keys.append(shared_program_key(task))
            seeds.append(int(task.get("num_seeds") or 1))
    finally:
        HydraConfig.instance().cfg = saved
    groups = plan_groups(keys, seeds, max_replicas)
    announce(groups, seeds)
    return configs, groups


def announce(groups: list[list[int]], seeds: list[int]) -> None:
    num_jobs = sum(len(g) for g in groups)
    if num_jobs > 1 and all(len(g) == 1 for g in groups):
        log.warning("vmap groups: no two of the %d jobs differ only in traced keys (ppo.%s) and seed, so none can "
                    "share a program: running them one by one, each compiling its own", num_jobs,
                    ", ppo.".join(traced_keys()))
        return
    sizes = ", ".join(f"{len(g)} x {seeds[g[0]]}" for g in groups)
    log.info("vmap groups: %d jobs in %d program(s) of cells x seeds: %s", num_jobs, len(groups), sizes)


def run_group(hydra_context, task_function, sweep_configs: list[DictConfig]) -> list[JobReturn]:
    """Run the jobs of one group (their sweep configs, hydra.job.num/id set) in this process."""
    if len(sweep_configs) == 1:
        return [run_job(hydra_context=hydra_context, task_function=task_function, config=sweep_configs[0],
                        job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")]
    noted: list[tuple[Any, Path]] = []

    def note(cfg) -> None:  # the task of a group's job: its config and run dir; training comes after
        noted.append((cfg, Path(HydraConfig.get().runtime.output_dir)))

    returns = [run_job(hydra_context=hydra_context, task_function=note, config=config, job_dir_key="hydra.sweep.dir",
                       job_subdir_key="hydra.sweep.subdir", configure_logging=i == 0)
               for i, config in enumerate(sweep_configs)]
    log.info("training %d jobs as one program: %s", len(noted), ", ".join(str(run_dir) for _, run_dir in noted))
    # Here, not at the top: it imports jax and the trainer, which a command that never trains
    # (Hydra imports every launcher at each start-up) should not pay for.
    from ppo_lab.run.entry import train_cells

    saved = HydraConfig.instance().cfg
    # The runs ask Hydra whether they are part of a multirun (skip completed ones) and which
    # sweep (loggers' groups): the first job's config answers for the group.
    HydraConfig.instance().set_config(sweep_configs[0])
    try:
        results = train_cells([cfg for cfg, _ in noted], [run_dir for _, run_dir in noted])
    except Exception as exc:  # noqa: BLE001 - the whole group failed: every job says why
        results = [exc] * len(noted)
    finally:
        HydraConfig.instance().cfg = saved
    for ret, (cfg, _), result, config in zip(returns, noted, results, sweep_configs):
        if isinstance(result, BaseException):
            log.error("%s", result)
            ret.status, ret.return_value = JobStatus.FAILED, result
            hydra_context.callbacks.on_job_end(config=config, job_return=ret)  # a failed job's error.txt
        else:
            ret.return_value = job_result(result, cfg)  # as launch.py's main returns it
    for result in results:
        if not isinstance(result, BaseException):
            SweepStopped.after(result)  # a signal stopped the group: no later group starts
    return returns


class VmapLauncher(Launcher):
    """`hydra/launcher=vmap`: the groups trained one after another in this process."""

    def __init__(self, max_replicas: int | None = None) -> None:
        super().__init__()
        self.max_replicas = max_replicas_at_start(max_replicas)
        self.config = self.task_function = self.hydra_context = None

    def setup(self, *, hydra_context, task_function, config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        log.info("Launching %d jobs locally, grouped into shared programs", len(job_overrides))
        configs, groups = group_jobs(self.hydra_context, self.config, job_overrides, initial_job_idx, self.max_replicas)
        returns: list = [None] * len(configs)
        for group in groups:
            for j, ret in zip(group, run_group(self.hydra_context, self.task_function, [configs[j] for j in group])):
                returns[j] = ret
            configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        return returns
