"""The `ppo-lab` command: the lab's tools under one name, each a line of `SUBCOMMANDS` below
(`ppo-lab --help` lists them; in a checkout, `python launch.py` is `ppo-lab train`).

Each subcommand is a module with a `main(argv) -> int`, imported when that command runs (by
`_run` below): `ppo-lab --help` and `ppo-lab watch` need neither jax nor the plotting and
statistics stacks the others import. Measured on 2 cores,
`import ppo_lab.cli` took 2.05 s with every command's module imported here; `replay` alone
imports in 1.15 s, `aggregate` in 0.70 s, `watch` in 0.29 s. Importing jax (and flax, optax)
does not start XLA's backend, so `evaluate`, `replay` and `benchmark` can still apply their
hardware settings (`ppo_lab.hardware.start_jax`) when they run. None of these modules may
import gymnax or Jumanji at its top: that would start the backend before those settings.
"""

from __future__ import annotations

import sys
from functools import partial

from ppo_lab.errors import RunDirFormatError


def _run(name: str, argv: list[str]) -> int | None:
    """Command `name`'s `main(argv)`, its module imported only now (see the module docstring)."""
    match name:
        case "train":
            from ppo_lab.launching.train_command import main
        case "resume":
            from ppo_lab.launching.resume_command import main
        case "check-env":
            from ppo_lab.launching.check_env_command import main
        case "watch":
            from ppo_lab.analysis.watch import main
        case "aggregate":
            from ppo_lab.analysis.aggregate import main
        case "evaluate":
            from ppo_lab.run.evaluate import main
        case "replay":
            from ppo_lab.run.replay import main
        case "plots":
            from ppo_lab.analysis.run_plots import main
        case "compare":
            from ppo_lab.analysis.compare import main
        case "zoo-table":
            from ppo_lab.analysis.zoo_report import main
        case "goodhart-report":
            from ppo_lab.experiments.goodhart.overoptimisation import main
        case "record":
            from ppo_lab.analysis.records import main
        case "reproduce":
            from ppo_lab.run.reproduce import main
        case "benchmark":
            from ppo_lab.bench.suite import main
        case "docs":
            from ppo_lab.pages.command import main
    return main(argv)


# name -> (what runs it, one line for the help)
SUBCOMMANDS = {name: (partial(_run, name), text) for name, text in {
    "train": "train: group=option and key=value overrides, -m for a sweep, --help for the keys",
    "resume": "relaunch a run (or a sweep) directory exactly as it was launched, from any folder",
    "check-env": "check an env (an option like cartpole, or a builder's dotted path) against the contract",
    "watch": "live dashboard of every run under a directory",
    "aggregate": "statistics across seeds of a sweep (aggregate.csv, curves.png)",
    "evaluate": "re-evaluate a saved run from its latest checkpoint",
    "replay": "render one episode of a trained agent to a GIF (an env that draws frames)",
    "plots": "a PNG panel of one run's training curves",
    "compare": "compare runs or benchmarks (table and comparison.png)",
    "zoo-table": "the zoo's table per env beside reference returns, between a page's markers",
    "goodhart-report": "the true objective along training per reward mode (Gao's fit, drop heights)",
    "record": "keep the small records of finished runs (config, manifest, summary, a cut metrics.csv)",
    "reproduce": "re-run a run's first updates from its config and compare metrics.csv",
    "benchmark": "the performance suite (steps/s and their ratios)",
    "docs": "re-render the docs pages' figures from the records committed beside them",
}.items()}


def usage() -> str:
    width = max(map(len, SUBCOMMANDS))
    lines = ["usage: ppo-lab <command> [options]   (ppo-lab <command> --help for its options)", "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, (_, text) in SUBCOMMANDS.items()]
    lines += ["", "In a checkout, `python launch.py` is `ppo-lab train`."]
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
    try:
        return int(command(rest) or 0)
    except RunDirFormatError as exc:  # a run dir of another format, from any command: one line (rundir/run_format.py)
        print(f"ppo-lab {name}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
