"""Compare runs or benchmarks side by side: a table and `comparison.png`.

    ppo-lab compare RUN_A RUN_B                   # run dirs (summary.json); comparison.png beside them
    ppo-lab compare BENCH_A BENCH_B --out cmp.png # benchmark=true dirs (benchmark.json)
    ppo-lab compare A B C --labels cpu1,cpu2,gpu --json

Per input: status, env, seeds, training duration, compile time, timesteps (all seeds), steps/s
(all seeds), speedup over the first input, peak host memory, device memory (where the backend
reports it), and the headline metric the env declares (judging/headline.py; else the return)
as mean [95% interval] across seeds, the interval `ppo-lab aggregate` and a run's closing
summary give the same seeds (`estimators.mean_summary`). Where the headline is not the return,
the return is beside it as `paid reward` with the reward mode that paid it. Any mix of run and
benchmark directories works.

Each input is labelled by what differs between the inputs: the override that differs (the
reward mode: `reward=proxy`; `ppo.lr=0.001`), else the seed, else its directory's name
(`--labels` names them yourself). With two inputs holding evaluated seeds (run dirs, or sweep
dirs of one configuration each), also, on the headline metric (`--metric` names another; a
metric no input has is refused, exit 2, naming the valid ones): the difference of the means
A - B with its interval (Welch's, or Anderson's for a metric with known bounds:
`estimators.difference_interval`), Welch's t-test p-value, Cohen's d and the seeds a side; and
the probability that the first improves on the second, P(A > B), with rliable's bootstrap
interval (`improvement`). Returns paid under different reward functions are never ranked
(judging/reward_modes.py).
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import sys
from pathlib import Path

import numpy as np

from ppo_lab import estimators as es
from ppo_lab import rundir
from ppo_lab.analysis import sweep as sw
from ppo_lab.analysis.figures import parse_formats, plt, save_figure
from ppo_lab.analysis.rliable_report import collect_scores, estimate_text
from ppo_lab.estimators import (SMALL_SAMPLE, WELCH, cohens_d, difference_interval, finite, metric_range,
                                welch_t_test)
from ppo_lab.judging.closing import across_seeds, method_words
from ppo_lab.judging.headline import DEFAULT_HEADLINE, RETURN, TRAIN_RETURN
from ppo_lab.judging.metric_names import label as metric_label
from ppo_lab.judging.reward_modes import is_paid_return, judged_by, mode_of
from ppo_lab.judging.tables import formatted, interval, text_table

COLUMNS = [  # (key, header, format)
    ("kind", "kind", ""),
    ("status", "status", ""),
    ("env", "env", ""),
    ("num_seeds", "seeds", "d"),
    ("duration_s", "train s", ".1f"),
    ("compile_s", "compile s", ".1f"),
    ("timesteps", "timesteps", ",d"),
    ("sps", "steps/s", ",.0f"),
    ("speedup", "speedup", ".2f"),
    ("peak_host_memory_mb", "host MB", ",.0f"),
    ("device_memory_mb", "device MB", ",.0f"),
]


def read_inputs(paths) -> list[sw.Collection]:
    """Each input's runs and seeds (`analysis/sweep.py`), read once: a run dir, a sweep dir, or
    the folder of a run's JSON file."""
    return [sw.collect([_folder(p)]) for p in paths]


def load(path: Path, col: sw.Collection, label: str | None = None, headline: str = DEFAULT_HEADLINE) -> dict:
    """One comparable record from a run dir, a benchmark dir, or a summary/benchmark JSON file
    (a sweep dir or a folder of run dirs: its runs' evaluations only), with its seeds' values of
    `headline` and of the evaluation's return (`col`: its runs, `read_inputs`)."""
    path = Path(path)
    try:
        summary, kind, _ = rundir.read_result(path)
    except FileNotFoundError:
        if not (path.is_dir() and (rundir.find_sweep_roots(path) or rundir.find_run_dirs(path))):  # a folder of runs
            raise
        summary, kind = None, "sweep"
    data = summary.to_json() if summary else {}
    seeds = data.get("seeds") or []
    per_seed_steps = data.get("timesteps")
    # the evaluation's mean return, else the training's last updates'
    returns = [es.finite_mean(summary.values(metric)) for metric in (RETURN, TRAIN_RETURN)] if summary else []
    return {
        "label": label or _folder(path).name,
        "path": str(path),
        "kind": kind,
        "status": data.get("status"),
        "env": data.get("env"),
        "num_seeds": len(seeds) if seeds else None,
        "duration_s": data.get("wall_s"),
        "compile_s": data.get("compile_s"),
        "timesteps": per_seed_steps * max(len(seeds), 1) if isinstance(per_seed_steps, int) else per_seed_steps,
        "sps": data.get("sps"),
        "peak_host_memory_mb": data.get("peak_host_memory_mb"),
        "device_memory_mb": data.get("device_memory_mb"),
        "final_return": next((r for r in returns if r is not None), None),
        "layout": data.get("layout"),
        **_seed_values(col, headline),
    }


