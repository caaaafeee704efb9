"""Submitit launchers for sweeps: `hydra/launcher=slurm` and `hydra/launcher=local`.

They are hydra-submitit-launcher 1.2.0's launchers with four changes (see docs/sweeps.md):

- **Failures never block the rest.** The plugin collects results one job after another and
  stops at the first job that raised or was cancelled; here every job is waited for, a job
  that failed or was cancelled becomes a FAILED JobReturn (so the multirun still exits 1), and
  the sweep is aggregated anyway (by ``ppo_lab.launching.callbacks.SweepCallback``).
- **Submit and return at once** with ``hydra.launcher.wait=false``: the jobs are submitted,
  their ids written to ``<sweep_dir>/jobs.json``, and the command returns. Aggregate later from
  any shell: ``ppo-lab aggregate <sweep_dir> --wait``.
- **``<sweep_dir>/jobs.json``** records every job (number, SLURM id, overrides, final state),
  so the aggregate can name a cancelled job as failed even though its run dir says "stopped"
  (the file: ``ppo_lab.rundir.sweep_files``; states and sacct: ``ppo_lab.rundir.slurm_jobs``).
- **The jobs can import this plugin:** Hydra only instantiates launchers from the
  ``hydra_plugins`` package, and the pickled launcher (and Hydra's plugin registry) must be
  importable in the job, so a ``setup`` line puts the repository root on ``PYTHONPATH``.

Each submitit job runs a group of Hydra jobs (the launcher's `__call__`): one job alone, or with
``hydra.launcher.vectorize=true`` (docs/sweeps.md) the jobs that differ only in traced
hyperparameters and ``seed``, grouped as ``hydra/launcher=vmap`` groups them
(``ppo_lab.launching.vmap_groups``; ``hydra.launcher.max_replicas`` caps a group) and trained as
one program, each in its own run dir.

Requeue and resume need nothing here: submitit's ``checkpoint()`` resubmits the same Hydra
job, which starts again in its own run dir, where the runner resumes from its checkpoint.

Import-light on purpose (no jax): Hydra imports every ``hydra_plugins`` module at start-up.
"""

from __future__ import annotations

import logging
import shlex
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence

import submitit
from submitit.core.utils import UncompletedJobError
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides, setup_globals
from hydra_plugins.hydra_submitit_launcher import submitit_launcher as _plugin
from omegaconf import OmegaConf, open_dict

from ppo_lab.launching.vmap_groups import group_jobs, max_replicas_at_start, run_group
from ppo_lab.rundir.slurm_jobs import KILLED_STATES, final_state, read_jobs, sacct_states, write_jobs

log = logging.getLogger(__name__)


