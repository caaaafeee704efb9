"""Every rendered block of the docs pages (`block.Block`), page by page."""

from __future__ import annotations

import json
from pathlib import Path

from ppo_lab.pages import goodhart, pbt, performance, rare_actions, readme, results, zoo
from ppo_lab.pages.block import Block


COVERAGE_RECORD = "docs/statistics_coverage.json"


def _coverage(root: Path) -> str:
    """docs/statistics.md's measured coverage, as `python -m ppo_lab.analysis.coverage --render` writes it."""
    from ppo_lab.analysis import coverage
    return coverage.render(json.loads((root / COVERAGE_RECORD).read_text()))


BLOCKS: tuple[Block, ...] = (
    Block("coverage", "docs/statistics.md", (COVERAGE_RECORD,), _coverage, whole=True),
    *readme.BLOCKS,
    *results.BLOCKS,
    *goodhart.RESULTS_BLOCKS,
    *rare_actions.RESULTS_BLOCKS,
    *zoo.BLOCKS,
    *goodhart.BLOCKS,
    *pbt.BLOCKS,
    *performance.BLOCKS,
    *rare_actions.PERFORMANCE_BLOCKS,
)
NAMES = {b.name: b for b in BLOCKS}
assert len(NAMES) == len(BLOCKS), "two blocks of one name"
