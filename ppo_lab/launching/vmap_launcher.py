"""`hydra/launcher=vmap`: a multirun's jobs grouped into shared programs, each group trained by
one compiled program with replicas = cells x seeds (`ppo_lab.launching.vmap_groups`).

    python launch.py -cd sweeps -cn lr experiment=cartpole hydra/launcher=vmap
    python launch.py -cd sweeps -cn SWEEP hydra/launcher=vmap hydra.launcher.max_replicas=12

The groups run one after another in this process, as the basic launcher runs its jobs; each
job keeps its run dir (`<sweep_dir>/<job num>`). Jobs that share no program with another run
alone, as with the basic launcher (said once). Import-light (no jax), as every launcher.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, configure_log, filter_overrides, setup_globals
from hydra.plugins.launcher import Launcher
from omegaconf import DictConfig, open_dict

from ppo_lab.config import shared_program_key, traced_keys
from ppo_lab.launching.vmap_groups import max_replicas_at_start, plan_groups, run_group, task_config

log = logging.getLogger(__name__)


def load_jobs(hydra_context, config: DictConfig, job_overrides: Sequence[Sequence[str]], initial_job_idx: int):
    """Each job's sweep config (hydra.job.num and id = its number) and its grouping key and seeds."""
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
    return configs, keys, seeds


def announce(groups: list[list[int]], num_jobs: int, seeds: list[int]) -> None:
    if num_jobs > 1 and all(len(g) == 1 for g in groups):
        log.warning("hydra/launcher=vmap: no two of the %d jobs differ only in traced keys (ppo.%s) and seed, so "
                    "none can share a program: running them one by one, each compiling its own", num_jobs,
                    ", ppo.".join(traced_keys()))
        return
    sizes = ", ".join(f"{len(g)} x {seeds[g[0]]}" for g in groups)
    log.info("hydra/launcher=vmap: %d jobs in %d program(s) of cells x seeds: %s", num_jobs, len(groups), sizes)


class VmapLauncher(Launcher):
    def __init__(self, max_replicas: int | None = None) -> None:
        super().__init__()
        self.max_replicas = max_replicas_at_start(max_replicas)
        self.config = self.task_function = self.hydra_context = None

    def setup(self, *, hydra_context, task_function, config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        max_replicas = self.max_replicas
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        log.info("Launching %d jobs locally, grouped into shared programs", len(job_overrides))
        configs, keys, seeds = load_jobs(self.hydra_context, self.config, job_overrides, initial_job_idx)
        groups = plan_groups(keys, seeds, max_replicas)
        announce(groups, len(configs), seeds)
        returns: list = [None] * len(configs)
        for group in groups:
            for j, ret in zip(group, run_group(self.hydra_context, self.task_function, [configs[j] for j in group])):
                returns[j] = ret
            configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        return returns
