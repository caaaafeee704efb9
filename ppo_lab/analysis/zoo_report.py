"""The zoo's results page: a table per preset beside the reference returns, each changed preset
beside gymnax-blines' config, rliable's aggregates across envs, and the learning curves.

    ppo-lab zoo-table DIR [DIR ...] --out docs/results-zoo.md [--figure docs/results-zoo.png]
                      [--parity docs/zoo_parity_*.json]

Reads every run under the DIRs (the records of docs/records/zoo/, `ppo-lab record`; or run and
sweep dirs of `sweeps/zoo.yaml`) and writes the generated block between the markers
`<!-- zoo-table:start -->` and `<!-- zoo-table:end -->` of OUT; what the page holds outside
them stays as it is (a page without the markers gets them at its end, a missing page is made).
The numbers are `ppo_lab/analysis/zoo_table.py`'s. The figure: one panel per env, the training
return (`train/mean_episode_return`) against env steps per seed of each of its presets, the
mean across seeds with a 95% band (the interval of the mean the table gives,
`estimators.mean_interval`), fewer than 5 seeds marked in its title. The block ends with the
commands that produced it: each sweep's own command (from its multirun.yaml) and this one.
With --parity, the table beside PureJaxRL is rendered from `python -m ppo_lab.bench.zoo_parity`
records between the markers `<!-- zoo-parity:start -->` and `<!-- zoo-parity:end -->`.
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
from pathlib import Path
from typing import Sequence

from ppo_lab import rundir
from ppo_lab.analysis import page_blocks
from ppo_lab.analysis import sweep as sw
from ppo_lab.analysis import zoo_table as zt
from ppo_lab.analysis.figures import plt, save_figure
from ppo_lab.analysis.rliable_report import estimate_text, task_of
from ppo_lab.estimators import (BOOTSTRAP_MIN_RUNS, SMALL_SAMPLE, difference_interval, metric_range,
                                small_sample_warning, welch_t_test)
from ppo_lab.judging.headline import RETURN, TRAIN_RETURN, declared_bounds
from ppo_lab.judging.tables import formatted, interval, table

BLOCK, PARITY_BLOCK = "zoo-table", "zoo-parity"
START, END = page_blocks.markers(BLOCK)
PARITY_START, PARITY_END = page_blocks.markers(PARITY_BLOCK)
# The cases of a `python -m ppo_lab.bench.zoo_parity` record, in the parity table's columns.
PARITY_CASES = ("purejaxrl", "lab", "lab_at_peer_network")
COLUMNS = ("env", "preset", "protocol", "seeds", "steps per seed (reference's)", "sampled: mean [95% CI]",
           "sampled: IQM [95% CI]", "greedy: mean [95% CI]", "reference (source)", "reached? sampled / greedy",
           "wall time")
HARDWARE = "hardware"
# Steps per seed within this share of the reference's are its budget: the lab rounds a budget
# down to whole batches (CartPole: 149,760 of 150,000).
SAME_BUDGET = 0.01


def _interval(point: float, low: float, high: float) -> str:
    return interval(point, low, high, spec=".4g")


def _steps(value: int) -> str:
    return f"{value / 1e6:.3g}M" if value >= 1e6 else f"{value:,}"


def _budget(row: zt.ZooRow) -> str:
    """The steps per seed against the reference's: `5M (10M: fewer)`, `150,000 (as theirs)`."""
    ours = ", ".join(map(_steps, row.steps_per_seed)) or "-"
    theirs = row.ref.steps if row.ref else None
    if theirs is None or not row.steps_per_seed:
        return ours
    if all(abs(steps - theirs) <= SAME_BUDGET * theirs for steps in row.steps_per_seed):
        return f"{ours} (the same)"
    word = "fewer" if min(row.steps_per_seed) < theirs else "more"
    return f"{ours} ({_steps(theirs)}: {word})"


