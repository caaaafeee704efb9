"""Probability of improvement of one configuration over another (rliable), for `ppo-lab compare A B`.

Each of A and B is a run dir, a sweep dir or a folder of them: its used (run, seed) units'
``metric`` per task (``rliable_report.collect_scores``). On the tasks both have, P(A > B) is
Mann-Whitney's U over the two sets of runs divided by n_A * n_B (a tie counts one half),
averaged over tasks, with rliable's independent stratified bootstrap interval (none below
``BOOTSTRAP_MIN_RUNS`` runs on a side, `estimators.probability_of_improvement_interval`). It needs
no normalisation (it compares ranks within a task). Fewer than 5 runs on a side is marked.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ppo_lab import estimators as es
from ppo_lab.analysis import sweep as sw
from ppo_lab.analysis.rliable_report import collect_scores, estimate_text
from ppo_lab.estimators import SMALL_SAMPLE
from ppo_lab.judging.headline import DEFAULT_HEADLINE


def scores_by_task(path: Path, metric: str) -> dict[str, list[float]]:
    """task -> every used unit's `metric` under `path` (all its configurations together)."""
    per_config, _ = collect_scores(sw.collect([Path(path)]), metric, {})
    out: dict[str, list[float]] = {}
    for per_task in per_config.values():
        for task, values in per_task.items():
            out.setdefault(task, []).extend(values)
    return out


def improvement(a: Path, b: Path, metric: str = DEFAULT_HEADLINE, reps: int = es.DEFAULT_REPS,
                seed: int = es.DEFAULT_SEED, confidence: float = 0.95) -> dict | None:
    """P(A > B) on `metric` with its interval, or None when A and B share no task with scores."""
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
