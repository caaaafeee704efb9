"""`rliable.json` and `rliable.png` beside `aggregate.csv`: rliable's aggregates across seeds and tasks.

A *task* is an env (its gymnax id, EnvPool/Gymnasium/Jumanji id, else its name, from each run's
config.yaml); a *configuration* is a group of the sweep with its env-choosing keys (``env*``,
``experiment``) left out, so a sweep over envs x seeds x hyperparameters gives one
configuration per hyperparameter setting, scored on every env. Scores are one value per
(run, seed) of ``metric`` (default: the headline, ``eval/episode_return``), normalised per task as
``(score - random) / (reference - random)`` with the returns of each env's YAML (``scores:``)
or of the command line (``--score TASK=RANDOM,REFERENCE``, which wins). When a task has no
such returns the raw scores are used, and rliable.json says so (``normalized: false``; the
optimality gap, defined on normalised scores, is then left out).

Every interval is rliable's stratified percentile bootstrap (``reps`` replicates from ``seed``,
both recorded), read at the expanded percentiles and given from ``BOOTSTRAP_MIN_RUNS`` runs per
task (``estimators.interval_estimates``: below that it under-covers, docs/statistics.md); a
configuration with fewer than ``SMALL_SAMPLE`` runs on a task is flagged (``small_sample``) and
marked in rliable.json, the printed table and the figure's labels. With 2 to
6 configurations on the same tasks, ``improvement`` holds P(A > B) with its interval for every
ordered pair (rliable's probability of improvement; ``ppo-lab compare A B`` for any two dirs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ppo_lab import estimators as es
from ppo_lab.analysis.figures import finish, plt
from ppo_lab.analysis.sweep import Collection
from ppo_lab.estimators import BOOTSTRAP_MIN_RUNS, SMALL_SAMPLE
from ppo_lab.judging import metric_names
from ppo_lab.judging.headline import DEFAULT_HEADLINE
from ppo_lab.judging.tables import interval

MAX_PAIRS_CONFIGS = 6  # probability of improvement for every ordered pair up to this many configurations
RLIABLE_JSON = "rliable.json"
RLIABLE_FIGURE = "rliable.png"
TASK_KEYS = ("env", "experiment")  # swept keys (and their sub-keys, env.*) that choose the task, not the configuration
# A reference closer than this share of the way from random play to the max return is at random.
AT_RANDOM = 0.01


def task_of(env: Mapping) -> str:
    """The task a run's env section names: its env id where it has one, else its name."""
    for key in ("gymnax_id", "id", "env_id"):
        if isinstance(env.get(key), str) and env.get(key):
            return env[key]
    return str(env.get("name") or "unknown")


@dataclass(frozen=True)
class Reference:
    """A task's entry in its env YAML's `scores:`: random play's return, the reference's return,
    where that comes from, the reference's env steps per seed and the largest return a policy can
    expect (each None where the entry does not say)."""
    random: float
    reference: float
    source: str
    steps: int | None = None
    max: float | None = None

    @classmethod
    def of(cls, env: Mapping, task: str) -> Reference | None:
        """`task`'s entry in an env section's `scores:`; None where it has none with both returns."""
        scores = env.get("scores") or {}
        entry = scores.get(task) if isinstance(scores, Mapping) else None
        if not (isinstance(entry, Mapping) and "random" in entry and "reference" in entry):
            return None
        steps, top = entry.get("reference_steps"), entry.get("max")
        return cls(float(entry["random"]), float(entry["reference"]), entry.get("source") or f"conf/env/{env.get('name')}.yaml",
                   None if steps is None else int(steps), None if top is None else float(top))

    @property
    def uninformative(self) -> str | None:
        """Why a score against this reference says nothing (it is at the ceiling, or at random
        play's return), or None."""
        if self.max is None:
            return None
        if self.reference >= self.max:
            return f"reference at the ceiling ({self.reference:g}, the max)"
        if abs(self.reference - self.random) <= AT_RANDOM * (self.max - self.random):
            return f"reference at random play's return ({self.reference:g} vs {self.random:g})"
        return None


def parse_score_refs(items: Sequence[str]) -> dict[str, tuple[float, float]]:
    """``TASK=RANDOM,REFERENCE`` items of the command line -> task -> (random, reference)."""
    out = {}
    for item in items:
        task, sep, values = item.partition("=")
        parts = values.split(",")
        if not sep or len(parts) != 2:
            raise ValueError(f"--score {item!r}: expected TASK=RANDOM,REFERENCE, e.g. CartPole-v1=22,475")
        out[task] = (float(parts[0]), float(parts[1]))
    return out


