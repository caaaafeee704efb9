"""Every rendered block of the docs pages (`block.Block`), page by page; here, the blocks of the
pages whose one block another module renders: docs/statistics.md's measured coverage
(`analysis/coverage.py`) and README.md's closing summary, rendered from that run's record by
the function the run prints it with (`judging/closing.py`)."""

from __future__ import annotations

import json
from pathlib import Path

from ppo_lab import rundir
from ppo_lab.judging.closing import closing_lines
from ppo_lab.pages import goodhart, pbt, performance, rare_actions, results, zoo
from ppo_lab.pages import records as rec
from ppo_lab.pages.block import Block, measured_by


COVERAGE_RECORD = "docs/statistics_coverage.json"


def _coverage(root: Path) -> str:
    """docs/statistics.md's measured coverage, as `python -m ppo_lab.analysis.coverage --render` writes it."""
    from ppo_lab.analysis import coverage
    return coverage.render(json.loads((root / COVERAGE_RECORD).read_text()))


CLOSING = "docs/records/readme/cartpole_two_seeds"
USER_RUNS = "outputs/runs/"


def closing_summary(root: Path) -> str:
    found = rec.run(root, CLOSING)
    config = rec.config(root, CLOSING)
    source = str(rundir.read_json(root / CLOSING / rundir.RECORD)["from"])
    # As a user's default run dir shows it: from its last `outputs/runs/` (the record's run dir
    # was made under a measurement's own folder, e.g. /work/outputs/x/readme/outputs/runs/...).
    at = source.rfind(USER_RUNS)
    shown = Path(source[at:]) if at >= 0 else Path(source)
    mode = "greedy" if config["eval"]["deterministic"] else "sampled"
    lines = closing_lines(found.summary, shown, eval_mode=mode, resume_command=None, env=config["env"])
    command = " ".join(f"{k}={v}" for k, v in found.overrides.items() if not k.startswith("hydra"))
    return "```\n" + "\n".join([f"$ python launch.py {command}", *lines]) + "\n```"


BLOCKS: tuple[Block, ...] = (
    Block("coverage", "docs/statistics.md", (COVERAGE_RECORD,), _coverage, whole=True),
    Block("closing-summary", "README.md", (CLOSING,), closing_summary, measure=measured_by("readme")),
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
