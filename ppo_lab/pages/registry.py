"""Every rendered block of the docs pages (`block.Block`), page by page; here, the blocks of the
pages that another module renders: docs/statistics.md's measured coverage
(`analysis/coverage.py`), README.md's closing summary, rendered from that run's record by the
function the run prints it with (`judging/closing.py`), and docs/results-zoo.md's blocks,
rendered by `ppo-lab zoo-table`'s own renderer (`analysis/zoo_report.py`) from the records its
page names: the table of the zoo's records (`docs/records/zoo`, one per preset) with its
learning curves, and the side by side with PureJaxRL (`docs/zoo_parity_*.json`)."""

from __future__ import annotations

from pathlib import Path

from ppo_lab import rundir
from ppo_lab.analysis import zoo_report as zr
from ppo_lab.judging.closing import closing_lines
from ppo_lab.pages import goodhart, pbt, performance, rare_actions, results
from ppo_lab.pages import records as rec
from ppo_lab.pages.block import Block, Figure, measured_by


COVERAGE_RECORD = "docs/statistics_coverage.json"


def _coverage(root: Path) -> str:
    from ppo_lab.analysis import coverage
    return coverage.render(rundir.read_json(root / COVERAGE_RECORD))


CLOSING = "docs/records/readme/cartpole_two_seeds"
USER_RUNS = "outputs/runs/"


def closing_summary(root: Path) -> str:
    found = rec.run(root, CLOSING)
    config = rundir.read_config(found.path)
    source = str(rundir.read_json(root / CLOSING / rundir.RECORD)["from"])
    # As a user's default run dir shows it: from its last `outputs/runs/` (the record's run dir
    # was made under a measurement's own folder, e.g. /work/outputs/x/readme/outputs/runs/...).
    at = source.rfind(USER_RUNS)
    shown = Path(source[at:]) if at >= 0 else Path(source)
    mode = "greedy" if config["eval"]["deterministic"] else "sampled"
    lines = closing_lines(found.summary, shown, eval_mode=mode, resume_command=None, env=config["env"])
    return "```\n" + "\n".join([f"$ python launch.py {rec.command(found)}", *lines]) + "\n```"


ZOO_PAGE = "docs/results-zoo.md"
ZOO_FIGURE = "docs/results-zoo.png"
ZOO_RECORDS = "docs/records/zoo"
ZOO_PARITY = ("docs/zoo_parity_breakout_minatar.json", "docs/zoo_parity_cartpole.json", "docs/zoo_parity_pendulum.json")
# The command the page names, paths as run from the repository's root.
ZOO_COMMAND = zr.command_line([Path(ZOO_RECORDS)], Path(ZOO_PAGE), Path(ZOO_FIGURE), parity=[Path(p) for p in ZOO_PARITY])
ZOO_BLOCKS = (
    Block(zr.BLOCK, ZOO_PAGE, (ZOO_RECORDS,),
          lambda root: zr.table_block([root / ZOO_RECORDS], root / ZOO_PAGE, root / ZOO_FIGURE, ZOO_COMMAND, draw=False),
          whole=True, figure=Figure(ZOO_FIGURE, lambda root, path: zr.draw_figure([root / ZOO_RECORDS], path))),
    Block(zr.PARITY_BLOCK, ZOO_PAGE, ZOO_PARITY, lambda root: zr.parity_block([root / p for p in ZOO_PARITY], ZOO_COMMAND),
          whole=True),
)

BLOCKS: tuple[Block, ...] = (
    Block("coverage", "docs/statistics.md", (COVERAGE_RECORD,), _coverage),
    Block("closing-summary", "README.md", (CLOSING,), closing_summary, measure=measured_by("readme")),
    *results.BLOCKS,
    *goodhart.RESULTS_BLOCKS,
    *rare_actions.RESULTS_BLOCKS,
    *ZOO_BLOCKS,
    *goodhart.BLOCKS,
    *pbt.BLOCKS,
    *performance.BLOCKS,
    *rare_actions.PERFORMANCE_BLOCKS,
)
NAMES = {b.name: b for b in BLOCKS}
assert len(NAMES) == len(BLOCKS), "two blocks of one name"
