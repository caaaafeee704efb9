"""`ppo-lab record`: keep the records of finished runs, the small files a docs page is rendered
from (`rundir.record`: config.yaml, manifest.json, summary.json, a cut metrics.csv).

    ppo-lab record DIR [DIR ...] --into docs/records/zoo [--column train/mean_episode_return] [--points 60]
                   [--name-by-dir]

DIR: run dirs, or folders of them (a sweep dir). Each record is named by its run's experiment,
the part after its last `/` (`zoo/pendulum` -> docs/records/zoo/pendulum), or by the run dir's
name where it names none beyond its env's; with --name-by-dir, by its path under the DIR it was
found in (a sweep's job `3` -> `3`; a run dir given itself, its name), for runs of one experiment
(a sweep's jobs). A record of that name already there is replaced. A run that did not
complete, a run dir of another format, and two runs that would take one name are refused
before anything is written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from ppo_lab import rundir
from ppo_lab.analysis.criteria import criteria_by_seed
from ppo_lab.judging.headline import TRAIN_RETURN

DEFAULT_POINTS = 60


def record_name(run_dir: Path) -> str:
    """The run's experiment, its part after the last `/`; the run dir's name where the run
    names no experiment beyond its env's (`experiment` defaults to `env.name`)."""
    config = rundir.read_config(run_dir)
    experiment = config.get("experiment")
    if not experiment or experiment == (config.get("env") or {}).get("name"):
        return Path(run_dir).name
    return str(experiment).rsplit("/", 1)[-1]


def planned(dirs: Sequence[Path], by_dir: bool = False) -> dict[str, Path]:
    """record name -> run dir, for every run under `dirs`; ValueError naming the first run that
    cannot be recorded (not completed, another format) or two runs of one name."""
    names: dict[str, Path] = {}
    for d in dirs:
        for run_dir in rundir.find_run_dirs(Path(d)):
            try:  # summary.json, or a benchmark run's benchmark.json
                status = rundir.read_result(run_dir)[0].status
            except FileNotFoundError:
                status = None
            if status != "completed":
                raise ValueError(f"{run_dir}: {status or 'no summary.json'}: only a completed run is recorded")
            name = (str(run_dir.relative_to(d)) if run_dir != Path(d) else Path(d).name) if by_dir else record_name(run_dir)
            if name in names:
                raise ValueError(f"{names[name]} and {run_dir} would both be recorded as {name!r}: record them apart")
            names[name] = run_dir
    if not names:
        raise ValueError(f"no run dir under {', '.join(map(str, dirs))}")
    return names


def criteria_of(run_dir: Path) -> dict[int, dict[str, float]]:
    """seed -> its criteria (`analysis/criteria.py`, its env's own included) from the whole
    metrics.csv, which the record keeps only cut."""
    config = rundir.read_config(run_dir)
    rundir.use_recorded_parts(run_dir)
    return criteria_by_seed(rundir.columns_by_seed(run_dir / rundir.METRICS), config.get("env"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=sys.argv[0], description="Keep the small records of finished runs that a "
                                     "docs page is rendered from.")
    parser.add_argument("dirs", nargs="+", type=Path, help="run dirs, or folders of them")
    parser.add_argument("--into", type=Path, required=True, help="where the records go (e.g. docs/records/zoo)")
    parser.add_argument("--column", action="append", default=None,
                        help=f"a metrics.csv column the record keeps (repeatable; default {TRAIN_RETURN})")
    parser.add_argument("--points", type=int, default=DEFAULT_POINTS, help="updates per seed kept of metrics.csv")
    parser.add_argument("--name-by-dir", action="store_true", help="name each record by its run dir's path under DIR "
                        "(a sweep's job number), not by its experiment")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        if args.points < 2:
            raise ValueError(f"--points {args.points}: give 2 or more (the first and last update at least)")
        for d in args.dirs:
            if not d.exists():
                raise ValueError(f"{d} does not exist")
        plan = planned(args.dirs, args.name_by_dir)
        columns = args.column or [TRAIN_RETURN]
        checked = {run_dir: rundir.check_recordable(run_dir, columns) for run_dir in plan.values()}  # before any is written
        for name, run_dir in plan.items():
            benchmark = checked[run_dir]
            record = rundir.write_record(run_dir, args.into / name, columns, args.points,
                                         None if benchmark else criteria_of(run_dir))
            kept = "benchmark.json" if benchmark else (f"{record['updates_per_seed']} of {record['updates_per_seed_in_run']} "
                                                        "updates per seed in metrics.csv")
            print(f"{args.into / name}: from {run_dir} ({kept})")
    except (ValueError, FileNotFoundError) as exc:
        print(f"ppo-lab record: {exc}", file=sys.stderr)
        return 2
    return 0