class SweepLauncherMixin:
    """The changes described in the module docstring, over BaseSubmititLauncher (the plugin's
    SlurmLauncher and LocalLauncher: `hydra_plugins.ppo_lab_launchers`)."""
    _EXECUTOR: str

    def __init__(self, wait: bool = True, sizing: Any = None, poll_s: float = 1.0, vectorize: bool = False,
                 max_replicas: int | None = None, **params: Any) -> None:
        self.wait = bool(wait)
        self.poll_s = float(poll_s)
        self.vectorize = bool(vectorize)
        self.max_replicas = max_replicas_at_start(max_replicas) if self.vectorize else None
        super().__init__(**params)  # type: ignore[call-arg]

    # -- submission --------------------------------------------------------------------
    def _executor(self):
        params = dict(self.params)
        setup = list(params.pop("setup", None) or [])
        root = Path(sys.modules[type(self).__module__].__file__).resolve().parents[2]  # holds hydra_plugins/<plugin>/
        setup.insert(0, f"export PYTHONPATH={shlex.quote(str(root))}${{PYTHONPATH:+:$PYTHONPATH}}")
        init = {"folder": params.pop("submitit_folder")}
        if "max_num_timeout" in params:
            init[f"{self._EXECUTOR}_max_num_timeout"] = params.pop("max_num_timeout")
        executor = submitit.AutoExecutor(cluster=self._EXECUTOR, **init)
        base = set(OmegaConf.structured(_plugin.BaseQueueConf).keys())
        kwargs = {k if k in base else f"{self._EXECUTOR}_{k}": v for k, v in params.items() if v is not None}
        kwargs[f"{self._EXECUTOR}_setup"] = setup
        executor.update_parameters(**kwargs)
        return executor

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        assert self.config is not None
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        executor = self._executor()
        log.info("Submitit '%s' sweep output dir: %s", self._EXECUTOR, sweep_dir)
        overrides = [list(o) for o in job_overrides]
        groups = self._groups(overrides, initial_job_idx)
        t0 = time.monotonic()
        # One submitit job per group (`__call__`): with vectorize a group of the jobs sharing a
        # program, else each job alone.
        args = [([overrides[j] for j in g], [initial_job_idx + j for j in g], Singleton.get_state()) for g in groups]
        submitted = executor.map_array(self, *zip(*args))
        jobs = {j: job for group, job in zip(groups, submitted) for j in group}  # a group's jobs share its job

        record = read_jobs(sweep_dir) or {"launcher": self._EXECUTOR, "jobs": {}}
        record.update(wait=self.wait, sweep_dir=str(sweep_dir.resolve()), submitted_at=time.strftime("%Y-%m-%dT%H:%M:%S"))
        for j, job in sorted(jobs.items()):
            idx = initial_job_idx + j
            record["jobs"][str(idx)] = {"num": idx, "job_id": job.job_id, "overrides": overrides[j], "state": "SUBMITTED", "outcome": None, "error": None}
        write_jobs(sweep_dir, record)
        ids = ", ".join(job.job_id for job in submitted)
        log.info("submitted %d job(s) in %.1f s: %s", len(submitted), time.monotonic() - t0, ids)

        if not self.wait:
            print(f"submitted {len(submitted)} job(s) ({ids}); not waiting (hydra.launcher.wait=false).\n"
                  f"aggregate when they are done:  ppo-lab aggregate {sweep_dir} --wait", flush=True)
            return [JobReturn(overrides=overrides[j], status=JobStatus.COMPLETED, _return_value={"submitted": job.job_id})
                    for j, job in sorted(jobs.items())]

        # Wait for every job (a failed or cancelled one must not stop the waiting).
        while not all(job.done() for job in submitted):
            time.sleep(self.poll_s)
        returns = {}
        with ThreadPoolExecutor(max_workers=min(16, len(submitted))) as pool:  # a result still on its way: up to ~15 s each
            for group, rets in zip(groups, pool.map(self._collect_group, [[overrides[j] for j in g] for g in groups], submitted)):
                returns.update(zip(group, rets))
        states = self._final_states(submitted)
        for j, job in sorted(jobs.items()):
            entry, ret = record["jobs"][str(initial_job_idx + j)], returns[j]
            entry["state"] = states.get(job.job_id) or _state(job)
            entry["outcome"] = "completed" if ret.status == JobStatus.COMPLETED else "failed"
            if ret.status == JobStatus.FAILED:
                entry["error"] = f"{type(ret._return_value).__name__}: {str(ret._return_value).strip().splitlines()[0] if str(ret._return_value).strip() else ''}"
        write_jobs(sweep_dir, record)
        failed = [e for e in record["jobs"].values() if e["outcome"] == "failed"]
        log.info("%d job(s) ended in %.1f s; %d failed%s", len(jobs), time.monotonic() - t0, len(failed),
                 "".join(f"\n\t#{e['num']} ({e['job_id']}, {e['state']}): {e['error']}" for e in failed))
        return [returns[j] for j in range(len(overrides))]

    def _groups(self, overrides: list[list[str]], initial_job_idx: int) -> list[list[int]]:
        """The jobs' groups (positions in `overrides`): with vectorize the vmap groups
        (`vmap_groups.group_jobs`, which composes every job to find them), else one a job."""
        if self.vectorize:
            return group_jobs(self.hydra_context, self.config, overrides, initial_job_idx, self.max_replicas)[1]
        for i, job in enumerate(overrides):
            log.info("\t#%d : %s", initial_job_idx + i, " ".join(filter_overrides(job)))
        return [[i] for i in range(len(overrides))]

    def __call__(self, overrides: list[list[str]], nums: list[int], singleton_state) -> list[JobReturn]:
        """A group's submitit job (in place of the plugin's one job): compose each Hydra job,
        train them as one program (`vmap_groups.run_group`), return their JobReturns. The
        plugin's `checkpoint` resubmits this same call: on requeue every cell resumes."""
        Singleton.set_state(singleton_state)
        setup_globals()
        configs = []
        for job_overrides, num in zip(overrides, nums):
            sweep_config = self.hydra_context.config_loader.load_sweep_config(self.config, job_overrides)
            with open_dict(sweep_config.hydra.job) as job:
                job.id = submitit.JobEnvironment().job_id
                job.num = num
            configs.append(sweep_config)
        return run_group(self.hydra_context, self.task_function, configs)

    @staticmethod
    def _collect_group(overrides: list[list[str]], job) -> list[JobReturn]:
        """Each of a group's jobs' JobReturn: its own, or FAILED with what ended the submitit job."""
        try:
            rets = _results(job)[0]
        except Exception as exc:  # noqa: BLE001 - cancelled, killed, or raised in the job
            return [JobReturn(overrides=o, status=JobStatus.FAILED, _return_value=exc) for o in overrides]
        return [ret if isinstance(ret, JobReturn) else JobReturn(overrides=o, status=JobStatus.COMPLETED, _return_value=ret)
                for o, ret in zip(overrides, rets)]

    def _final_states(self, jobs, timeout_s: float = 15.0) -> dict[str, str]:
        """sacct states once final: a job's result file appears a moment before SLURM
        marks it COMPLETED (the process still exits), so wait briefly for that."""
        if self._EXECUTOR != "slurm":
            return {}
        ids = list(dict.fromkeys(j.job_id for j in jobs))  # a group's jobs share one
        deadline = time.monotonic() + timeout_s
        states = sacct_states(ids)
        while not all(final_state(states.get(i)) for i in ids) and time.monotonic() < deadline:
            time.sleep(0.5)
            states = sacct_states(ids)
        return states


def _results(job) -> list:
    """`job.results()`, without submitit's wait (~15 s) for a result file that never comes: a
    job SLURM ended itself (cancelled, out of time or memory, its node lost) wrote none."""
    state = str(job.state)
    if state.split(" ")[0] in KILLED_STATES and not job.paths.result_pickle.exists():
        raise UncompletedJobError(f"Job {job.job_id} ended {state} without a result (SLURM stopped it)")
    return job.results()


def _state(job) -> str:
    try:
        return job.watcher.get_state(job.job_id, mode="force")
    except Exception:  # noqa: BLE001 - local jobs, sacct hiccups
        return "UNKNOWN"