def _folder(path: Path) -> Path:
    """The folder of an input (a run dir, a sweep dir, or a run's JSON file)."""
    return Path(path) if Path(path).is_dir() else Path(path).parent


def check_metric(cols: list[sw.Collection], metric: str) -> None:
    """Refuse (ValueError) a metric that no input's seeds have, naming the closest and every
    valid one: a typo would otherwise compare nothing."""
    known = sorted({m for col in cols for m in col.metrics})
    if metric in known:
        return
    close = difflib.get_close_matches(metric, known, n=1)
    raise ValueError(f"--metric {metric}: no input has it" + (f"; did you mean {close[0]}?" if close else "")
                     + (f" valid: {', '.join(known)}" if known else " (the inputs hold no evaluated seeds)"))


def _seed_values(col: sw.Collection, headline: str) -> dict:
    """The used seeds' values of `headline` and of the evaluation's return of an input, their
    declared bounds and the reward mode that paid the return."""
    used = [u for u in col.units if u.used]
    return {"headline": headline, "headline_values": [u.values.get(headline) for u in used],
            "paid_values": [u.values.get(RETURN) for u in used], "bounds": col.bounds(),
            "reward_mode": ", ".join(sorted({mode_of(run.reward) for run in col.runs if run.reward})) or None}


def labels_by_difference(paths, cols: list[sw.Collection]) -> list[str]:
    """Each input named by what differs between them: the overrides (other than the seed) whose
    values differ, else the seed's, else the input's directory name; directory names too when
    two inputs would read alike."""
    settings = []
    for runs in (col.runs for col in cols):
        common = {}
        for key in {k for run in runs for k in run.overrides if not k.startswith("hydra.")}:
            values = {run.overrides.get(key) for run in runs}
            if len(values) == 1:
                common[key] = values.pop()
        settings.append(common)
    names = [_folder(p).name for p in paths]
    keys = sorted({k for s in settings for k in s}, key=lambda k: (k in sw.SEED_KEYS, k))
    differing = [k for k in keys if len({s.get(k) for s in settings}) > 1]
    for chosen in ([k for k in differing if k not in sw.SEED_KEYS], differing):
        labels = [",".join(f"{k}={s.get(k, sw.DEFAULT_VALUE)}" for k in chosen) for s in settings]
        if chosen and len(set(labels)) == len(labels):
            return labels
    return names


def compare(paths, labels=None, headline: str = DEFAULT_HEADLINE, cols: list[sw.Collection] | None = None) -> list[dict]:
    cols = cols or read_inputs(paths)
    labels = list(labels or labels_by_difference(paths, cols)) + [None] * len(paths)
    records = [load(p, col, label, headline) for p, col, label in zip(paths, cols, labels)]
    base = records[0].get("sps")
    for r in records:
        r["speedup"] = r["sps"] / base if base and r.get("sps") else None
    return records


def _cell(value, spec: str) -> str:
    try:
        return formatted(value, spec)
    except (TypeError, ValueError):  # a value of another type than its column's (a float count)
        return str(value)


def format_table(records: list[dict], paid_by_mode: bool = False) -> str:
    """The table; `paid_by_mode`: the inputs' returns were paid under different reward functions
    (each is labelled with its mode, none is the headline)."""
    headline = records[0]["headline"]
    values = [("headline_values", f"{metric_label(headline)} (mean [95% CI])", headline)]
    if not is_paid_return(headline) or paid_by_mode:
        values = [v for v in values if not is_paid_return(v[2])]
        values.append(("paid_values", "paid reward (mode)", RETURN))
    headers = ["run"] + [h for _, h, _ in COLUMNS] + [h for _, h, _ in values]
    rows = [[r["label"]] + [_cell(r.get(k), spec) for k, _, spec in COLUMNS]
            + [_values_cell(r, key, metric) for key, _, metric in values] for r in records]
    out = [text_table(headers, "l" + "r" * (len(headers) - 1), rows)]
    out.append(f"speedup: steps/s relative to {records[0]['label']}")
    out += [f"{r['label']}: {r['path']}" for r in records]
    return "\n".join(out)


