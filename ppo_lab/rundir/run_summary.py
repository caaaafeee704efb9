"""summary.json: how a run went, as one typed record, `RunSummary` (docs/architecture.md,
"Contracts"); benchmark.json, a benchmark run's subset of it; error.txt, why a sweep's job
failed before its run wrote summary.json (a config error, say: the sweep callback writes it,
the aggregate reads it).

The run writes it at its start (status running) and at its end, each time the whole record;
every reader (the analysis, `ppo-lab watch`, `compare`, the tuning objective, a relaunch that
skips a completed run) reads it back through `read_summary` into the same dataclass, so a
field is named, typed and defaulted here once. A file with a key this lab does not know, or
that is not a JSON object, is refused (ValueError naming the file and the keys).

Per-seed values (`final`, `eval`: metric -> one value per seed) are in the order of `seeds`;
a seed whose training went non-finite has null there and an entry under `diverged`.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ppo_lab
from ppo_lab.rundir.atomic import read_json, write_json_atomic, write_text_atomic
from ppo_lab.rundir.paths import BENCHMARK, ERROR, SUMMARY

PerSeed = dict[str, list]  # metric -> one value per seed (None: diverged, or not measured)


@dataclass
class RunSummary:
    # How it ended: running | completed | stopped | timed_out | failed | diverged.
    status: str = "running"
    stop_reason: str | None = None
    experiment: str | None = None
    env: str | None = None
    reward: str | None = None
    seeds: list[int] = field(default_factory=list)
    updates: int = 0  # per seed, trained so far
    timesteps: int = 0  # per seed
    total_updates: int | None = None  # the run's budget in updates
    wall_s: float = 0.0  # training time over every session (compile and evaluation apart)
    compile_s: float | None = None  # this session's
    eval_s: float | None = None
    along_eval_s: float | None = None  # this session's evaluations along training (evals.csv); null: off
    sps: float | None = None  # env steps/s of this session's loop, all seeds
    final: PerSeed = field(default_factory=dict)  # the windowed training metrics at the end
    eval: PerSeed = field(default_factory=dict)  # the final evaluation
    resumed_from: int | None = None  # the update this session resumed from
    resume_source: str | None = None  # a checkpoint outside the run dir it resumed from
    checkpoints_damaged: list[str] = field(default_factory=list)  # "ckpt_<N>.json: why", skipped on resume
    slurm_job_id: str | None = None
    layout: dict = field(default_factory=dict)
    devices: list[str] = field(default_factory=list)
    ppo_effective: dict = field(default_factory=dict)  # after auto-scaling
    versions: dict = field(default_factory=dict)
    error: str | None = None  # a failed run's error, one line
    loggers_disabled: list[dict] = field(default_factory=list)  # {logger, error, when}
    diverged: list[dict] = field(default_factory=list)  # one entry per seed that went non-finite
    action_names: list[str] = field(default_factory=list)  # the env's order of its actions
    health: dict = field(default_factory=dict)  # what the health checks saw (judging/health.py)
    peak_host_memory_mb: float | None = None
    device_memory_mb: float | None = None
    pbt: dict | None = None  # a population run: its best member, lineage, feasibility
    vmap_group: dict | None = None  # a cell of a grid trained as one program: cells, replicas, layout
    skipped: bool = False  # not in the file: a relaunch found the run completed and trained nothing

    def to_json(self) -> dict:
        """The file's fields (copies: the record's lists and dicts are not shared with it)."""
        data = dataclasses.asdict(self)
        del data["skipped"]
        return data

    @classmethod
    def from_json(cls, data: Any, source: Path | str = SUMMARY) -> RunSummary:
        if not isinstance(data, dict):
            raise ValueError(f"{source}: a JSON object of a run's summary, not {type(data).__name__}")
        unknown = sorted(set(data) - ({f.name for f in dataclasses.fields(cls)} - {"skipped"}))
        if unknown:
            raise ValueError(f"{source}: keys this lab's summary does not have: {', '.join(unknown)}")
        return cls(**data)

    def end(self, status: str, reason: str, error: str | None = None) -> None:
        """How the run ended (the closing summary and the exit code read `status`)."""
        self.status, self.stop_reason, self.error = status, reason, error

    def per_seed(self) -> dict[str, PerSeed]:
        """The per-seed sections by name: `eval` and `final` (metric names as `eval/<name>`)."""
        return {"eval": self.eval, "final": self.final}

    def values(self, metric: str) -> list | None:
        """The per-seed values of `metric`: `eval/NAME` from the evaluation, `final/NAME` from the
        training's last updates, a bare NAME (`train/entropy`) from the evaluation, else from the
        last updates; None where the summary has no such metric."""
        for section, per_seed in self.per_seed().items():
            if metric.startswith(section + "/"):
                return per_seed.get(metric[len(section) + 1:])
        found = self.eval.get(metric)
        return found if found is not None else self.final.get(metric)


# summary.json fields a benchmark.json repeats (docs/architecture.md, "Contracts").
BENCHMARK_FIELDS = ("status", "stop_reason", "env", "reward", "seeds", "sps", "compile_s", "wall_s", "peak_host_memory_mb",
                    "device_memory_mb", "updates", "timesteps", "layout", "devices", "versions", "final")


def read_summary(run_dir: Path) -> RunSummary | None:
    """summary.json of `run_dir`, or None when the run has not written one yet."""
    path = Path(run_dir) / SUMMARY
    data = read_json(path, default=None)
    return None if data is None else RunSummary.from_json(data, path)


def write_summary(run_dir: Path, summary: RunSummary) -> None:
    write_json_atomic(Path(run_dir) / SUMMARY, summary.to_json())


def read_benchmark(run_dir: Path) -> dict:
    return read_json(Path(run_dir) / BENCHMARK)


def write_benchmark(run_dir: Path, summary: RunSummary, config: dict | None) -> Path:
    path = Path(run_dir) / BENCHMARK
    data = summary.to_json()
    write_json_atomic(path, {**{name: data[name] for name in BENCHMARK_FIELDS}, "config": config})
    return path


def read_result(path: Path) -> tuple[RunSummary, str, Path]:
    """`(summary, kind, file)` of a run dir (summary.json), a benchmark dir (benchmark.json, its
    summary fields), or one of those files given directly; kind is "run" or "benchmark"."""
    path = Path(path)
    if path.is_dir():
        found = [(path / name, kind) for name, kind in ((SUMMARY, "run"), (BENCHMARK, "benchmark")) if (path / name).exists()]
        if not found:
            raise FileNotFoundError(f"{path} has neither {SUMMARY} nor {BENCHMARK}")
        path, kind = found[0]
    elif not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    else:
        kind = "benchmark" if path.name == BENCHMARK else "run"
    data = read_json(path)
    if kind == "benchmark" and isinstance(data, dict):
        data = {k: v for k, v in data.items() if k in BENCHMARK_FIELDS}
    return RunSummary.from_json(data, path), kind, path


def write_error(run_dir: Path, message: str) -> None:
    write_text_atomic(Path(run_dir) / ERROR, message.rstrip("\n") + "\n")


def read_error(run_dir: Path) -> str | None:
    """The failure recorded in error.txt, or None when there is none."""
    path = Path(run_dir) / ERROR
    return path.read_text().strip() if path.exists() else None


def slurm_job_id() -> str | None:
    """The SLURM job as sacct and jobs.json name it: `<array job>_<task>` for an array task."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return os.environ.get("SLURM_JOB_ID")


def lab_versions() -> dict:
    """The versions summary.json records: jax, flax, optax, the lab and Python (read from the
    installed packages' metadata: this layer imports no jax)."""
    return {**{name: importlib.metadata.version(name) for name in ("jax", "flax", "optax")},
            "ppo_lab": ppo_lab.__version__, "python": platform.python_version()}
