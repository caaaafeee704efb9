"""Aggregate runs and sweeps across seeds.

    ppo-lab aggregate DIR [DIR ...] [--out OUT] [--wait] [--include-stopped]

Reads every run under the DIRs (completed or not; a sweep dir, a run dir, or any folder of
them), groups runs by their overrides other than the seed, treats the vmapped seeds of a run
as separate seeds, and writes into OUT (default: the one DIR given):

- ``aggregate.csv``: per group and metric: n_seeds, mean, std, var, sem, the 95% interval of
  the mean (ci_low, ci_high; ``ci_method`` below), interquartile mean with a seeded bootstrap
  interval from 8 seeds (iqm, iqm_ci_low, iqm_ci_high). Columns: ``group``, the swept keys, ``metric``, then those statistics.
  Metrics: every ``eval/*`` and every final ``train/*`` (and ``reward/*``, ``actions/*``,
  ``perf/*``) value of summary.json, and the ``criteria/*`` computed from metrics.csv.
- ``runs.csv``: one row per (run, seed) with its status, whether it is in the statistics, why
  not, and its values.
- ``criteria.csv``: per group, the success criteria (``ppo_lab/analysis/criteria.py``: PPO's
  health and progress, and those the env declares) as columns: mean and 95% interval of each.
- ``curves.png``: mean learning curves with interval bands, per group, of the env's headline
  metric (``--curve`` names others); ``--format pdf,svg`` writes each figure in those formats
  beside its PNG. What a reader must know about a figure (a sparse metric, a panel left out, too
  few seeds) is printed beside it, never written into its title; a group of fewer than 5 seeds
  is also marked where the figure names it (its legend entry: ``n=3 < 5``).
- ``rliable.json`` and ``rliable.png``: rliable's IQM, median, mean and optimality gap with
  stratified bootstrap intervals (reps and seed recorded), across tasks on scores normalised per
  env, and performance profiles with bands (``ppo_lab/analysis/rliable_report.py``).
- ``populations.json`` (runs of ``pbt.population``): per group, the median, best and worst
  member of each population, with intervals across populations, and P(A > B) between groups,
  e.g. PBT against random search (``ppo_lab/analysis/populations.py``).

Which interval is which: ``ci_method`` says it per row: ``t`` (Student t of the mean) or
``anderson`` (Anderson's distribution-free interval, for metrics with known bounds: it holds at
any number of seeds); ``small_sample`` flags groups of fewer than 5 seeds, and the table and the
figures mark them (``ppo_lab/estimators.py``, docs/statistics.md); ``logged_frac`` is the share of updates in which a
metrics.csv column holds a value (an episode mean of an agent that rarely ends an episode is
sparse).

Runs of one env paid under different reward functions (a sweep over reward modes) are never
ranked on their returns (``ppo_lab/judging/reward_modes.py``): the table labels each group's
return ``paid reward (<mode>)``, curves.png draws one panel per mode, and rliable.json with its
P(A > B) refuses such a return and is computed on the env's headline metric instead.

and prints a table. Failed, missing, stopped and still-running seeds are listed by name and
left out of the statistics (``--include-stopped`` takes stopped ones in); they never stop the
rest from being aggregated. ``--wait`` first waits until the jobs of a sweep submitted with
``hydra.launcher.wait=false`` (its ``jobs.json``) have ended.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Sequence

from ppo_lab import rundir
from ppo_lab.analysis import sweep as sw
from ppo_lab.analysis.criteria import criteria_table
from ppo_lab.analysis.figures import parse_formats, plt
from ppo_lab.analysis.populations import DEFAULT_METRIC as POPULATION_METRIC
from ppo_lab.analysis.populations import (POPULATIONS_JSON, format_population_report, is_population_sweep,
                                          population_report)
from ppo_lab.analysis.rliable_report import (RLIABLE_FIGURE, RLIABLE_JSON, format_report, parse_score_refs, plot_report,
                                             rliable_report)
from ppo_lab.analysis.sweep_plots import plot_curves
from ppo_lab.estimators import BOOTSTRAP_MIN_RUNS, DEFAULT_REPS, DEFAULT_SEED, SMALL_SAMPLE
from ppo_lab.judging.headline import DEFAULT_HEADLINE, TRAIN_RETURN, headline_curve, headline_of
from ppo_lab.judging.reward_modes import is_paid_return, judged_by, modes_by_group, paid_label
from ppo_lab.judging.tables import interval, text_table
from ppo_lab.rundir.slurm_jobs import wait_for_jobs

log = logging.getLogger("ppo_lab.analysis.aggregate")

# The metrics the printed table shows (all of them are in aggregate.csv).
PRINT_PREFIXES = ("eval/",)
PRINT_EXTRA = (TRAIN_RETURN,)


def format_table(rows: list[dict], col: sw.Collection) -> str:
    shown = [r for r in rows if r["metric"].startswith(PRINT_PREFIXES) or r["metric"] in PRINT_EXTRA] or rows
    modes = modes_by_group(col)
    head = ["group", "metric", "n", "mean [95% CI] (method)", "IQM [95% CI] (bootstrap)", "note"]
    body = []
    for r in shown:
        metric = r["metric"]
        if modes and is_paid_return(metric):  # measured under this group's own reward function
            metric = f"{metric}: {paid_label(modes.get(r['group'], r['group']))}"
        note = [f"WARNING n<{SMALL_SAMPLE}"] if r.get("small_sample") else []
        if r.get("logged_frac") not in (None, "") and float(r["logged_frac"]) < sw.SPARSE:
            note.append(f"sparse: in {float(r['logged_frac']):.0%} of updates")
        mean = interval(r["mean"], r["ci_low"], r["ci_high"], spec=".4g", missing=" [no interval]")
        # The IQM's bootstrap interval, or why there is none (fewer than 8 seeds: estimators).
        iqm = interval(r["iqm"], r["iqm_ci_low"], r["iqm_ci_high"], spec=".4g", missing=f" [none (n<{BOOTSTRAP_MIN_RUNS})]")
        body.append([r["group"], metric, str(r["n_seeds"]), f"{mean} ({r.get('ci_method', 't')})", iqm, "; ".join(note)])
    lines = [text_table(head, "l" * len(head), body)]
    small = sorted({(r["group"], r["n_seeds"]) for r in shown if r.get("small_sample")})
    for group, n in small:
        lines.append(f"WARNING: {group}: n={n} seed(s), fewer than {SMALL_SAMPLE}: wide intervals; "
                     "run more seeds before drawing conclusions (docs/statistics.md)")
    if modes and any(is_paid_return(r["metric"]) for r in shown):
        lines.append("paid reward: each mode's return is measured under its own reward function; "
                     "not comparable across modes (compare the modes on the headline metric)")
    return "\n".join(lines)


def run_aggregate(dirs: Sequence[Path], out_dir: Path | None = None, include_stopped: bool = False,
                  ignore: Sequence[str] = (), curve_metrics: Sequence[str] | None = None,
                  confidence: float = 0.95, quiet: bool = False, plot: bool = True,
                  rliable_metric: str | None = None, score_refs: dict | None = None,
                  reps: int = DEFAULT_REPS, bootstrap_seed: int = DEFAULT_SEED, formats: tuple[str, ...] = (),
                  population_metrics: Sequence[str] = ()) -> dict:
    """Aggregate `dirs` into `out_dir`; returns {collection, rows, paths, problems, rliable,
    populations, notes} (`notes`: what the figures leave unsaid, printed beside them).
    `population_metrics`: populations.json's metric (the first) and further ones reported beside
    it (default: POPULATION_METRIC alone)."""
    dirs = [Path(d) for d in dirs]
    if out_dir is None:
        out_dir = dirs[0] if len(dirs) == 1 else Path("outputs") / "aggregates" / time.strftime("%Y-%m-%d_%H-%M-%S")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    col = sw.collect(dirs, include_stopped=include_stopped, ignore=ignore)
    rows = sw.aggregate_rows(col, confidence=confidence)
    paths = {"aggregate": out_dir / rundir.AGGREGATE, "runs": out_dir / rundir.RUNS}
    rundir.write_table(paths["aggregate"], rows, sw.aggregate_columns(col))
    crit_rows, crit_cols = criteria_table(rows, col.group_keys)
    if crit_cols:
        paths["criteria"] = out_dir / rundir.CRITERIA
        rundir.write_table(paths["criteria"], crit_rows, ["group", *col.swept_keys, "n_seeds", *crit_cols])
    units = sw.unit_rows(col)
    unit_cols = ["group", *col.swept_keys, "seed", "status", "used", "reason", "job", "job_id", "updates", "run_dir", *col.metrics]
    rundir.write_table(paths["runs"], units, unit_cols)
    # The experiment's headline metric unless told another (ppo_lab/judging/headline.py)
    try:
        headline = headline_of(run.env for run in col.runs if run.env)
    except ValueError as exc:  # runs of envs judged by different metrics: the return, said
        log.warning("%s; rliable.json and curves.png use %s (--rliable-metric, --curve name others)", exc, DEFAULT_HEADLINE)
        headline = DEFAULT_HEADLINE
    notes: dict[str, list[str]] = {}
    if plot:
        notes["curves.png"] = []
        fig = plot_curves(col, list(curve_metrics or [headline_curve(headline)]), confidence=confidence,
                          path=out_dir / "curves.png", notes=notes["curves.png"], formats=formats)
        if fig is not None:
            plt.close(fig)
            paths["curves"] = out_dir / "curves.png"
    rliable_metric, refused, _ = judged_by([u.run for u in col.units], rliable_metric or headline, instead=headline)
    report = rliable_report(col, rliable_metric, score_refs, reps=reps, seed=bootstrap_seed, confidence=confidence) \
        if rliable_metric is not None else {"configs": {}}
    if refused:
        report.setdefault("warnings", []).insert(0, refused)
        log.warning("rliable.json: %s", refused)
    if report["configs"]:
        paths["rliable"] = out_dir / RLIABLE_JSON
        rundir.write_json_atomic(paths["rliable"], report)
        if plot:
            plot_report(report, out_dir / RLIABLE_FIGURE, formats=formats)
            paths["rliable_figure"] = out_dir / RLIABLE_FIGURE
    population_metric, *also = population_metrics or [POPULATION_METRIC]
    populations = population_report(col, population_metric, reps=reps, seed=bootstrap_seed, confidence=confidence,
                                    also=tuple(also)) if is_population_sweep(col) else None
    if populations is not None:
        paths["populations"] = out_dir / POPULATIONS_JSON
        rundir.write_json_atomic(paths["populations"], populations)
    problems = sw.problem_lines(col)
    if not quiet:
        used = sum(u.used for u in col.units)
        print(f"\naggregate of {len(col.runs)} run(s), {len(col.units)} seed(s) ({used} in the statistics) "
              f"in {len(col.groups)} group(s){'; swept: ' + ', '.join(col.swept_keys) if col.swept_keys else ''}")
        print(format_table(rows, col))
        if report["configs"]:
            print("\n" + format_report(report))
        elif refused:
            print(f"\nno rliable.json: {refused}")
        for figure, lines in notes.items():
            if lines:
                print(f"\n{figure}:\n" + "\n".join("  " + line for line in lines))
        if populations is not None:
            print("\n" + format_population_report(populations))
        if problems:
            print(f"\n{len(problems)} seed(s) NOT in the statistics:")
            for line in problems:
                print("  " + line)
        print("\nwrote " + ", ".join(str(p) for p in paths.values()), flush=True)
    return {"collection": col, "rows": rows, "paths": paths, "problems": problems, "rliable": report,
            "populations": populations, "notes": notes}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dirs", nargs="+", type=Path, help="sweep dirs, run dirs, or folders of them")
    p.add_argument("--out", type=Path, default=None, help="where to write (default: the one DIR given)")
    p.add_argument("--wait", action="store_true", help="first wait for the SLURM jobs listed in jobs.json to end")
    p.add_argument("--wait-timeout", type=float, default=None, help="seconds --wait waits at most")
    p.add_argument("--include-stopped", action="store_true", help="also use runs stopped early by a signal or STOP file")
    p.add_argument("--ignore", action="append", default=[], metavar="KEY", help="an override key not to group by (repeatable)")
    p.add_argument("--curve", action="append", default=None, metavar="METRIC",
                   help="metric(s) for curves.png (default: the env's headline metric, else train/mean_episode_return)")
    p.add_argument("--format", default=None, metavar="FORMATS",
                   help="also write each figure in these formats beside its PNG, e.g. pdf,svg")
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--rliable-metric", default=None,
                   help=f"the score of rliable.json (default: the headline the env declares, else {DEFAULT_HEADLINE})")
    p.add_argument("--score", action="append", default=[], metavar="TASK=RANDOM,REFERENCE",
                   help="a task's random and reference returns for normalised scores (repeatable; "
                        "default: `scores:` of the env's YAML)")
    p.add_argument("--reps", type=int, default=DEFAULT_REPS, help="bootstrap replicates of rliable.json")
    p.add_argument("--population-metric", action="append", default=[], metavar="METRIC",
                   help=f"populations.json's metric (default {POPULATION_METRIC}); repeated: the first ranks, each "
                        "further one is reported beside it (median and selected member)")
    p.add_argument("--bootstrap-seed", type=int, default=DEFAULT_SEED, help="seed of rliable.json's bootstrap")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for d in args.dirs:
        if not d.exists():
            p.error(f"{d} does not exist")
    try:
        refs = parse_score_refs(args.score)
        formats = parse_formats(args.format)
    except ValueError as exc:
        p.error(str(exc))
    if args.wait:
        wait_for_jobs(args.dirs, timeout_s=args.wait_timeout)
    result = run_aggregate(args.dirs, args.out, include_stopped=args.include_stopped, ignore=args.ignore,
                           curve_metrics=args.curve, confidence=args.confidence, plot=not args.no_plot,
                           rliable_metric=args.rliable_metric, score_refs=refs, reps=args.reps,
                           bootstrap_seed=args.bootstrap_seed, formats=formats,
                           population_metrics=args.population_metric)
    if not result["collection"].runs:
        print(f"no runs found under {', '.join(map(str, args.dirs))}", file=sys.stderr)
        return 1
    return 0
