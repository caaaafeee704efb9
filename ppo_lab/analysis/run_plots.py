"""A PNG panel of one run's training curves (the same curves as `ppo_lab.analysis.watch`).

    ppo-lab plots RUN_DIR                 # writes RUN_DIR/curves.png
    ppo-lab plots RUN_DIR --out fig.png

One panel per metric over environment steps, one thin line per seed and the mean over seeds
in bold: return, episode length, entropy, approx KL, clip fraction, policy and value losses,
explained variance, every `true/*` counter and `reward/*` component the env logs, the
action distribution (stacked, mean over seeds), and for a run that logs what it pays and its
true objective the Goodhart curve (the two per 1k steps, mean over seeds with a 95% band;
`ppo_lab.analysis.sweep_plots.draw_goodhart`). Health thresholds from the run's config are
drawn as dashed lines (entropy, KL, clip fraction).

A population run (`pbt.population`, docs/pbt.md) also gets `pbt.png` beside it: one panel per
explored key, its value along the final best member's lineage (the schedule PBT found: the
member that trained each stretch, joined where it copied another) over every member's in thin
lines; and one panel of the population's fitness at each exploit step (each member a dot, the
median a line; under `pbt.constraints` a member that missed a bound a hollow red ring). Read
from metrics.csv (`member`, `pbt/<key>`) and pbt.jsonl.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from ppo_lab import rundir
from ppo_lab.analysis.action_columns import continuous_dimensions, discrete_shares
from ppo_lab.analysis.figures import metrics_frame, parse_formats, plt, save_figure
from ppo_lab.analysis.sweep import SPARSE
from ppo_lab.analysis.sweep_plots import PAID, TRUE, draw_goodhart
from ppo_lab.judging.headline import TRAIN_LENGTH, TRAIN_RETURN
from ppo_lab.judging.metric_names import axis_label, label
from ppo_lab.rundir.run_summary import RunSummary

PANELS = [TRAIN_RETURN, TRAIN_LENGTH, "train/entropy", "train/approx_kl",
          "train/clip_frac", "train/pg_loss", "train/vf_loss", "train/explained_variance"]
THRESHOLDS = {"train/entropy": "entropy_min", "train/approx_kl": "kl_max", "train/clip_frac": "clip_frac_max"}


def plot_run(run_dir: Path, out: Path | None = None, smooth: int = 1, formats: tuple[str, ...] = ()) -> Path:
    """Write the run's panel figure (and beside it each of `formats`); returns the PNG's path.
    Axis labels come from the metric registry (ppo_lab/judging/metric_names.py); a metric without a
    value, or with one value all along, gets no panel, and the caption under the figure says so;
    a sparse one (values in fewer than half the updates) is drawn as points."""
    run_dir = Path(run_dir)
    rundir.check_format(run_dir)
    df = metrics_frame(run_dir / rundir.METRICS)
    try:
        config = rundir.read_config(run_dir)
    except FileNotFoundError:
        config = {}
    try:
        summary = rundir.read_summary(run_dir) or RunSummary(status="?")
    except ValueError:
        summary = RunSummary(status="?")
    health = config.get("health") or {}
    columns = set(df.columns)
    panels = [m for m in PANELS if m in columns]
    panels += [c for c in sorted(columns) if c.startswith(("true/", "reward/"))]
    # A flat line is a number, not a curve (a reward component a mode leaves at 0), and a column
    # with no value has nothing to draw: said once under the figure instead of a panel each.
    empty = [m for m in panels if df[m].isna().all()]
    constant = {m: value for m in panels if m not in empty and (value := _constant_value(df[m])) is not None}
    panels = [m for m in panels if m not in constant and m not in empty]
    dims = continuous_dimensions(columns)
    actions = discrete_shares(columns, summary.action_names) if not dims else [f"actions/mean_{i}" for i in dims]
    goodhart = {PAID, TRUE} <= columns
    n = len(panels) + (1 if actions else 0) + (1 if goodhart else 0)
    ncols = min(4, max(n, 1))
    nrows = max(1, math.ceil(n / ncols))
    # Constrained layout keeps the figure title, panel titles and the note apart (tight_layout
    # ignores the suptitle, which then overlaps the first row's titles).
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.0 * nrows + 0.4), squeeze=False, layout="constrained")
    flat = axes.ravel()
    seeds = sorted(int(s) for s in df["seed"].unique())
    x = "timesteps"
    sparse = {}
    for ax, metric in zip(flat, panels):
        logged = _metric_panel(ax, df, metric, x, seeds, smooth, health)
        if logged < SPARSE:
            sparse[metric] = logged
    if actions:
        ax = flat[len(panels)]
        if dims:
            _continuous_action_panel(ax, df, x, dims)
        else:
            mean = df.groupby(x)[actions].mean()
            ax.stackplot(mean.index, [mean[a].values for a in actions], labels=[a.split("/", 1)[1] for a in actions], alpha=0.85)
            ax.set_ylim(0, 1)
            ax.set_title("action distribution", fontsize=10)
            ax.set_ylabel("share of actions", fontsize=8)
        ax.set_xlabel("env steps", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="upper right", ncol=2)
    if goodhart:
        _goodhart_panel(flat[n - 1], df, x)
    for ax in flat[n:]:
        ax.axis("off")
    if panels and len(seeds) > 1 and len(seeds) <= 8:
        flat[0].legend(fontsize=6)
    title = f"{run_dir.name}: {summary.env or (config.get('env') or {}).get('name', '')} / " \
            f"{summary.reward or (config.get('reward') or {}).get('name', '')}, seeds {seeds}, status {summary.status}"
    fig.suptitle(title, fontsize=11)
    caption = caption_lines(constant, empty, sparse)
    if caption:
        fig.supxlabel("\n".join(caption), fontsize=8)
    return save_figure(fig, out or run_dir / "curves.png", close=True, formats=formats)


def caption_lines(constant: dict, empty: list, sparse: dict) -> list[str]:
    """What the figure's caption says about the panels it leaves out or draws as points."""
    lines = []
    if constant:
        lines.append("constant over the run, not drawn: " + ", ".join(f"{m} = {v:g}" for m, v in constant.items()))
    if empty:
        lines.append("no value in any update, not drawn: " + ", ".join(empty))
    if sparse:
        lines.append("sparse, drawn as points: " + ", ".join(f"{m} ({v:.0%} of updates)" for m, v in sparse.items()))
    return lines


