"""`hydra/launcher=vmap`: a multirun's jobs grouped into shared programs (`vmap_groups`), each
group trained in this process by one compiled program with replicas = cells x seeds.

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

from hydra.core.utils import JobReturn, configure_log, setup_globals
from hydra.plugins.launcher import Launcher
from omegaconf import DictConfig

from ppo_lab.launching.vmap_groups import group_jobs, max_replicas_at_start, run_group

log = logging.getLogger(__name__)


class VmapLauncher(Launcher):
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
