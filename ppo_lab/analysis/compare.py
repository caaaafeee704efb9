"""Compare runs or benchmarks side by side: a table and `comparison.png`.

    ppo-lab compare RUN_A RUN_B                   # run dirs (summary.json); comparison.png beside them
    ppo-lab compare BENCH_A BENCH_B --out cmp.png # benchmark=true dirs (benchmark.json)
    ppo-lab compare A B C --labels cpu1,cpu2,gpu --json

Per input: status, env, seeds, training duration, compile time, timesteps (all seeds), steps/s
(all seeds), speedup over the first input, peak host memory, device memory (where the backend
reports it), final return (mean over seeds of the final evaluation, else of the last training
window). Any mix of run and benchmark directories works. With two inputs holding evaluated
seeds (run dirs, or sweep dirs of one configuration each), also the probability that the first
improves on the second, P(A > B), with rliable's bootstrap interval (`analysis/improvement.py`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

from ppo_lab import rundir
from ppo_lab.analysis.figures import plt, save_figure
from ppo_lab.analysis.improvement import format_improvement, improvement
from ppo_lab.analysis.headline import headline_of
from ppo_lab.analysis.rliable_report import DEFAULT_METRIC

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
    ("final_return", "final return", ".2f"),
]


def _mean(values):
    xs = [v for v in (values or []) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]
    return sum(xs) / len(xs) if xs else None


def load(path: Path, label: str | None = None) -> dict:
    """One comparable record from a run dir, a benchmark dir, or a summary/benchmark JSON file
    (a sweep dir: its runs' evaluations only)."""
    path = Path(path)
    try:
        data, break_kind, _ = rundir.read_result(path)
    except FileNotFoundError:
        if not (path.is_dir() and rundir.find_sweep_roots(path)):
            raise
        data, break_kind = {}, "sweep"
    seeds = data.get("seeds") or []
    per_seed_steps = data.get("timesteps")
    final_return = _mean((data.get("eval") or {}).get("episode_return"))
    if final_return is None:
        final_return = _mean((data.get("final") or {}).get("train/mean_episode_return"))
    return {
        "label": label or (path.parent.name if path.is_file() else path.name),
        "path": str(path),
        "kind": break_kind,
        "status": data.get("status"),
        "env": data.get("env"),
        "num_seeds": len(seeds) if seeds else None,
        "duration_s": data.get("wall_s"),
        "compile_s": data.get("compile_s"),
        "timesteps": per_seed_steps * max(len(seeds), 1) if isinstance(per_seed_steps, int) else per_seed_steps,
        "sps": data.get("sps"),
        "peak_host_memory_mb": data.get("peak_host_memory_mb"),
        "device_memory_mb": data.get("device_memory_mb"),
        "final_return": final_return,
        "layout": data.get("layout"),
    }


def compare(paths, labels=None) -> list[dict]:
    labels = list(labels or []) + [None] * len(paths)
    records = [load(p, l) for p, l in zip(paths, labels)]
    base = records[0].get("sps")
    for r in records:
        r["speedup"] = r["sps"] / base if base and r.get("sps") else None
    return records


def _cell(value, spec: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    try:
        return format(value, spec) if spec else str(value)
    except (TypeError, ValueError):
        return str(value)


def format_table(records: list[dict]) -> str:
    headers = ["run"] + [h for _, h, _ in COLUMNS]
    rows = [[r["label"]] + [_cell(r.get(k), spec) for k, _, spec in COLUMNS] for r in records]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))  # noqa: E731
    out = [line(headers), line(["-" * w for w in widths])] + [line(row) for row in rows]
    out.append(f"speedup: steps/s relative to {records[0]['label']}")
    return "\n".join(out)


def plot(records: list[dict], out: Path) -> Path:
    panels = [("sps", "steps/s (all seeds)"), ("duration_s", "training seconds"), ("compile_s", "compile seconds"),
              ("peak_host_memory_mb", "peak host memory (MB)"), ("final_return", "final return")]
    if any(r.get("device_memory_mb") for r in records):
        panels.insert(4, ("device_memory_mb", "device memory (MB)"))
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
    return save_figure(fig, out, close=True)


def default_out(paths: list[Path]) -> Path:
    """comparison.png beside the runs compared: in the folder holding them all (a sweep dir,
    outputs/runs/<experiment>/...), never the working directory (a repository's root)."""
    folders = [(p if p.is_dir() else p.parent).resolve().parent for p in map(Path, paths)]
    common = Path(os.path.commonpath(folders))
    return (common if common != Path(common.anchor) else folders[0]) / "comparison.png"


def _env_section(path: Path) -> dict:
    """The env section of a run's config.yaml ({} for a benchmark file or a dir without one)."""
    try:
        return dict(rundir.read_config(path if Path(path).is_dir() else Path(path).parent).get("env") or {})
    except (FileNotFoundError, ValueError):
        return {}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Compare runs or benchmarks: a table and comparison.png.")
    parser.add_argument("paths", nargs="+", type=Path, help="run dirs, benchmark dirs, or their JSON files (first = baseline)")
    parser.add_argument("--labels", default=None, help="comma-separated labels, one per path")
    parser.add_argument("--out", type=Path, default=None,
                        help="PNG path (default: comparison.png in the folder that holds the runs compared)")
    parser.add_argument("--json", action="store_true", help="also print the records as JSON")
    parser.add_argument("--metric", default=None,
                        help=f"the score of P(A > B) (default: the headline the runs' env declares, else {DEFAULT_METRIC})")
    args = parser.parse_args(argv)
    if len(args.paths) < 2:
        parser.error("give at least two runs or benchmarks")
    try:
        records = compare(args.paths, args.labels.split(",") if args.labels else None)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_table(records))
    better = None
    if len(args.paths) == 2:
        try:  # the runs' headline metric unless told another (analysis/headline.py)
            metric = args.metric or headline_of(_env_section(p) for p in args.paths)
        except ValueError as exc:
            print(f"no P(A > B): {exc} (--metric)", file=sys.stderr)
        else:
            better = improvement(args.paths[0], args.paths[1], metric)
    if better is not None:
        print(format_improvement(better, records[0]["label"], records[1]["label"]))
    print(f"wrote {plot(records, args.out or default_out(args.paths))}")
    if args.json:
        if better is not None:
            records[0]["improvement_over"] = {"label": records[1]["label"], **better}
        print(json.dumps(records, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
