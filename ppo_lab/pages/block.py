"""A rendered block of a docs page: its name (the page's markers), its page, the records it is
rendered from and its renderer. Records are paths under the repository's root; a renderer reads
them, and nothing else, and returns the block's markdown. A block may show a figure: a PNG
beside its page, drawn from the same records (`Figure`), that the block's markdown links."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ppo_lab.analysis import page_blocks
from ppo_lab.config_keys import PROJECT_ROOT

COMMAND = "ppo-lab docs"
MEASURE = "scripts/measure_records.sh"


def measured_by(*names: str) -> str:
    """A block's `measure`: the measurements of `scripts/measure_records.sh` that give its records."""
    return f"`{MEASURE} {' '.join(names)}` measures them and keeps the records."


@dataclass(frozen=True)
class Figure:
    """A figure a block shows: its file (relative to the root) and what draws it there from the
    root's records, `draw(root, path)`. Drawn by Agg with no timestamp, so the same records
    draw the same bytes: a figure is checked as a block's text is."""
    path: str
    draw: Callable[[Path, Path], object]

    def png(self, root: Path = PROJECT_ROOT) -> bytes:
        """The figure as its records draw it today."""
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / Path(self.path).name
            self.draw(root, out)
            return out.read_bytes()


@dataclass(frozen=True)
class Block:
    name: str
    page: str                       # relative to the root: docs/pbt.md, README.md
    records: tuple[str, ...]        # relative to the root: files or folders
    render: Callable[[Path], str]   # the root -> the block's markdown (markers left to `text`)
    whole: bool = False             # `render` gives the whole block, markers included (a command of its own writes it)
    # How the block's records are measured (markdown: the commands): while none of them is
    # committed, the block says it is not measured yet and how, and shows no figure. Without
    # it, a missing record is an error.
    measure: str = ""
    figure: Figure | None = None    # the figure the block links, drawn from the same records

    def text(self, root: Path = PROJECT_ROOT) -> str:
        """The block as its page must hold it, markers included."""
        missing = [r for r in self.records if not (root / r).exists()]
        if self.measure and len(missing) == len(self.records):
            return page_blocks.wrap(self.name, f"Not measured yet (no record {self._where()}): {self.measure}")
        if missing:
            raise FileNotFoundError(f"block {self.name!r} ({self.page}): no record {', '.join(missing)} under {root}")
        if self.whole:
            return self.render(root)
        return page_blocks.wrap(self.name, f"{self.render(root).strip()}\n\n*Rendered by `{COMMAND}` from {self._where()}.*")

    def _where(self) -> str:
        return ", ".join(f"`{r}`" for r in self.records)

