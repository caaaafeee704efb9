"""Entry point: `python launch.py [group=option ...] [key=value ...]` (Hydra).

    python launch.py                                   # the default experiment
    python launch.py env=cartpole num_seeds=4          # 4 seeds vmapped in one process
    python launch.py -m seed=0,1,2,3                   # one job per seed (Hydra multirun)

jax is imported only after the `hardware` group is applied: JAX reads its platform and XLA
flags at import, so importing it at the top of this file would silently ignore hardware=...
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger("ppo_lab.launch")


def _run_dir() -> Path:
    from hydra.core.hydra_config import HydraConfig

    return Path(HydraConfig.get().runtime.output_dir)


def _multirun() -> bool:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.get().mode == RunMode.MULTIRUN


def _forget_empty_run_dir(run_dir: Path) -> None:
    """After a config error, remove the run dir Hydra just made if it holds no result, so a
    bad command line leaves nothing that looks like a run (never touches an existing run)."""
    import shutil

    from ppo_lab import rundir

    if any((run_dir / name).exists() for name in (rundir.CONFIG, rundir.METRICS, rundir.SUMMARY, rundir.CHECKPOINTS)):
        return
    if all(p.name == ".hydra" or p.suffix == ".log" for p in run_dir.iterdir()):
        logging.shutdown()
        shutil.rmtree(run_dir, ignore_errors=True)


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict | None:
    from ppo_lab.errors import ConfigError
    from ppo_lab.hardware import HardwareError, apply_hardware

    run_dir = _run_dir()
    try:
        resolved = OmegaConf.to_container(cfg, resolve=True)
        from ppo_lab.launching.callbacks import completed_summary

        done = completed_summary(run_dir, resolved)  # a relaunched sweep skips finished runs
        if done is not None:
            return done
        from ppo_lab.config import validate_hardware, validate

        apply_hardware(validate_hardware(resolved["hardware"]))  # before anything imports jax
        run_cfg = validate(resolved)
        from ppo_lab.hardware import check_devices, configure_jax
        from ppo_lab.run.recorders import check_logger_names

        check_logger_names(run_cfg.logger)
        configure_jax(run_cfg.hardware)
        devices = check_devices(run_cfg.hardware)
        from ppo_lab.run.build import build_env_and_network

        build_env_and_network(run_cfg)  # env-specific config errors, before any compile
    except (ConfigError, HardwareError) as exc:
        log.error("%s", exc)
        print(f"error: {exc}", file=sys.stderr)
        if _multirun():
            raise  # Hydra records this job as failed and the sweep goes on; the aggregate names it
        _forget_empty_run_dir(run_dir)
        sys.exit(2)

    from ppo_lab.run.loop import ResumeError, run

    try:
        return run(run_cfg, run_dir, resolved, devices)
    except ResumeError as exc:
        log.error("%s", exc)
        print(f"error: {exc}", file=sys.stderr)
        if _multirun():
            raise
        sys.exit(2)


if __name__ == "__main__":
    main()