def difference(a: dict, b: dict, confidence: float = 0.95) -> dict:
    """A against B on their compared metric (`compare`'s records): the difference of the means
    with its interval and method, Welch's t-test, Cohen's d, the seeds a side."""
    metric = a["headline"]
    xa, _ = finite([v for v in a.get("headline_values") or [] if v is not None])
    xb, _ = finite([v for v in b.get("headline_values") or [] if v is not None])
    bounds = {**(b.get("bounds") or {}), **(a.get("bounds") or {})}
    low, high, method = difference_interval(xa, xb, *metric_range(metric, bounds), confidence)
    t, p = welch_t_test(xa, xb)
    return {"metric": metric, "n_a": int(xa.size), "n_b": int(xb.size), "confidence": confidence,
            "mean_a": float(xa.mean()) if xa.size else math.nan, "mean_b": float(xb.mean()) if xb.size else math.nan,
            "difference": float(xa.mean() - xb.mean()) if xa.size and xb.size else math.nan,
            "ci_low": low, "ci_high": high, "ci_method": method,
            "interval": "Welch" if method == WELCH else method_words(method, metric, bounds),
            "welch_t": t, "welch_p": p, "cohens_d": cohens_d(xa, xb)}


def format_difference(d: dict, label_a: str, label_b: str, tasks: int = 1) -> str:
    """`A - B on M: 12.0 [3.1, 20.9] (95%, Welch); Welch's t-test p = 0.012; Cohen's d = 2.1; n = 5 vs 5
    seeds`; inputs of several `tasks` (envs) are pooled, as the table's means are, and it says so."""
    seeds = f"n = {d['n_a']} vs {d['n_b']} seeds" + (f" pooled over {tasks} envs (P(A > B) compares within each)"
                                                     if tasks > 1 else "")
    if min(d["n_a"], d["n_b"]) < 2:
        return f"{label_a} - {label_b} on {d['metric']}: no test ({seeds}: Welch's test needs 2 a side)"
    line = (f"{label_a} - {label_b} on {d['metric']}: {interval(d['difference'], d['ci_low'], d['ci_high'], spec='.3g')} "
            f"({int(d['confidence'] * 100)}%, {d['interval']}); Welch's t-test p = {d['welch_p']:.3g}; "
            f"Cohen's d = {d['cohens_d']:.2f}; {seeds}")
    if min(d["n_a"], d["n_b"]) < SMALL_SAMPLE:
        line += f"\nWARNING: n={min(d['n_a'], d['n_b'])} < {SMALL_SAMPLE} seeds on a side: a wide interval, little power"
    return line


def scores_by_task(col: sw.Collection, metric: str) -> dict[str, list[float]]:
    """task -> every used unit's `metric` of an input (all its configurations together)."""
    per_config, _ = collect_scores(col, metric, {})
    out: dict[str, list[float]] = {}
    for per_task in per_config.values():
        for task, values in per_task.items():
            out.setdefault(task, []).extend(values)
    return out


def improvement(a: sw.Collection, b: sw.Collection, metric: str = DEFAULT_HEADLINE, reps: int = es.DEFAULT_REPS,
                seed: int = es.DEFAULT_SEED, confidence: float = 0.95) -> dict | None:
    """P(A > B) on `metric` over the tasks both have, with rliable's independent stratified
    bootstrap interval (`estimators.probability_of_improvement_interval`: none below
    BOOTSTRAP_MIN_RUNS runs a side; ranks within a task, so no normalisation), fewer than 5 runs
    a side marked; None when A and B share no task with scores."""
    sa, sb = scores_by_task(a, metric), scores_by_task(b, metric)
    tasks = [t for t in sa if t in sb]
    if not tasks:
        return None
    xa, _ = es.score_matrix({t: sa[t] for t in tasks})
    xb, _ = es.score_matrix({t: sb[t] for t in tasks})
    est = es.probability_of_improvement_interval(xa, xb, reps=reps, seed=seed, confidence=confidence)
    n_a, n_b = int(xa.shape[0]), int(xb.shape[0])
    warning = None
    if min(n_a, n_b) < SMALL_SAMPLE:
        warning = f"n={min(n_a, n_b)} run(s) on a side (< {SMALL_SAMPLE}): too few to tell the two apart"
    return {"metric": metric, "tasks": tasks, "n_a": n_a, "n_b": n_b, **est, "confidence": confidence,
            "bootstrap": {"reps": reps, "seed": seed}, "warning": warning,
            "mean_a": float(np.mean(xa)), "mean_b": float(np.mean(xb))}


def format_improvement(result: dict, label_a: str, label_b: str) -> str:
    line = (f"P({label_a} > {label_b}) on {result['metric']} = {estimate_text(result, '.3f')} "
            f"({int(result['confidence'] * 100)}% stratified bootstrap, "
            f"{result['bootstrap']['reps']} reps, seed {result['bootstrap']['seed']}; n={result['n_a']} vs {result['n_b']} "
            f"run(s) on {', '.join(result['tasks'])})")
    return line + (f"\nWARNING: {result['warning']}" if result["warning"] else "")


