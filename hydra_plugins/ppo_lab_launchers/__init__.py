"""ppo_lab's sweep launchers as Hydra plugins (Hydra instantiates launchers only from the
`hydra_plugins` package). The logic lives in `ppo_lab.launching.launchers`; configs:
`conf/hydra/launcher/slurm.yaml`, `local.yaml` and `vmap.yaml`. This folder sits at the repository root,
which is on sys.path when you run `python launch.py` (and in the jobs, via a setup line)."""

from hydra_plugins.hydra_submitit_launcher import submitit_launcher as _plugin

from ppo_lab.launching.launchers import SweepLauncherMixin
from ppo_lab.launching.vmap_groups import VmapLauncher as _VmapLauncher


class SlurmLauncher(SweepLauncherMixin, _plugin.SlurmLauncher):
    """`hydra/launcher=slurm`."""


class LocalLauncher(SweepLauncherMixin, _plugin.LocalLauncher):
    """`hydra/launcher=local`."""


class VmapLauncher(_VmapLauncher):
    """`hydra/launcher=vmap`."""
