"""docs/performance.md's blocks: the benchmark JSONs beside the page, as `ppo-lab benchmark
--markdown FILE.json` renders each (`bench/markdown.py`)."""

from __future__ import annotations

from pathlib import Path

from ppo_lab.bench import markdown
from ppo_lab.pages.block import Block

PAGE = "docs/performance.md"


def _benchmark(record: str):
    def render(root: Path) -> str:
        return markdown.render_file(root / record)
    return render


BLOCKS = tuple(Block(name, PAGE, (record,), _benchmark(record)) for name, record in (
    ("suite-cpu", "docs/benchmark_cpu_2core.json"),
    ("sidebyside-cpu", "docs/benchmark_cpu_sidebyside.json"),
    ("gpu", "docs/benchmark_gpu.json"),
))
