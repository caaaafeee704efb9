"""The Goodhart experiment's overoptimisation report: per reward mode, across seeds, the true
objective along training against the policy's distance from its start and against steps,
from the runs' evaluations along training (evals.csv; the Goodhart presets turn them on).

    ppo-lab goodhart-report DIR [DIR ...] [--out FOLDER] [--format pdf,svg]

DIR: sweep dirs, run dirs or records (docs/records/...), pooled; each run is put under its
reward mode (summary.json's `reward`, else its `reward=` override), the unit being the (run, seed). Writes into --out
(default: the first DIR) overoptimisation.md (the tables), overoptimisation_seeds.csv (one row
per run and seed) and overoptimisation.png (gold against d per mode, seeds as thin lines, the
mean bold; below, against env steps with the paid return).

What is read, per evaluation: the true objective J = `eval/energy_per_1k` (energy per 1k agent
steps of the survival protocol, sampled play: the same formula under every mode), what the mode
pays for the same play `eval/paid_per_1k`, and d = `eval/distance` = sqrt(KL(pi || pi_initial)).
Per seed (ppo_lab/analysis/overoptimisation.py): Gao et al.'s RL form fitted to J - J(0)
against d; the measured peak; the Normalised Drop Height over the range of J across every
policy the report reads (so that modes compare on one scale) and whether the drop exceeds the
evaluations' noise; the plateau rule on the paid return. Per mode: means with their 95%
intervals across seeds (`estimators.mean_summary`). Each mode's drop heights against
ground_truth's: Welch's t, or the permutation test where a group has no spread (Welch's t
cannot take it), with the n of each.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ppo_lab import rundir
from ppo_lab.analysis.overoptimisation import Drop, GaoFit, Stop, drop_height, gao_fit, gao_gain, plateau_stop
from ppo_lab.analysis.sweep import collect
from ppo_lab.estimators import bonferroni, finite, mean_summary, permutation_test, welch_t_test
from ppo_lab.experiments.goodhart.report import format_cell, in_report_order, mode_of_group
from ppo_lab.judging.tables import formatted, table

TRUE, PAID, DISTANCE = "eval/energy_per_1k", "eval/paid_per_1k", "eval/distance"
REFERENCE_MODE = "ground_truth"
NDH_BOUNDS = {"ndh": (0.0, 1.0)}  # its interval: Anderson's (a drop height lies in [0, 1])


@dataclass
class SeedPath:
    """One (run, seed)'s evaluations along training, in update order, and what is read off them."""
    mode: str
    run: Path
    seed: int
    updates: np.ndarray
    timesteps: np.ndarray
    d: np.ndarray
    true: np.ndarray
    paid: np.ndarray
    fit: GaoFit | None = None
    drop: Drop | None = None
    stop: Stop | None = None

    def analyse(self, scale: float) -> None:
        self.fit = gao_fit(self.d, self.true - self.true[0])
        self.drop = drop_height(self.true, scale)
        self.stop = plateau_stop(self.paid)


def load_paths(dirs: Sequence[Path]) -> tuple[list[SeedPath], list[str]]:
    """Every used (run, seed) under `dirs` with evaluations along training, analysed; and a
    line for each run that has none (evaluation along training was off)."""
    col = collect([Path(d) for d in dirs])
    group_modes = mode_of_group(col)  # for runs whose summary names no mode
    paths, skipped = [], []
    for run in {u.run.path: u.run for u in col.units if u.used}.values():
        by_seed = rundir.columns_by_seed(run.path / rundir.EVALS)
        if not by_seed:
            skipped.append(f"{run.path}: no {rundir.EVALS} (eval.every_updates was off)")
            continue
        units = [u for u in col.units if u.run is run and u.used and u.seed in by_seed]
        if not units:
            continue
        mode = (run.summary.reward if run.summary else None) or group_modes[units[0].group]
        for u in units:
            cols = by_seed[u.seed]
            missing = [c for c in (TRUE, PAID, DISTANCE) if c not in cols]
            if missing:
                skipped.append(f"{run.path} seed {u.seed}: {rundir.EVALS} has no {', '.join(missing)}")
                continue
            paths.append(SeedPath(mode, run.path, u.seed, cols["update"].astype(int), cols["timesteps"], cols[DISTANCE],
                                  cols[TRUE], cols[PAID]))
    if paths:
        values = np.concatenate([p.true for p in paths])
        scale = float(np.nanmax(values) - np.nanmin(values))
        for p in paths:
            p.analyse(scale)
    return paths, skipped


