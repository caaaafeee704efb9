"""pbt.png: a population run's hyperparameter schedules and fitness (`ppo-lab plots RUN_DIR`).

One panel per explored key: its value along the final best member's lineage (the schedule PBT
found: the member that trained each stretch, joined where it copied another), over every
member's in thin lines; and one panel of the population's fitness at each exploit step (each
member a dot, the median a line; under `pbt.constraints` a member that missed a bound a hollow
red ring). Read from metrics.csv (`member`, `pbt/<key>`) and pbt.jsonl.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ppo_lab import rundir
from ppo_lab.analysis.figures import metrics_frame, plt, save_figure
from ppo_lab.judging.headline import TRAIN_RETURN
from ppo_lab.judging.metric_names import axis_label, label


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
