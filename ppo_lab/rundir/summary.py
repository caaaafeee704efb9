"""How a run ended: summary.json, benchmark.json (benchmark mode) and error.txt."""

from __future__ import annotations

from pathlib import Path

from ppo_lab.rundir.atomic import write_json_atomic, write_text_atomic
from ppo_lab.rundir.jsonfile import read_json
from ppo_lab.rundir.paths import BENCHMARK, ERROR, SUMMARY


def read_summary(run_dir: Path) -> dict:
    """summary.json, or {} when the run has not written one yet."""
    return read_json(Path(run_dir) / SUMMARY, default={})


def update_summary(run_dir: Path, changes: dict) -> dict:
    """Merge `changes` into summary.json (created if missing); returns the new summary."""
    summary = read_summary(run_dir)
    summary.update(changes)
    write_json_atomic(Path(run_dir) / SUMMARY, summary)
    return summary


def read_benchmark(run_dir: Path) -> dict:
    return read_json(Path(run_dir) / BENCHMARK)


def write_benchmark(run_dir: Path, result: dict) -> Path:
    path = Path(run_dir) / BENCHMARK
    write_json_atomic(path, result)
    return path


def read_result(path: Path) -> tuple[dict, str, Path]:
    """`(data, kind, file)` of a run dir (summary.json), a benchmark dir (benchmark.json), or
    one of those files given directly; kind is "run" or "benchmark"."""
    path = Path(path)
    if path.is_dir():
        for name, kind in ((SUMMARY, "run"), (BENCHMARK, "benchmark")):
            if (path / name).exists():
                return read_json(path / name), kind, path / name
        raise FileNotFoundError(f"{path} has neither {SUMMARY} nor {BENCHMARK}")
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    return read_json(path), "benchmark" if path.name == BENCHMARK else "run", path


def write_error(run_dir: Path, message: str) -> None:
    write_text_atomic(Path(run_dir) / ERROR, message.rstrip("\n") + "\n")


def read_error(run_dir: Path) -> str | None:
    """The failure recorded in error.txt, or None when there is none."""
    path = Path(run_dir) / ERROR
    return path.read_text().strip() if path.exists() else None