def _values_cell(record: dict, key: str, metric: str) -> str:
    """mean [95% interval] across the record's seeds (the closing summary's method and format)."""
    values = [v for v in record.get(key) or [] if v is not None]
    if not values:
        return "-"
    text = across_seeds(values, metric, record.get("bounds") or {}, one_seed=" (1 seed)")
    return f"{record['reward_mode']}: {text}" if key == "paid_values" and record.get("reward_mode") else text


def plot(records: list[dict], out: Path, formats: tuple[str, ...] = ()) -> Path:
    for r in records:  # the headline's mean over seeds, the panel's bar
        r["headline_mean"] = es.finite_mean(r.get("headline_values"))
    panels = [("sps", "steps/s (all seeds)"), ("duration_s", "training seconds"), ("compile_s", "compile seconds"),
              ("peak_host_memory_mb", "peak host memory (MB)"), ("headline_mean", metric_label(records[0]["headline"]))]
    if any(r.get("device_memory_mb") for r in records):
        panels.insert(4, ("device_memory_mb", "device memory (MB)"))
    # No empty panel: a quantity no input has (a sweep's compile time, a benchmark's headline)
    # is left out, and said.
    missing = [title for key, title in panels if all(r.get(key) is None for r in records)]
    panels = [(key, title) for key, title in panels if title not in missing]
    if missing:
        print(f"{Path(out).name}: no panel for {', '.join(missing)}: no input has it")
    fig, axes = plt.subplots(1, len(panels), figsize=(3.3 * len(panels), 3.4), squeeze=False)
    labels = [r["label"] for r in records]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (key, title) in zip(axes[0], panels):
        values = [r.get(key) or 0.0 for r in records]
        bars = ax.bar(range(len(records)), values, color=[colors[i % len(colors)] for i in range(len(records))])
        for bar, r in zip(bars, records):
            v = r.get(key)
            text = "-" if v is None else (f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}")
            if key == "sps" and r.get("speedup") is not None:
                text += f"\n{r['speedup']:.2f}x"
            ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(records)), labels, rotation=20, ha="right", fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
        ax.margins(y=0.2)
    fig.tight_layout()
    return save_figure(fig, out, close=True, formats=formats)


def default_out(paths: list[Path]) -> Path:
    """comparison.png beside the runs compared: in the folder holding them all (a sweep dir,
    outputs/runs/<experiment>/...), never the working directory (a repository's root)."""
    folders = [_folder(p).resolve().parent for p in paths]
    common = Path(os.path.commonpath(folders))
    return (common if common != Path(common.anchor) else folders[0]) / "comparison.png"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Compare runs or benchmarks: a table and comparison.png.")
    parser.add_argument("paths", nargs="+", type=Path, help="run dirs, benchmark dirs, or their JSON files (first = baseline)")
    parser.add_argument("--labels", default=None, help="comma-separated labels, one per path")
    parser.add_argument("--out", type=Path, default=None,
                        help="PNG path (default: comparison.png in the folder that holds the runs compared)")
    parser.add_argument("--json", action="store_true", help="also print the records as JSON")
    parser.add_argument("--metric", default=None,
                        help=f"the metric compared, and the score of P(A > B) (default: the headline the runs' env "
                             f"declares, else {DEFAULT_HEADLINE})")
    parser.add_argument("--format", default=None, metavar="FORMATS", help="also write the figure in these formats, e.g. pdf,svg")
    args = parser.parse_args(argv)
    if len(args.paths) < 2:
        parser.error("give at least two runs or benchmarks")
    try:
        formats = parse_formats(args.format)
        cols = read_inputs(args.paths)
        if args.metric is not None:
            check_metric(cols, args.metric)
        metric, why_not, paid_by_mode = judged_by([run for col in cols for run in col.runs], args.metric)
        records = compare(args.paths, args.labels.split(",") if args.labels else None, metric or args.metric or DEFAULT_HEADLINE,
                          cols)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_table(records, paid_by_mode))
    better = apart = None
    if why_not:
        print(f"no test, no P(A > B): {why_not}", file=sys.stderr)
    elif len(args.paths) == 2:
        better = improvement(cols[0], cols[1], metric)
    if better is not None:
        apart = difference(records[0], records[1])
        print(format_difference(apart, records[0]["label"], records[1]["label"], len(better["tasks"])))
        print(format_improvement(better, records[0]["label"], records[1]["label"]))
    print(f"wrote {plot(records, args.out or default_out(args.paths), formats)}")
    if args.json:
        if better is not None:
            records[0]["improvement_over"] = {"label": records[1]["label"], **better}
            records[0]["difference_from"] = {"label": records[1]["label"], **apart}
        print(json.dumps(records, indent=2))
    return 0
