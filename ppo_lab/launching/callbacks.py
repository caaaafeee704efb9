"""Hydra glue: end-of-multirun aggregation, a failed job's error.txt, one resolver, the user's config folders.

- ``SweepCallback`` (configured in ``conf/config.yaml`` under ``hydra.callbacks``) aggregates
  the sweep dir when a multirun ends: from ``on_multirun_end`` when every job succeeded, and
  from an ``atexit`` hook registered in ``on_multirun_start`` when it did not (Hydra's
  BasicSweeper re-raises a failed job's error, the process exits 1, and ``on_multirun_end``
  never fires). Either way it writes ``aggregate.csv``, ``runs.csv`` and ``curves.png`` into
  the sweep dir and prints the table; an error in aggregation is logged, never raised. A sweep
  submitted with ``hydra.launcher.wait=false`` is not aggregated (its jobs have not run yet);
  the command to aggregate it later is printed instead.
- ``${ppo_lab.scaled:BASE,F1,F2,...}`` (``ppo_lab.resolvers``, registered when this
  module is imported; Hydra imports it before it builds the sweeper).
- Every job, single or of a multirun, in whatever process a launcher runs it: the user's
  config folders on ``hydra.searchpath`` count as ``conf/`` for the lab's key and option checks
  (``on_job_start``: ``config_keys.use_config_dirs``), and a run records them (manifest.json).

No jax at import: this module is imported in the launching process of every Hydra command
(a multirun's start asks `hardware` which process this is: the app has imported jax by then). Nor
matplotlib: the aggregator (``ppo_lab.analysis.aggregate``, plots included, about half a second
of imports) is imported when a multirun ends, not by every single run that instantiates the
callback.
"""

from __future__ import annotations

import atexit
import logging
from pathlib import Path
from typing import Any

from hydra.core.utils import JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ppo_lab import rundir  # jax-free: safe before the hardware settings are applied
from ppo_lab.config_keys import use_config_dirs
from ppo_lab.errors import RunDirFormatError
from ppo_lab.resolvers import scaled as _scaled  # noqa: F401 - registers ${ppo_lab.scaled:...}
from ppo_lab.rundir import slurm_jobs

log = logging.getLogger(__name__)


class SweepCallback(Callback):
    """Aggregate the sweep dir at the end of every multirun, also when jobs failed."""

    def __init__(self, aggregate: bool = True) -> None:
        self.enabled = bool(aggregate)
        self.sweep_dir: Path | None = None
        self.done = False

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from ppo_lab.hardware import process_index_before_start

        self.sweep_dir = Path(str(config.hydra.sweep.dir))
        self.done = False
        process = process_index_before_start(config.hardware)  # as each of its runs finds it (docs/multihost.md)
        if self.enabled and process != 0:
            log.info("process %d of a multi-process multirun: process 0 aggregates the sweep", process)
            self.enabled = False
        if self.enabled:
            atexit.register(self._at_exit)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._aggregate()

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        # A job of a submitit launcher runs in a process of its own, whose command line is not
        # the user's: the search path comes from the job's config.
        use_config_dirs(OmegaConf.select(config, "hydra.searchpath") or [])

    def on_job_end(self, config: DictConfig, job_return: Any = None, **kwargs: Any) -> None:
        """A job that raised before the runner wrote summary.json (a config error, say) leaves
        `error.txt` in its run dir, so the aggregate names it as failed, with the reason."""
        if job_return is None or job_return.status != JobStatus.FAILED:
            return
        try:
            out = Path(str(job_return.hydra_cfg.hydra.runtime.output_dir))
            if out.is_dir() and not (out / rundir.SUMMARY).exists():
                exc = job_return._return_value
                rundir.write_error(out, f"{type(exc).__name__}: {exc}")
        except Exception:  # noqa: BLE001 - never turn a failed job into a crash here
            log.exception("could not record the failure of job %s", getattr(job_return, "overrides", "?"))

    def _at_exit(self) -> None:
        if not self.done:
            log.warning("the multirun ended early (a job failed?): aggregating what there is")
            self._aggregate()

    def _aggregate(self) -> None:
        if self.done or not self.enabled or self.sweep_dir is None:
            return
        self.done = True
        sweep_dir = self.sweep_dir
        if not sweep_dir.is_dir():
            return
        if slurm_jobs.submitted_without_waiting(sweep_dir):
            print(f"not aggregating yet (jobs submitted without waiting); later: ppo-lab aggregate {sweep_dir} --wait", flush=True)
            return
        try:
            from ppo_lab.analysis.aggregate import run_aggregate

            run_aggregate([sweep_dir], out_dir=sweep_dir)
        except RunDirFormatError as exc:  # a sweep dir of an older lab's runs: said in one line, as each job said it
            log.warning("not aggregating %s: %s", sweep_dir, exc)
        except Exception:  # noqa: BLE001 - aggregation must never turn a sweep into an error
            log.exception("aggregation of %s failed; run it by hand: ppo-lab aggregate %s", sweep_dir, sweep_dir)