def collect_scores(col: Collection, metric: str, refs_cli: Mapping[str, tuple[float, float]]):
    """config -> task -> raw scores of the used units, and task -> (random, reference, source)."""
    per_config: dict[str, dict[str, list[float]]] = {}
    refs: dict[str, tuple] = {}
    for u in col.units:
        value = u.values.get(metric, math.nan) if u.used else math.nan
        if value is None or math.isnan(value):
            continue
        env = u.run.env
        task = task_of(env)
        keys = col.group_keys[u.group]
        config = ",".join(f"{k}={v}" for k, v in keys.items() if k.partition(".")[0] not in TASK_KEYS) or "all"
        per_config.setdefault(config, {}).setdefault(task, []).append(float(value))
        if task not in refs:
            if task in refs_cli:
                refs[task] = (*refs_cli[task], "command line")
            elif (found := Reference.of(env, task)) is not None:
                refs[task] = (found.random, found.reference, f"conf/env/{env.get('name')}.yaml")
            else:
                refs[task] = None
    return per_config, refs


def normalised(per_task: Mapping[str, Sequence[float]], refs: Mapping[str, tuple | None]) -> dict:
    """task -> its scores normalised by its (random, reference, ...) in `refs`; a task without
    such returns left out."""
    return {t: es.normalize(v, *refs[t][:2]) for t, v in per_task.items() if refs.get(t) is not None}


def across_tasks(scores: Mapping[str, Sequence[float]], names: Sequence[str], reps: int, seed: int,
                 confidence: float) -> dict:
    """rliable's aggregates `names` of task -> runs' scores, with their intervals: {tasks,
    runs_per_task (tasks cut to the fewest runs, `estimators.score_matrix`), aggregates}."""
    matrix, tasks = es.score_matrix(scores)
    return {"tasks": tasks, "runs_per_task": int(matrix.shape[0]),
            "aggregates": es.interval_estimates(matrix, reps=reps, seed=seed, confidence=confidence, names=names)}


def _config_report(per_task: dict[str, list[float]], refs: dict, normalized: bool, reps: int, seed: int,
                   confidence: float) -> dict:
    scores = normalised(per_task, refs) if normalized else {t: np.asarray(v) for t, v in per_task.items()}
    names = [n for n in es.AGGREGATES if normalized or n != "optimality_gap"]
    n_runs = {t: len(v) for t, v in per_task.items()}
    pooled = across_tasks(scores, names, reps, seed, confidence)
    return {
        "tasks": pooled["tasks"],
        "n_runs": n_runs,
        "runs_used_per_task": pooled["runs_per_task"],
        "small_sample": min(n_runs.values()) < SMALL_SAMPLE,
        "aggregates": pooled["aggregates"],
        "per_task": {t: es.interval_estimates(np.asarray(scores[t])[:, None], reps=reps, seed=seed,
                                              confidence=confidence, names=[n for n in names if n != "median"])
                     for t in pooled["tasks"]},
        "scores": {t: np.asarray(scores[t]).tolist() for t in pooled["tasks"]},
    }


def rliable_report(col: Collection, metric: str = DEFAULT_HEADLINE, refs_cli: Mapping | None = None,
                   reps: int = es.DEFAULT_REPS, seed: int = es.DEFAULT_SEED, confidence: float = 0.95) -> dict:
    """rliable.json's content (see the module's docstring); empty ``configs`` when no scores."""
    per_config, refs = collect_scores(col, metric, refs_cli or {})
    normalized = bool(refs) and all(r is not None for r in refs.values())
    warnings = []
    if refs and not normalized:
        missing = sorted(t for t, r in refs.items() if r is None)
        warnings.append(f"no random/reference returns for {', '.join(missing)}: raw scores, not normalised "
                        "(give --score TASK=RANDOM,REFERENCE or `scores:` in the env's YAML)")
        if len(refs) > 1:
            warnings.append("aggregates across tasks of raw scores mix the tasks' scales: read them per task")
    configs = {c: _config_report(per_task, refs, normalized, reps, seed, confidence) for c, per_task in per_config.items()}
    for name, c in configs.items():
        n = min(c["n_runs"].values())
        if n < BOOTSTRAP_MIN_RUNS:
            warnings.append(f"{name}: n={n} run(s) per task (< {BOOTSTRAP_MIN_RUNS}): no bootstrap interval "
                            "(it covers less than it claims with so few runs: docs/statistics.md)")
    profiles = {}
    if configs:
        all_scores = np.concatenate([np.ravel(v) for c in configs.values() for v in c["scores"].values()])
        taus = np.linspace(min(0.0, all_scores.min()) if normalized else all_scores.min(),
                           max(1.0, all_scores.max()) if normalized else all_scores.max(), 41)
        for name, c in configs.items():
            matrix, _ = es.score_matrix(c["scores"])
            profiles[name] = es.performance_profile(matrix, taus, reps=reps, seed=seed, confidence=confidence)
    return {
        "metric": metric, "normalized": normalized, "confidence": confidence,
        "improvement": pairwise_improvement(configs, reps, seed, confidence),
        "bootstrap": {"method": "stratified percentile bootstrap over runs within each task (rliable), "
                                "read at the expanded percentiles (Hesterberg)", "reps": reps, "seed": seed,
                      "min_runs": BOOTSTRAP_MIN_RUNS},
        "tasks": {t: (None if r is None else {"random": r[0], "reference": r[1], "source": r[2]}) for t, r in refs.items()},
        "configs": configs, "profiles": profiles, "warnings": warnings,
    }