def _seed_text(seeds: Sequence[int]) -> str:
    """`100-107`, or the seeds listed where they are not one run of consecutive numbers."""
    s = sorted(seeds)
    if not s:
        return "-"
    return f"{s[0]}-{s[-1]}" if len(s) > 1 and s == list(range(s[0], s[-1] + 1)) else ", ".join(map(str, s))


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds else "-"


def _verdict(row: zt.ZooRow) -> str:
    words = {True: "yes", False: "no", None: "-"}
    return f"{words[row.reached('sampled')]} / {words[row.reached('greedy')]}"


def one_hardware(rows: Sequence[zt.ZooRow]) -> str | None:
    """The hardware every row trained on, where it is one; None where rows differ."""
    kinds = {h for r in rows for h in r.hardware}
    return next(iter(kinds)) if len(kinds) == 1 else None


def results_table(rows: Sequence[zt.ZooRow]) -> str:
    columns = COLUMNS + (() if one_hardware(rows) else (HARDWARE,))
    body = []
    for r in rows:
        sampled, greedy = r.stats["sampled"], r.stats["greedy"]
        seeds = _seed_text(r.seeds) + (f"; tuned on {r.tuned_on}" if r.tuned_on else "")
        reference = "-" if r.ref is None else f"{formatted(r.ref.reference, '.4g', 'nan')} ({r.ref.source})"
        cells = [r.task, r.name if r.name != r.task else "-", r.protocol or "-", seeds, _budget(r),
                 _interval(sampled["mean"], sampled["ci_low"], sampled["ci_high"]),
                 _interval(sampled["iqm"], sampled["iqm_ci_low"], sampled["iqm_ci_high"]),
                 _interval(greedy["mean"], greedy["ci_low"], greedy["ci_high"]), reference, _verdict(r),
                 _minutes(r.wall_s)]
        if len(columns) > len(COLUMNS):
            cells.append("; ".join(r.hardware) or "-")
        body.append(cells)
    return table(columns, "l" * len(columns), body)


def headline_lines(rows: Sequence[zt.ZooRow]) -> list[str]:
    """How many envs reach their reference by the mean, in each play, over the presets."""
    compared = [r for r in zt.compared_rows(rows) if r.reached() is not None]
    if not compared:
        return []
    counts = {play: sum(bool(r.reached(play)) for r in compared) for play in zt.PLAYS}
    return [f"Reached by the mean, over the {len(compared)} envs' presets: {counts['sampled']} of {len(compared)} "
            f"sampled (the reference's protocol), {counts['greedy']} of {len(compared)} greedy."]


def missing_translations(rows: Sequence[zt.ZooRow]) -> list[str]:
    """The straight translations a preset names that have no row (not measured)."""
    names = {r.name for r in rows}
    return [f"{r.straight_translation} (gymnax-blines' config beside {r.name}): not measured, no record"
            for r in rows if r.straight_translation and r.straight_translation not in names]


def comparison_table(rows: Sequence[zt.ZooRow]) -> str | None:
    """Each changed preset against the straight translation beside it, sampled play: the
    difference of means with Welch's interval and p."""
    by_name = {r.name: r for r in rows}
    pairs = [(r, by_name[r.straight_translation]) for r in rows if r.straight_translation in by_name]
    if not pairs:
        return None
    body = []
    for preset, blines in pairs:
        a, b = preset.returns["sampled"], blines.returns["sampled"]
        low, high, _ = difference_interval(a, b)
        diff = preset.stats["sampled"]["mean"] - blines.stats["sampled"]["mean"]
        _, p = welch_t_test(a, b)
        body.append([preset.task, _interval(diff, low, high), formatted(p, ".4g", "nan"), f"{len(a)} + {len(b)}"])
    return table(["env", "preset - straight translation, sampled: difference of means [95% CI]", "Welch's p", "seeds"],
                 "llll", body)