def by_mode(paths: list[SeedPath]) -> dict[str, list[SeedPath]]:
    return {mode: [p for p in paths if p.mode == mode] for mode in in_report_order(p.mode for p in paths)}


# ----------------------------------------------------------------------------- per mode
def _ci(values, metric: str, bounds: dict | None = None) -> str:
    s = mean_summary(list(values), metric, bounds=bounds or {})
    return format_cell(s["mean"], s["ci_low"], s["ci_high"])


def _median(values) -> float:
    x, _ = finite(values)
    return float(np.median(x)) if x.size else math.nan


def _num(x: float) -> str:
    return formatted(x, ".3g")


def fit_table(paths: list[SeedPath]) -> str:
    """Per mode: Gao's alpha, beta (mean [95% CI] across seeds), the fit's residual, and where
    the fitted form peaks: d* and J there (median over the seeds whose fit peaks inside the
    distances measured)."""
    rows = []
    for mode, group in by_mode(paths).items():
        peaking = [p for p in group if p.fit.peaks_within]
        rows.append([mode, str(len(group)), _ci([p.fit.alpha for p in group], "alpha"), _ci([p.fit.beta for p in group], "beta"),
                     _num(_median([p.fit.rmse for p in group])), _num(_median([p.fit.r2 for p in group])),
                     f"{len(peaking)} of {len(group)}", _num(_median([p.fit.d_peak for p in peaking])),
                     _num(_median([p.true[0] + p.fit.gain_peak for p in peaking]))])
    return _table(["mode", "seeds", "alpha", "beta", "RMSE (median)", "R^2 (median)", "fit peaks within measured d",
                   "d* (median)", "J at d* (median)"], rows)


def drop_table(paths: list[SeedPath]) -> str:
    """Per mode: J at the start, its measured peak (and the d and update there), at the end,
    the drop and the Normalised Drop Height (mean [95% CI]), and the seeds that fall beyond noise."""
    rows = [[mode, str(len(group)), _ci([p.true[0] for p in group], TRUE), _ci([p.drop.peak for p in group], TRUE),
             _num(_median([p.d[p.drop.peak_index] for p in group])),
             _num(_median([p.updates[p.drop.peak_index] for p in group])), _ci([p.drop.final for p in group], TRUE),
             _ci([p.drop.drop for p in group], "drop"), _ci([p.drop.ndh for p in group], "ndh", NDH_BOUNDS),
             f"{sum(p.drop.falls for p in group)} of {len(group)}"] for mode, group in by_mode(paths).items()]
    return _table(["mode", "seeds", "J at update 0", "J at its peak", "d at the peak (median)", "update at the peak (median)",
                   "J at the end", "drop", "NDH", "falls beyond noise"], rows)


def stop_table(paths: list[SeedPath]) -> str:
    """Per mode: where the plateau rule on the paid return stops (median update and d of the
    policy it keeps), J there and at the end, and J lost by not stopping there (mean [95% CI];
    negative: training on gained)."""
    rows = []
    for mode, group in by_mode(paths).items():
        kept = [p.stop.kept for p in group]
        rows.append([mode, str(len(group)), f"{sum(p.stop.triggered for p in group)} of {len(group)}",
                     _num(_median([p.updates[k] for p, k in zip(group, kept)])),
                     _num(_median([p.d[k] for p, k in zip(group, kept)])),
                     _ci([p.true[k] for p, k in zip(group, kept)], TRUE), _ci([p.true[-1] for p in group], TRUE),
                     _ci([p.true[k] - p.true[-1] for p, k in zip(group, kept)], "lost")])
    return _table(["mode", "seeds", "rule stopped before the end", "update kept (median)", "d kept (median)", "J kept",
                   "J at the end", "J lost by not stopping"], rows)


POOR_FIT = 0.5  # a median R^2 below this: the form does not describe the mode's paths


def shape_lines(paths: list[SeedPath]) -> list[str]:
    """Per mode, one line on the shape of its paths before any fit is read: whether J peaks and
    falls (beyond the evaluations' noise) or never peaks, whether Gao's form peaks within the
    distances measured, and whether the form fits at all. A mode whose J never falls is said to
    rise, so that its alpha and beta are not read as an overoptimisation curve."""
    lines = []
    for mode, group in by_mode(paths).items():
        n = len(group)
        falls = sum(p.drop.falls for p in group)
        peaking = sum(p.fit.peaks_within for p in group)
        r2 = _median([p.fit.r2 for p in group])
        if falls == 0:
            shape = (f"J never falls after its peak beyond the evaluations' noise (0 of {n} seeds): no overoptimisation "
                     f"peak; Gao's form peaks within the measured d in {peaking} of {n}, and its alpha, beta describe "
                     "a rise, not a peak")
        else:
            shape = (f"J peaks and then falls beyond the evaluations' noise in {falls} of {n} seeds (median d at the "
                     f"peak {_num(_median([p.d[p.drop.peak_index] for p in group if p.drop.falls]))}); Gao's form "
                     f"peaks within the measured d in {peaking} of {n}")
        fit = (f"the form fits poorly (median R^2 {_num(r2)}): its alpha, beta and d* do not describe these paths"
               if not r2 >= POOR_FIT else f"median R^2 {_num(r2)}")
        lines.append(f"- {mode}: {shape}; {fit}.")
    return lines


