"""gymnax, imported without its renderers' plotting stack: every env of the lab speaks gymnax's
API (`environment.Environment`, `spaces`), so every training process imports gymnax.

gymnax's package imports all its envs, and a few of them import seaborn and matplotlib's pyplot
at their top for `render` (seaborn brings pandas and scipy.stats): 1.3 s of a 2.5 s import on a
2-core AMD EPYC, paid by every `launch.py` and SLURM job, used by none. Here those two are lazy
modules (`ppo_lab.parts.lazy_module`): loaded on first use, by a renderer or by whoever imports
them later in the same process (the lab's own plots, `ppo_lab.analysis.figures`).

Import gymnax through this module (`from ppo_lab.envs.gymnax_api import environment, spaces`).
"""

from ppo_lab.parts import lazy_module

RENDERING_ONLY = [lazy_module(name) for name in ("seaborn", "matplotlib.pyplot")]

import gymnax  # noqa: E402 - after its rendering imports are made lazy
from gymnax.environments import environment, spaces  # noqa: E402

__all__ = ["environment", "gymnax", "spaces"]