def aggregate_lines(rows: Sequence[zt.ZooRow]) -> list[str]:
    """rliable's IQM and optimality gap across envs in both plays, with every env and without
    those whose reference says nothing (`zoo_table.left_out`)."""
    compared = zt.compared_rows(rows)
    leave = zt.left_out(compared)
    runs = {(play, bool(out)): zt.normalised_aggregates(rows, play, tuple(leave) if out else ())
            for out in (False, True) for play in zt.PLAYS}
    every = runs[("sampled", False)]
    if not every["tasks"]:
        return ["No env has a reference return (`scores:` in its env YAML): no aggregate across envs."]
    body = [[f"{len(agg['tasks'])}" + (" (without those below)" if out else ""), play,
             estimate_text(agg["aggregates"]["iqm"]), estimate_text(agg["aggregates"]["optimality_gap"])]
            for out in (False, True) for play in zt.PLAYS if (agg := runs[(play, out)])["tasks"]]
    lines = [table(["envs", "play", "IQM [95% CI]", "optimality gap [95% CI]"], "llll", body),
             "", f"Scores normalised as (return - random) / (reference - random) (the env YAML's `scores:`), one "
              "preset per env (not the straight translations); rliable's estimators, "
              f"{int(every['confidence'] * 100)}% stratified bootstrap intervals at the expanded percentiles, none below "
              f"{BOOTSTRAP_MIN_RUNS} seeds per env, {every['reps']} replicates from seed {every['seed']}; "
              f"{every['runs_per_task']} seeds per env. The envs: {', '.join(every['tasks'])}."]
    if leave:
        lines.append("Left out of the rows without them: " + "; ".join(f"{task}: {why}" for task, why in leave.items()) + ".")
    if every["unscored"]:
        lines.append(f"Not in the aggregate (no reference return or no used seed): {', '.join(every['unscored'])}.")
    return lines


def block(rows: Sequence[zt.ZooRow], commands: Sequence[str], figure: str | None, more_notes: Sequence[str] = ()) -> str:
    """The generated part of the page, markers included."""
    hardware = one_hardware(rows)
    lines = [START, "", "Generated by `ppo-lab zoo-table`; edit outside the markers. Per seed, the final evaluation's "
             "return in two plays from the same starts: actions sampled from the policy "
             f"(`{RETURN}_sampled`, gymnax-blines' protocol: the verdict's) and greedy (`{RETURN}_greedy`). "
             "Reached: the mean at or above the reference. Wall time: training, compilation and evaluation of all "
             "of a preset's seeds" + (f", on {hardware}." if hardware else "."), ""]
    lines += [results_table(rows), "", *headline_lines(rows)]
    if comparison := comparison_table(rows):
        lines += ["", "Each changed preset beside gymnax-blines' config as the lab runs it:", "", comparison]
    lines += ["", "Across envs:", "", *aggregate_lines(rows)]
    notes = missing_translations(rows)
    notes += [f"{r.name}: {w}" for r in rows if (w := small_sample_warning(len(r.seeds)))]
    notes += [f"{r.name}: not used: {', '.join(r.not_used)}" for r in rows if r.not_used]
    notes += list(more_notes)
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    if figure:
        lines += ["", f"![Training return against env steps per seed, per env and preset: mean across seeds, 95% band]"
                      f"({figure})"]
    lines += ["", "Made by:", "```bash", *commands, "```", "", END]
    return "\n".join(lines) + "\n"