def drop_tests(paths: list[SeedPath], reference: str = REFERENCE_MODE) -> list[dict]:
    """Each mode's Normalised Drop Heights against `reference`'s: Welch's t where both groups
    have spread, else the permutation test; p, and p Bonferroni-corrected over the modes
    compared; the n of each group."""
    groups = by_mode(paths)
    if reference not in groups:
        return []
    ref = [p.drop.ndh for p in groups[reference]]
    rows = []
    for mode, group in groups.items():
        if mode == reference:
            continue
        ndh = [p.drop.ndh for p in group]
        spread = np.std(ndh) > 0 and np.std(ref) > 0
        if spread:
            t, p = welch_t_test(ndh, ref)
            test = f"Welch t = {t:.2f}"
        else:
            p, test = permutation_test(ndh, ref), "permutation"
        rows.append({"mode": mode, "ndh": float(np.mean(ndh)), "reference_ndh": float(np.mean(ref)), "test": test, "p": p,
                     "n": f"{len(ndh)} + {len(ref)}"})
    for row, adjusted in zip(rows, bonferroni([r["p"] for r in rows])):
        row["p_bonferroni"] = float(adjusted)
    return rows


# ----------------------------------------------------------------------------- output
def _table(header: list[str], rows: list[list[str]]) -> str:
    return table(header, "l" * len(header), rows)  # every column left-aligned


def _p(p: float) -> str:
    return "-" if math.isnan(p) else f"{p:.2g}" if p < 0.001 else f"{p:.3f}"


def markdown(paths: list[SeedPath]) -> str:
    """The report's four tables (fit, peak and drop, early stopping, drop heights against
    ground_truth), after a line per mode on the shape of its paths."""
    tests = _table(["mode", "NDH (mean)", f"{REFERENCE_MODE} NDH (mean)", "test", "p", "p (Bonferroni)", "n"],
                   [[r["mode"], _num(r["ndh"]), _num(r["reference_ndh"]), r["test"], _p(r["p"]), _p(r["p_bonferroni"]),
                     r["n"]] for r in drop_tests(paths)])
    return "\n\n".join(["\n".join(shape_lines(paths)), fit_table(paths), drop_table(paths), stop_table(paths), tests]) + "\n"


def seed_rows(paths: list[SeedPath]) -> list[dict]:
    return [{"mode": p.mode, "run": str(p.run), "seed": p.seed, "evaluations": len(p.updates), "alpha": p.fit.alpha,
             "beta": p.fit.beta, "rmse": p.fit.rmse, "r2": p.fit.r2, "d_peak": p.fit.d_peak,
             "true_at_d_peak": p.true[0] + p.fit.gain_peak, "true_start": p.true[0], "true_peak": p.drop.peak,
             "d_at_peak": p.d[p.drop.peak_index], "update_at_peak": int(p.updates[p.drop.peak_index]),
             "true_final": p.drop.final, "drop": p.drop.drop, "ndh": p.drop.ndh, "noise": p.drop.noise,
             "falls": p.drop.falls, "stop_triggered": p.stop.triggered, "update_kept": int(p.updates[p.stop.kept]),
             "d_kept": p.d[p.stop.kept], "true_kept": p.true[p.stop.kept]} for p in paths]


def _mean_path(group: list[SeedPath], x: str, y: str) -> tuple[np.ndarray, np.ndarray]:
    """The mean over seeds of `x` and `y` at each update every seed evaluated."""
    shared = sorted(set.intersection(*(set(p.updates.tolist()) for p in group)))
    pick = lambda p, name: np.array([getattr(p, name)[list(p.updates).index(u)] for u in shared])  # noqa: E731
    return np.mean([pick(p, x) for p in group], axis=0), np.mean([pick(p, y) for p in group], axis=0)


