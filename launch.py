"""Training from a checkout: `python launch.py [group=option ...] [key=value ...]` (Hydra), the
same command as `ppo-lab train` (ppo_lab/launching/app.py: the Hydra app over
`ppo_lab.run.entry.train(cfg, run_dir)`).

    python launch.py                                   # the default experiment
    python launch.py env=cartpole num_seeds=4          # 4 seeds vmapped in one process
    python launch.py -m seed=0,1,2,3                   # one job per seed (Hydra multirun)
"""

import sys

from ppo_lab.launching.train_command import main

if __name__ == "__main__":
    main(sys.argv[1:])