def parity_block(records: Sequence[Path], command: str) -> str:
    """The side by side with PureJaxRL from `python -m ppo_lab.bench.zoo_parity` records: per
    env, each case's mean over seeds of its score with the record's 95% interval, and where it ran."""
    body, notes = [], []
    for path in records:
        record = rundir.read_json(path)
        cases = {c["label"]: c for c in record["cases"]}
        settings = record["settings"]
        env = (settings.get("purejaxrl") or {}).get("ENV_NAME") or settings["experiment"]
        steps = _steps(next(iter(cases.values()))["timesteps"])
        cells = [_interval(cases[c]["mean"], cases[c]["ci_low"], cases[c]["ci_high"]) if c in cases else "(the same network)"
                 for c in PARITY_CASES]
        where = "CPU" if record.get("backend") == "cpu" else record.get("device") or "-"
        body.append([f"{env} ({steps})", *cells, where, f"`{path.name}`"])
        if record.get("note"):
            notes.append(f"`{path.name}`: {record['note']}")
    lines = [PARITY_START, "", "Generated by `ppo-lab zoo-table` from its `--parity` records; edit outside the markers.", "",
             table(["env (steps per seed)", "PureJaxRL", "lab, preset", "lab at PureJaxRL's network", "where", "record"],
                   "l" * 6, body),
             "", *[f"- {n}" for n in notes], "", "Made by:", "```bash", command, "```", "", PARITY_END]
    return "\n".join(lines) + "\n"


def splice(page: str, generated: str, name: str = BLOCK) -> str:
    """`page` with its block `name` replaced by `generated` (markers included); a page without
    the block gets it at its end."""
    if page_blocks.current(page, name) is not None:
        return page_blocks.splice(page, name, generated)
    return page + ("\n" if page and not page.endswith("\n") else "") + generated


def plot_learning_curves(col: sw.Collection, rows: Sequence[zt.ZooRow], curves: dict, path: Path,
                         confidence: float = 0.95):
    """One panel per env: per preset (`curves`: task -> preset -> series), the mean across seeds
    of the training return with the band of the interval of the mean (within the env's declared
    `metrics.bounds`), and the env's reference return (dashed) where it has one; returns the
    figure's path, or None when no env has a curve (nothing is written then)."""
    tasks = [t for t, presets in curves.items() if any(presets.values())]
    if not tasks:
        return None
    bounds = {task_of(run.env): declared_bounds(run.env) for run in col.runs if run.env}
    references = {r.task: r.ref.reference for r in rows if r.ref}
    cols = min(4, len(tasks))
    nrows = math.ceil(len(tasks) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.0 * cols, 3.0 * nrows), squeeze=False)
    for ax, task in zip(axes.flat, tasks):
        fewest = min(len(series) for series in curves[task].values())
        for name, series in curves[task].items():
            x, mean, low, high, _ = sw.mean_curve(series, confidence, *metric_range(TRAIN_RETURN, bounds.get(task, {})))
            line, = ax.plot(x, mean, lw=1.5, label=name)
            ax.fill_between(x, low, high, alpha=0.25, lw=0, color=line.get_color())
        if references.get(task) is not None:
            ax.axhline(references[task], color="0.4", ls="--", lw=1, label="reference")
        ax.legend(fontsize=6, loc="best")
        ax.set_title(f"{task} ({fewest} seeds{f' < {SMALL_SAMPLE}' if fewest < SMALL_SAMPLE else ''})", fontsize=9)
        ax.set_xlabel("env steps per seed", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(tasks):]:
        ax.set_visible(False)
    axes[0][0].set_ylabel("training return", fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path, close=True)


def draw_figure(dirs: Sequence[Path], figure: Path, include_stopped: bool = False):
    """The learning curves of the runs under `dirs` into `figure` (the path, or None where no
    env has a curve: nothing is written then)."""
    col = sw.collect(dirs, include_stopped=include_stopped)
    rows = zt.zoo_rows(col)
    return plot_learning_curves(col, rows, zt.learning_curves(col, rows), figure)


