"""docs/results-zoo.md's blocks, rendered by `ppo-lab zoo-table`'s own renderer
(`analysis/zoo_report.py`) from the records its page names: the table of the zoo's records
(`docs/records/zoo`, one per preset) with its learning curves, and the side by side with
PureJaxRL (`docs/zoo_parity_*.json`)."""

from __future__ import annotations

from pathlib import Path

from ppo_lab.analysis import zoo_report as zr
from ppo_lab.pages.block import Block, Figure

PAGE = "docs/results-zoo.md"
FIGURE = "docs/results-zoo.png"
RECORDS = "docs/records/zoo"
PARITY = ("docs/zoo_parity_breakout_minatar.json", "docs/zoo_parity_cartpole.json", "docs/zoo_parity_pendulum.json")
# The command the page names, paths as run from the repository's root.
COMMAND = zr.command_line([Path(RECORDS)], Path(PAGE), Path(FIGURE), parity=[Path(p) for p in PARITY])


def table(root: Path) -> str:
    return zr.table_block([root / RECORDS], root / PAGE, root / FIGURE, COMMAND, draw=False)


def curves(root: Path, path: Path) -> None:
    zr.draw_figure([root / RECORDS], path)


def parity(root: Path) -> str:
    return zr.parity_block([root / p for p in PARITY], COMMAND)


BLOCKS = (
    Block(zr.BLOCK, PAGE, (RECORDS,), table, whole=True, figure=Figure(FIGURE, curves)),
    Block(zr.PARITY_BLOCK, PAGE, PARITY, parity, whole=True),
)