def _metric_panel(ax, df, metric: str, x: str, seeds: list, smooth: int, health: dict) -> float:
    """One metric's panel: a line per seed and their mean; returns the share of rows with a value."""
    # Episode means are NaN in updates where no episode ended: bridge those gaps, except for
    # a metric with values in few updates: its points are drawn as markers (a line between
    # two would hide that there are two).
    logged = float(df[metric].notna().mean())
    marker = "o" if logged < SPARSE else None
    wide = df.pivot_table(index=x, columns="seed", values=metric, aggfunc="mean", dropna=False).sort_index()
    if not marker:  # a sparse metric's points are its own, none made up between them
        wide = wide.interpolate(limit_area="inside")
    if smooth > 1:
        wide = wide.rolling(smooth, min_periods=1).mean()
    for seed in wide.columns:
        kept = wide[seed].dropna()
        ax.plot(kept.index, kept.values, lw=0.8, marker=marker, ms=2.5, alpha=0.45 if len(seeds) > 1 else 1.0,
                label=f"seed {seed}" if len(seeds) <= 8 else None)
    if len(seeds) > 1:
        mean = wide.mean(axis=1).dropna()
        ax.plot(mean.index, mean.values, lw=2.0, marker=marker, ms=3, color="black", label="mean")
    if metric in THRESHOLDS and THRESHOLDS[metric] in health:
        ax.axhline(float(health[THRESHOLDS[metric]]), ls="--", lw=1, color="red")
    ax.set_title(label(metric) + (f" (sparse: {logged:.0%} of updates)" if marker else ""), fontsize=10)
    ax.set_ylabel(axis_label(metric), fontsize=8)
    ax.set_xlabel("env steps", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    return logged


def _constant_value(column) -> float | None:
    """The one value a metric took on every logged update (NaN ignored), or None."""
    values = column.dropna()
    if values.empty or values.min() != values.max():
        return None
    return float(values.iloc[0])


def _continuous_action_panel(ax, df, x: str, dims: list[int]) -> None:
    """Each action dimension's mean (line) and std (band: mean +/- std) over the rollout,
    averaged over seeds."""
    mean = df.groupby(x)[[f"actions/{k}_{i}" for i in dims for k in ("mean", "std")]].mean()
    for i in dims:
        m, s = mean[f"actions/mean_{i}"], mean[f"actions/std_{i}"]
        line, = ax.plot(mean.index, m.values, lw=1.2, label=f"dim {i}")
        ax.fill_between(mean.index, (m - s).values, (m + s).values, color=line.get_color(), alpha=0.2, lw=0)
    ax.set_title("actions: mean +/- std per dimension", fontsize=10)


def _goodhart_panel(ax, df, x: str) -> None:
    series = {m: [(part[x].to_numpy(float), part[m].to_numpy(float)) for _, part in df.sort_values(x).groupby("seed")]
              for m in (PAID, TRUE)}
    draw_goodhart(ax, series[PAID], series[TRUE], title="Goodhart curve: paid vs true, per 1k steps")


def _lineage(pbt: dict, df) -> list[dict]:
    """The best member's lineage as the run recorded it, else the member best at the end alone."""
    if pbt.get("lineage"):
        return pbt["lineage"]
    last = df[df["update"] == df["update"].max()]
    best = int(last.sort_values(TRAIN_RETURN)["member"].iloc[-1])
    return [{"member": best, "from_update": 0, "until_update": int(df["update"].max())}]


def plot_population(run_dir: Path, out: Path | None = None, formats: tuple[str, ...] = ()) -> Path:
    """Write pbt.png for a population run (`pbt.jsonl` beside metrics.csv); returns its path."""
    run_dir = Path(run_dir)
    df = metrics_frame(run_dir / rundir.METRICS)
    steps = rundir.read_pbt_log(run_dir / rundir.PBT_LOG)
    keys = [c for c in df.columns if c.startswith("pbt/")]
    summary = rundir.read_summary(run_dir)
    pbt = (summary.pbt if summary else None) or {}
    lineage = _lineage(pbt, df)
    fig, axes = plt.subplots(1, len(keys) + 1, figsize=(5 * (len(keys) + 1), 3.6), squeeze=False)
    for ax, key in zip(axes[0], keys):
        for _, part in df.sort_values("update").groupby("member"):
            ax.plot(part["update"], part[key], lw=0.6, alpha=0.4, color="grey")
        for seg in lineage:
            part = df[(df["member"] == seg["member"]) & (df["update"] > seg["from_update"])
                      & (df["update"] <= seg["until_update"])].sort_values("update")
            ax.plot(part["update"], part[key], lw=2, label=f"member {seg['member']}")
        ax.set_yscale("log" if (df[key] > 0).all() and df[key].max() / df[key].min() > 20 else "linear")
        ax.set_title(f"{label('train/' + key[4:])}: the best member's lineage (bold)", fontsize=10)
        ax.set_xlabel("update", fontsize=8)
        ax.set_ylabel(axis_label("train/" + key[4:]), fontsize=8)
        ax.legend(fontsize=6)
    ax = axes[0][-1]
    labelled = False
    for step in steps:
        fit = np.asarray([np.nan if f is None else f for f in step["fitness"]], float)
        # Under pbt.constraints a member that missed a bound over the interval is a hollow red ring.
        met = np.asarray(step.get("feasible") or [True] * len(fit), bool)
        ax.scatter([step["update"]] * int(met.sum()), fit[met], s=6, color="grey")
        if not met.all():
            ax.scatter([step["update"]] * int((~met).sum()), fit[~met], s=14, facecolors="none", edgecolors="tab:red",
                       linewidths=0.7, label=None if labelled else "missed a bound")
            labelled = True
    if steps:
        ax.plot([s["update"] for s in steps],
                [np.nanmedian([np.nan if f is None else f for f in s["fitness"]]) for s in steps], lw=2, label="median")
        ax.legend(fontsize=6)
    ax.set_title("fitness at each exploit step", fontsize=10)
    ax.set_xlabel("update", fontsize=8)
    fitness = pbt.get("fitness_metric")
    ax.set_ylabel(f"fitness: {axis_label(fitness)}" if fitness else "fitness", fontsize=8)
    fig.suptitle(f"{run_dir.name}: population of {df['member'].nunique()}, {len(steps)} exploit steps", fontsize=11)
    return save_figure(fig, out or run_dir / "pbt.png", close=True, formats=formats)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Write a PNG panel of a run's training curves.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="PNG path (default RUN_DIR/curves.png)")
    parser.add_argument("--smooth", type=int, default=1, help="rolling mean over this many updates")
    parser.add_argument("--format", default=None, metavar="FORMATS",
                        help="also write each figure in these formats beside its PNG, e.g. pdf,svg")
    args = parser.parse_args(argv)
    try:
        formats = parse_formats(args.format)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        out = plot_run(args.run_dir, args.out, args.smooth, formats)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("wrote " + ", ".join(str(out.with_suffix(s)) for s in (".png", *(f".{f}" for f in formats))))
    if (args.run_dir / rundir.PBT_LOG).exists():  # a population run: its schedules and fitness too
        print(f"wrote {plot_population(args.run_dir, out.parent / 'pbt.png', formats)}")
    return 0