def table_block(dirs: Sequence[Path], out: Path, figure: Path | None, command: str, include_stopped: bool = False,
                draw: bool = True) -> str:
    """The zoo-table block (markers included) of the runs under `dirs`, for the page `out`, its
    figure linked at `figure` (drawn there with `draw`; `ppo-lab docs` draws it on its own)."""
    col = sw.collect(dirs, include_stopped=include_stopped)
    rows = zt.zoo_rows(col)
    link, notes = None, zt.jobs_without_env(col)
    if figure is not None:
        curves = zt.learning_curves(col, rows)
        notes += [f"{r.name}: no curve in the figure: no training episode ended" for r in rows
                  if r.seeds and r.name not in curves.get(r.task, {})]
        if any(any(presets.values()) for presets in curves.values()):
            link = os.path.relpath(figure, out.parent)
            if draw:
                plot_learning_curves(col, rows, curves, figure)
    roots = [root for d in dirs for root in rundir.find_sweep_roots(Path(d))]
    commands = [c for c in dict.fromkeys(sweep_command(r) for r in roots) if c] + [command]
    return block(rows, commands, link, notes)


def render(dirs: Sequence[Path], out: Path, figure: Path | None, command: str, include_stopped: bool = False,
           parity: Sequence[Path] = ()) -> str:
    """Read the runs, write the block into `out` (and the parity block from the `parity`
    records) and the figure; returns the blocks."""
    generated = table_block(dirs, out, figure, command, include_stopped)
    page = splice(out.read_text() if out.exists() else "", generated)
    if parity:
        side = parity_block(parity, command)
        page = splice(page, side, PARITY_BLOCK)
        generated += "\n" + side
    rundir.write_text_atomic(out, page)  # its folder made
    return generated


def sweep_command(sweep_dir: Path) -> str | None:
    """The command that launched a sweep dir, from its multirun.yaml (its config name and the
    command line's overrides, Hydra's own such as `hydra/launcher=slurm` first), or None for a
    dir that is not a sweep."""
    multirun = rundir.read_multirun(sweep_dir)
    if multirun is None:
        return None
    name = multirun.hydra.job.get("config_name") or "config"
    given = multirun.hydra.overrides
    overrides = [str(o) for o in [*(given.get("hydra") or []), *(given.get("task") or [])] if str(o) != "hydra.mode=MULTIRUN"]
    head = ["python", "launch.py"] + (["-m"] if name == "config" else ["-cd", "sweeps", "-cn", name])
    return shlex.join(head + overrides)


def command_line(dirs: Sequence[Path], out: Path, figure: Path | None, include_stopped: bool = False,
                 parity: Sequence[Path] = ()) -> str:
    """The `ppo-lab zoo-table` command that renders `out` from `dirs`, as the block names it."""
    return shlex.join(["ppo-lab", "zoo-table", *map(str, dirs), "--out", str(out)]
                      + (["--figure", str(figure)] if figure else []) + (["--include-stopped"] if include_stopped else [])
                      + (["--parity", *map(str, parity)] if parity else []))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=sys.argv[0], description="The zoo's results table between markers of a page, "
                                     "and its learning-curve figure.")
    parser.add_argument("dirs", nargs="+", type=Path, help="record, run or sweep dirs (e.g. docs/records/zoo)")
    parser.add_argument("--out", type=Path, required=True, help="the page (e.g. docs/results-zoo.md)")
    parser.add_argument("--figure", type=Path, default=None, help="the learning curves' PNG (e.g. docs/results-zoo.png)")
    parser.add_argument("--include-stopped", action="store_true", help="count seeds of stopped runs too")
    parser.add_argument("--parity", type=Path, nargs="+", default=[], help="python -m ppo_lab.bench.zoo_parity records "
                        "(docs/zoo_parity_*.json) for the table beside PureJaxRL, between its own markers")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    command = command_line(args.dirs, args.out, args.figure, args.include_stopped, args.parity)
    try:
        for d in [*args.dirs, *args.parity]:
            if not d.exists():
                raise ValueError(f"{d} does not exist")
        generated = render(args.dirs, args.out, args.figure, command, args.include_stopped, args.parity)
    except ValueError as exc:
        print(f"ppo-lab zoo-table: {exc}", file=sys.stderr)
        return 2
    print(generated)
    print(f"written: {args.out}" + (f", {args.figure}" if args.figure else ""))
    return 0
