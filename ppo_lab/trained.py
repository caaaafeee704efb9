"""Load a trained run back from its run directory: config, built components, latest checkpoint.

Shared by `python -m ppo_lab.evaluate` and `python -m ppo_lab.replay`. Applies the run's
`hardware` settings first, so call it before anything in the process imports jax.
"""

from __future__ import annotations

from pathlib import Path


def load_trained(run_dir: Path, eval_episodes: int | None = None, deterministic: bool | None = None):
    """`(cfg, comp, state, meta)` for the latest checkpoint in `run_dir`.

    `cfg` is the run's validated RunConfig (optionally with other evaluation settings),
    `comp` the `build.Components`, `state` the replica-stacked learner state (pass it to
    `evaluate.params_per_seed`), `meta` the checkpoint's JSON (`update`, `timesteps`, ...).
    Raises FileNotFoundError when the directory has no config.yaml or no complete checkpoint.
    """
    from ppo_lab.config import validate_hardware
    from ppo_lab.hardware import apply_hardware

    from ppo_lab import rundir

    run_dir = Path(run_dir)
    # The hardware settings first: validating the config imports the env modules, and jax.
    apply_hardware(validate_hardware(rundir.read_config(run_dir)["hardware"]))
    from ppo_lab import checkpoint

    cfg = rundir.load_run_config(run_dir, eval_episodes=eval_episodes, deterministic=deterministic)
    from ppo_lab.build import build
    from ppo_lab.hardware import check_devices

    if not checkpoint.list_checkpoints(run_dir / rundir.CHECKPOINTS):
        # Checked before building anything: fail in a second, not after a compile.
        raise FileNotFoundError(f"no complete checkpoint in {run_dir / rundir.CHECKPOINTS}")
    devices = check_devices(cfg.hardware)
    comp = build(cfg, len(devices))
    state, meta = checkpoint.load(run_dir / rundir.CHECKPOINTS, state_template(cfg, comp, devices))
    return cfg, comp, state, meta


def state_template(cfg, comp, devices):
    """The replica-stacked learner state's structure, shapes and dtypes, for `checkpoint.load`.

    Traced with `jax.eval_shape` (nothing compiled or run: ~0.5 s instead of ~6 s for a
    jitted init on CPU); falls back to a real init when a leaf cannot be a numpy array.
    """
    import jax
    import numpy as np

    from ppo_lab.parallel import init_replicas, make_mesh, replica_keys

    param_key, env_key = replica_keys(comp.layout, cfg.seeds)[0]
    shapes = jax.eval_shape(comp.trainer.init, param_key, env_key)
    try:
        return jax.tree.map(lambda s: np.zeros((comp.layout.num_replicas, *s.shape), s.dtype), shapes)
    except TypeError:  # e.g. typed PRNG keys
        return init_replicas(comp.trainer.init, comp.layout, cfg.seeds, make_mesh(comp.layout, devices))
