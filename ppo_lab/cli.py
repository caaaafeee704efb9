"""The `ppo-lab` command: the lab's tools under one name (training stays `python launch.py`).

    ppo-lab watch DIR            live dashboard of every run under DIR
    ppo-lab aggregate SWEEP_DIR  statistics across seeds: aggregate.csv, runs.csv, curves.png
    ppo-lab evaluate RUN_DIR     re-evaluate a saved run from its latest checkpoint
    ppo-lab replay RUN_DIR       a GIF of one episode of a trained foraging agent
    ppo-lab plots RUN_DIR        a PNG panel of one run's training curves
    ppo-lab compare A B ...      compare runs or benchmarks: a table and comparison.png
    ppo-lab reproduce RUN_DIR    re-run a run's first updates and compare metrics.csv row by row
    ppo-lab benchmark            the performance suite

Every subcommand's `main(argv) -> int` is imported here, at the top. Importing jax (and flax,
optax) does not start XLA's backend, so `evaluate`, `replay` and `benchmark` can still apply
their hardware settings (`ppo_lab.hardware.start_jax`) when they run. None of these modules
may import gymnax or Jumanji at its top: that would start the backend before those settings.
"""

from __future__ import annotations

import sys

from ppo_lab.analysis.aggregate import main as aggregate_main
from ppo_lab.analysis.compare import main as compare_main
from ppo_lab.analysis.run_plots import main as plots_main
from ppo_lab.analysis.watch import main as watch_main
from ppo_lab.bench.suite import main as benchmark_main
from ppo_lab.run.evaluate import main as evaluate_main
from ppo_lab.run.replay import main as replay_main
from ppo_lab.run.reproduce import main as reproduce_main

# name -> (its `main(argv) -> int`, one line for the help)
SUBCOMMANDS = {
    "watch": (watch_main, "live dashboard of every run under a directory"),
    "aggregate": (aggregate_main, "statistics across seeds of a sweep (aggregate.csv, curves.png)"),
    "evaluate": (evaluate_main, "re-evaluate a saved run from its latest checkpoint"),
    "replay": (replay_main, "render one episode of a trained foraging agent to a GIF"),
    "plots": (plots_main, "a PNG panel of one run's training curves"),
    "compare": (compare_main, "compare runs or benchmarks (table and comparison.png)"),
    "reproduce": (reproduce_main, "re-run a run's first updates from its config and compare metrics.csv"),
    "benchmark": (benchmark_main, "the performance suite (steps/s and their ratios)"),
}


def usage() -> str:
    width = max(map(len, SUBCOMMANDS))
    lines = ["usage: ppo-lab <command> [options]   (ppo-lab <command> --help for its options)", "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, (_, text) in SUBCOMMANDS.items()]
    lines += ["", "Training is `python launch.py [group=option ...] [key=value ...]` (Hydra)."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        print(f"ppo-lab: unknown command {name!r}; valid: {', '.join(SUBCOMMANDS)}\n\n{usage()}", file=sys.stderr)
        return 2
    command, _ = SUBCOMMANDS[name]
    sys.argv[0] = f"ppo-lab {name}"  # argparse's prog, so each --help names the real command
    return int(command(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