def plot(paths: list[SeedPath], path: Path | None = None, formats: tuple[str, ...] = ()):
    """Per mode, a column: J against d (seeds thin, the mean bold, Gao's form at the seeds' mean
    alpha and beta dotted), and J and the paid return against env steps per seed."""
    from ppo_lab.analysis.figures import finish, plt

    groups = by_mode(paths)
    cols = max(len(groups), 1)
    fig, axes = plt.subplots(2, cols, figsize=(3.3 * cols, 6.0), squeeze=False, sharey="row")
    for column, (mode, group) in enumerate(groups.items()):
        top, bottom = axes[0][column], axes[1][column]
        for p in group:
            top.plot(p.d, p.true, color="tab:blue", lw=0.6, alpha=0.45)
            bottom.plot(p.timesteps, p.true, color="tab:blue", lw=0.6, alpha=0.45)
        d, true = _mean_path(group, "d", "true")
        top.plot(d, true, color="tab:blue", lw=2.4, label=f"mean of {len(group)} seeds")
        alpha, beta = np.mean([p.fit.alpha for p in group]), np.mean([p.fit.beta for p in group])
        if np.isfinite(alpha) and np.isfinite(beta):
            grid = np.linspace(0, max(p.d.max() for p in group), 100)
            top.plot(grid, np.mean([p.true[0] for p in group]) + gao_gain(alpha, beta, grid), color="k", lw=1.0, ls=":",
                     label="d (alpha - beta log d), mean fit")
        steps, true = _mean_path(group, "timesteps", "true")
        _, paid = _mean_path(group, "timesteps", "paid")
        bottom.plot(steps, true, color="tab:blue", lw=2.4, label="true objective (energy)")
        bottom.plot(steps, paid, color="tab:orange", lw=1.6, ls="--", label="paid by the mode")
        top.set_title(mode, fontsize=10)
        top.set_xlabel("d = sqrt(KL(pi || pi_initial))", fontsize=8)
        bottom.set_xlabel("env steps per seed", fontsize=8)
        for ax in (top, bottom):
            ax.axhline(0.0, color="k", lw=0.5)
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=7)
        if column == 0:
            top.set_ylabel("true objective per 1k steps", fontsize=8)
            bottom.set_ylabel("per 1k agent steps", fontsize=8)
            top.legend(fontsize=6, loc="best")
            bottom.legend(fontsize=6, loc="best")
    fig.suptitle("True objective along training, against the distance from the initial policy and against steps",
                 fontsize=10)
    return finish(fig, path, formats=formats)


def write_report(paths: list[SeedPath], out: Path, formats: tuple[str, ...] = ()) -> list[Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rundir.write_text_atomic(out / "overoptimisation.md", markdown(paths))
    rows = seed_rows(paths)
    rundir.write_table(out / "overoptimisation_seeds.csv", rows, list(rows[0]) if rows else [])  # the columns in seed_rows' order
    from ppo_lab.analysis.figures import plt
    plt.close(plot(paths, out / "overoptimisation.png", formats))
    return [out / "overoptimisation.md", out / "overoptimisation_seeds.csv", out / "overoptimisation.png"]


def main(argv: Sequence[str] | None = None) -> int:
    from ppo_lab.analysis.figures import parse_formats

    parser = argparse.ArgumentParser(prog=sys.argv[0], description="The Goodhart experiment's overoptimisation report: "
                                     "per reward mode, the true objective along training against the distance from the "
                                     "initial policy (Gao et al.'s fit), its drop height and an early-stopping rule.")
    parser.add_argument("dirs", nargs="+", type=Path, help="sweep dirs, run dirs or records, pooled")
    parser.add_argument("--out", type=Path, default=None, help="where the report goes (default: the first DIR)")
    parser.add_argument("--format", default=None, help="also the figure as pdf and/or svg (comma-separated)")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        formats = parse_formats(args.format)
        paths, skipped = load_paths(args.dirs)  # a DIR that does not exist: FileNotFoundError naming it
    except (ValueError, FileNotFoundError) as exc:
        print(f"ppo-lab goodhart-report: {exc}", file=sys.stderr)
        return 2
    for line in skipped:
        print(f"left out: {line}", file=sys.stderr)
    if not paths:
        print(f"ppo-lab goodhart-report: no evaluations along training under {', '.join(map(str, args.dirs))} "
              f"(train with eval.every_updates=N, as experiment=goodhart_cpu does)", file=sys.stderr)
        return 2
    written = write_report(paths, args.out or args.dirs[0], formats)
    print(markdown(paths))
    print("wrote " + ", ".join(map(str, written)))
    return 0