def pairwise_improvement(configs: dict, reps: int, seed: int, confidence: float) -> dict:
    """"A > B" -> P(A > B) with its interval, for every ordered pair of configurations scored on
    the same tasks (up to MAX_PAIRS_CONFIGS configurations; `ppo-lab compare A B` for others)."""
    names = list(configs)
    if not 2 <= len(names) <= MAX_PAIRS_CONFIGS:
        return {}
    out = {}
    for a in names:
        for b in names:
            if a == b or configs[a]["tasks"] != configs[b]["tasks"]:
                continue
            xa, _ = es.score_matrix(configs[a]["scores"])
            xb, _ = es.score_matrix(configs[b]["scores"])
            out[f"{a} > {b}"] = es.probability_of_improvement_interval(xa, xb, reps=reps, seed=seed, confidence=confidence)
    return out


def estimate_text(est: dict, spec: str = ".4g") -> str:
    """`0.87 [0.8, 0.93]`, or `0.87 [no interval: n<8]` where the bootstrap gives none."""
    return interval(est["point"], est["ci_low"], est["ci_high"], spec=spec, missing=f" [no interval: n<{BOOTSTRAP_MIN_RUNS}]")


def format_report(report: dict) -> str:
    """The printed table: each configuration's aggregates with their intervals."""
    lines = [f"rliable ({report['metric']}, {'normalised' if report['normalized'] else 'raw'} scores, "
             f"{report['bootstrap']['reps']} stratified bootstrap reps, seed {report['bootstrap']['seed']}):"]
    for name, c in report["configs"].items():
        cells = [f"{k} {estimate_text(v)}" for k, v in c["aggregates"].items()]
        flag = f"  WARNING: n<{SMALL_SAMPLE}" if c["small_sample"] else ""
        lines.append(f"  {name} (n={','.join(map(str, c['n_runs'].values()))}): " + "; ".join(cells) + flag)
    for pair, est in report.get("improvement", {}).items():
        lines.append(f"  P({pair}) = {estimate_text(est, '.3f')}")
    lines += [f"  warning: {w}" for w in report["warnings"]]
    return "\n".join(lines)


def plot_report(report: dict, path: Path | None = None, formats: tuple[str, ...] = ()):
    """Interval estimates (one panel per aggregate the report has: raw scores have no optimality
    gap, and no empty panel is drawn for it) and the performance profiles with bands. The title
    names the score and the intervals; the report's warnings are printed beside the figure
    (`ppo-lab aggregate`), not written into it."""
    configs = list(report["configs"])
    names = [n for n in es.AGGREGATES if any(n in report["configs"][c]["aggregates"] for c in configs)]
    # A configuration of fewer than SMALL_SAMPLE runs on a task is marked where it is named.
    ticks = [c + (f" (n={min(report['configs'][c]['n_runs'].values())} < {SMALL_SAMPLE})"
                  if report["configs"][c]["small_sample"] else "") for c in configs]
    score = metric_names.label(report["metric"])
    fig, axes = plt.subplots(1, len(names) + 1, figsize=(3.2 * (len(names) + 1), 2.8 + 0.4 * max(1, len(configs))), squeeze=False)
    for ax, name in zip(axes[0], names):
        for i, c in enumerate(configs):
            est = report["configs"][c]["aggregates"].get(name)
            if est is None:
                continue
            ax.barh(i, est["ci_high"] - est["ci_low"], left=est["ci_low"], height=0.6, alpha=0.5)
            ax.plot([est["point"]] * 2, [i - 0.3, i + 0.3], color="k", lw=1.5)
        ax.set_yticks(range(len(configs)), ticks if ax is axes[0][0] else [""] * len(configs), fontsize=7)
        ax.set_title(name.replace("_", " "), fontsize=9)
        ax.set_ylim(-0.8, len(configs) - 0.2)
        # A bar's left end is a sticky edge: without a margin a config at the lowest score sits
        # on the frame, where neither its interval nor its point can be seen.
        ax.use_sticky_edges = False
        ax.margins(x=0.08)
        ax.set_xlabel(f"{'normalised' if report['normalized'] else 'raw'} score: {score}", fontsize=8)
        ax.grid(alpha=0.3, axis="x")
    ax = axes[0][-1]
    for c, prof in report["profiles"].items():
        line, = ax.plot(prof["tau"], prof["profile"], label=ticks[configs.index(c)], lw=1.2)
        ax.fill_between(prof["tau"], prof["low"], prof["high"], color=line.get_color(), alpha=0.2, lw=0)
    ax.set_title("performance profile", fontsize=9)
    ax.set_xlabel(f"{'normalised ' if report['normalized'] else ''}score tau: {score}", fontsize=8)
    ax.set_ylabel("fraction of runs > tau", fontsize=8)
    if len(configs) > 1:
        ax.legend(fontsize=6)
    fig.suptitle(f"{score}: {int(report['confidence'] * 100)}% stratified bootstrap intervals "
                 f"(none below {BOOTSTRAP_MIN_RUNS} runs per task)", fontsize=9)
    return finish(fig, path, close=True, formats=formats)
