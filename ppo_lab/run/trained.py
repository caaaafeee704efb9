"""Load a trained run back from its run directory: config, built components, latest checkpoint.

Shared by `ppo-lab evaluate` and `ppo-lab replay`. Applies the run's
`hardware` settings first, so call it before anything in the process imports jax.
"""

from __future__ import annotations

from pathlib import Path

from ppo_lab import rundir
from ppo_lab.hardware import start_jax
from ppo_lab.ppo.parallel import make_mesh, replica_template
from ppo_lab.run import checkpoint
from ppo_lab.run.build import build


def load_trained(run_dir: Path, eval_episodes: int | None = None, deterministic: bool | None = None):
    """`(cfg, comp, state, meta)` for the latest checkpoint in `run_dir`.

    `cfg` is the run's validated RunConfig (optionally with other evaluation settings),
    `comp` the `build.Components`, `state` the replica-stacked learner state (pass it to
    `evaluate.params_per_seed`), `meta` the checkpoint's JSON (`update`, `timesteps`, ...).
    Raises FileNotFoundError when the directory has no config.yaml or no complete checkpoint.
    """
    run_dir = Path(run_dir)
    cfg = rundir.load_run_config(run_dir, eval_episodes=eval_episodes, deterministic=deterministic)  # jax-free
    devices = start_jax(cfg.hardware)  # the run's hardware settings, before jax is imported
    if not rundir.has_checkpoint(run_dir / rundir.CHECKPOINTS):
        # Checked before building anything: fail in a second, not after a compile.
        raise FileNotFoundError(f"no complete checkpoint in {run_dir / rundir.CHECKPOINTS}")
    comp = build(cfg, len(devices))
    mesh = make_mesh(comp.layout, devices)
    template = replica_template(comp.trainer.init, comp.layout, cfg.seeds, mesh, *comp.init_arguments())
    loaded = checkpoint.load_verified(run_dir / rundir.CHECKPOINTS, template)  # damaged ones left in place
    return cfg, comp, loaded.state, loaded.meta
