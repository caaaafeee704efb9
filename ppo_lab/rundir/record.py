"""A record: a run directory cut to the small files a docs page is rendered from, to keep in the
repository (docs/records/...).

config.yaml (the resolved config), manifest.json (the reproducibility record, the run-dir
format) and summary.json (per seed: the evaluation in both plays, the last updates' metrics,
the times) are copied as they are; metrics.csv is cut to some columns at no more than `points`
updates per seed, the first and the last kept and the rest evenly spaced (enough for a
figure's curves, a few kB where the run's is megabytes). The launch's overrides
(`.hydra/overrides.yaml`) come along where the run has them, so that a sweep's records group as
its runs did, and so do the evaluations along training (evals.csv, a row per evaluation and seed). `record.json` says where the record came from and how its metrics.csv was cut, and
holds what needed the whole metrics.csv: each seed's criteria (`analysis/criteria.py`), which
readers take from it instead of computing them from the cut rows. A benchmark run
(`benchmark=true`) is kept as config.yaml, manifest.json and benchmark.json. Any reader of run
dirs reads a record as one.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Sequence

import numpy as np

from ppo_lab.rundir.atomic import read_json, write_atomic, write_json_atomic
from ppo_lab.rundir.metrics import read_header, read_metrics
from ppo_lab.rundir.paths import BENCHMARK, CONFIG, EVALS, HYDRA_OVERRIDES, INT_COLUMNS, MANIFEST, METRICS, SUMMARY
from ppo_lab.rundir.sweep_files import write_table

RECORD = "record.json"
COPIED = (CONFIG, MANIFEST, SUMMARY)
BENCHMARK_COPIED = (CONFIG, MANIFEST, BENCHMARK)
COPIED_IF_THERE = (HYDRA_OVERRIDES, EVALS)  # the launch's overrides; the evaluations along training


def kept_updates(updates: Sequence[int], points: int) -> set[int]:
    """At most `points` of `updates`: the first, the last and evenly spaced ones between."""
    ordered = sorted(set(updates))
    if len(ordered) <= points:
        return set(ordered)
    picks = np.unique(np.round(np.linspace(0, len(ordered) - 1, points)).astype(int))
    return {ordered[i] for i in picks}


def write_record(run_dir: Path, target: Path, columns: Sequence[str], points: int,
                 criteria: dict[int, dict[str, float]] | None = None) -> dict:
    """Write `run_dir`'s record into `target` (replacing one there) and return its record.json
    content; `criteria`: seed -> its criteria from the whole metrics.csv. A benchmark run
    (`benchmark=true`: benchmark.json, no summary.json or metrics.csv) is kept whole: its config,
    manifest and benchmark.json. Raises FileNotFoundError naming a file the run dir lacks,
    ValueError for a column its metrics.csv lacks; nothing is written then."""
    run_dir, target = Path(run_dir), Path(target)
    benchmark = check_recordable(run_dir, columns)
    copied = BENCHMARK_COPIED if benchmark else COPIED
    cut = None if benchmark else _cut_metrics(run_dir, columns, points)
    staging = target.with_name(f".{target.name}.staging")
    shutil.rmtree(staging, ignore_errors=True)
    for name in (*copied, *(n for n in COPIED_IF_THERE if (run_dir / n).exists())):
        write_atomic(staging / name, (run_dir / name).read_bytes())
    record = {"from": str(run_dir.resolve())}
    if cut is not None:
        rows, keys, total = cut
        write_table(staging / METRICS, rows, keys)
        record.update(metrics_columns=keys, updates_per_seed=len({r["update"] for r in rows}), updates_per_seed_in_run=total,
                      criteria={str(seed): values for seed, values in (criteria or {}).items()})
    write_json_atomic(staging / RECORD, record)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return record


def check_recordable(run_dir: Path, columns: Sequence[str]) -> bool:
    """Whether `run_dir` is a benchmark run, once it has every file its record copies
    (FileNotFoundError naming those it lacks) and, unless a benchmark run, every column of
    `columns` in its metrics.csv (ValueError naming the first it lacks)."""
    run_dir = Path(run_dir)
    benchmark = is_benchmark_run(run_dir)
    needed = BENCHMARK_COPIED if benchmark else (*COPIED, METRICS)
    if missing := [name for name in needed if not (run_dir / name).exists()]:
        raise FileNotFoundError(f"{run_dir} has no {', '.join(missing)}: not a finished run dir")
    if not benchmark:
        header = read_header(run_dir / METRICS) or []
        if absent := [c for c in columns if c not in header]:
            raise ValueError(f"{run_dir / METRICS} has no column {absent[0]!r}; its columns: {', '.join(header)}")
    return benchmark


def is_benchmark_run(run_dir: Path) -> bool:
    """A `benchmark=true` run: benchmark.json where another run writes summary.json."""
    return (Path(run_dir) / BENCHMARK).exists() and not (Path(run_dir) / SUMMARY).exists()


def _cut_metrics(run_dir: Path, columns: Sequence[str], points: int) -> tuple[list[dict], list[str], int]:
    """(metrics.csv's rows at the kept updates, cut to `columns`; their keys; the run's updates per seed)."""
    rows = read_metrics(run_dir / METRICS)
    kept = kept_updates([r["update"] for r in rows], points)
    keys = [*INT_COLUMNS, *columns]
    return [{k: r[k] for k in keys} for r in rows if r["update"] in kept], keys, len({r["update"] for r in rows})


def recorded_criteria(run_dir: Path) -> dict[int, dict[str, float]] | None:
    """seed -> its criteria, where `run_dir` is a record (its record.json); None for a run dir."""
    record = read_json(Path(run_dir) / RECORD, default=None)
    if record is None:
        return None
    return {int(seed): values for seed, values in (record.get("criteria") or {}).items()}
